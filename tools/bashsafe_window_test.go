//go:build linux

package tools

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestReadOnlyCheckToExecWindow measures the window the read-only checker
// cannot close (docs/security.md states the figure): between the check of
// an auto-approved `cat d/f` and the command opening it, a workspace
// directory d is swapped with a link to a directory outside. Only an OS
// sandbox closes it. It is a measurement, not a guard: it runs with
// OCTET_MEASURE_WINDOW=1 and reports how many calls read outside.
//
//	OCTET_MEASURE_WINDOW=1 go test -run TestReadOnlyCheckToExecWindow -v ./tools
func TestReadOnlyCheckToExecWindow(t *testing.T) {
	if os.Getenv("OCTET_MEASURE_WINDOW") == "" {
		t.Skip("a measurement: set OCTET_MEASURE_WINDOW=1")
	}
	ws, outside := t.TempDir(), t.TempDir()
	writeTestFile(t, filepath.Join(outside, "f"), "OUTSIDE-SECRET\n")
	real := filepath.Join(ws, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(real, "f"), "inside\n")
	d, link, parked := filepath.Join(ws, "d"), filepath.Join(ws, "link"), filepath.Join(ws, "parked")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(real, d); err != nil {
		t.Fatal(err)
	}
	b := newBash(t, Config{Root: ws})
	br := NewBroker(BrokerConfig{Policy: Controlled})
	host := mustHost(t, b)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		// Swap d between the real directory and the link, atomically.
		defer close(done)
		for !stop.Load() {
			os.Rename(d, parked)
			os.Rename(link, d)
			os.Rename(d, link)
			os.Rename(parked, d)
		}
	}()
	const calls = 300
	var auto, leaked int
	for i := range calls {
		res, dec := br.Dispatch(t.Context(), host, DispatchRequest{CallID: "c" + string(rune('a'+i%26)), Tool: "bash",
			Arguments: argsJSON(t, map[string]any{"command": "cat d/f"})}, DispatchObserver{})
		if dec.Reason == ReasonReadOnlyCommand {
			auto++
		}
		if strings.Contains(res.Text, "OUTSIDE-SECRET") {
			leaked++
		}
	}
	stop.Store(true)
	<-done
	t.Logf("%d of %d calls auto-approved; %d of them read the file outside the workspace", auto, calls, leaked)
}
