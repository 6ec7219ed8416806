//go:build linux

package tools

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
	eff := DefaultToolPolicy(Controlled, ShellSystemBash)
	eff.Sandbox = HostSandbox(SandboxNone, SourceConfig)
	const calls = 300
	w := swapWindow(t, NewBroker(BrokerConfig{Policy: Controlled, EffectivePolicy: eff}), 0, calls, 0)
	t.Logf("%d of %d calls auto-approved; %d of them read the file outside the workspace", w.auto, w.calls, w.leaked)
}

// TestReadOnlyCheckToExecWindowSandboxed reruns the race with the OS
// sandbox on (controlled's default: auto-approved reads run read-only):
// the kernel resolves the swapped link when the command opens it and
// refuses the file outside, so none of 1,000 auto-approved calls reads
// it. The swap holds each state briefly, so most calls are auto-approved
// and many of those open d while it is the link (the kernel's refusals,
// counted, show that the race was run; the same swap without the sandbox
// reads outside).
func TestReadOnlyCheckToExecWindowSandboxed(t *testing.T) {
	requireSandbox(t)
	if testing.Short() {
		t.Skip("-short: 1,000 commands")
	}
	const tries = 1000
	w := swapWindow(t, NewBroker(BrokerConfig{Policy: Controlled}), tries, 10*tries, 300*time.Microsecond)
	t.Logf("%d calls, %d auto-approved; %d of them read the file outside the workspace, %d were refused by the sandbox", w.calls, w.auto, w.leaked, w.refused)
	if w.auto < tries || w.refused == 0 {
		t.Fatalf("the race was not exercised: %d auto-approved calls, %d refused", w.auto, w.refused)
	}
	if w.leaked != 0 {
		t.Fatalf("%d of %d auto-approved sandboxed calls read the file outside the workspace", w.leaked, w.auto)
	}
}

// window is what swapWindow saw.
type window struct {
	calls, auto, leaked, refused int
}

// swapWindow runs `cat d/f` calls through br, until autos of them were
// auto-approved (0: exactly maxCalls), while another goroutine swaps the
// workspace directory d with a link to a directory outside, holding each
// state for hold; it counts the auto-approved calls, the calls that read
// outside and the auto-approved ones the kernel refused.
func swapWindow(t *testing.T, br *Broker, autos, maxCalls int, hold time.Duration) (w window) {
	t.Helper()
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
	host := mustHost(t, b)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		// Swap d between the real directory and the link, atomically.
		defer close(done)
		pause := func() {
			if hold > 0 {
				time.Sleep(hold)
			}
		}
		for !stop.Load() {
			os.Rename(d, parked)
			os.Rename(link, d)
			pause()
			os.Rename(d, link)
			os.Rename(parked, d)
			pause()
		}
	}()
	for i := 0; i < maxCalls && (autos == 0 || w.auto < autos); i++ {
		res, dec := br.Dispatch(t.Context(), host, DispatchRequest{CallID: "c" + string(rune('a'+i%26)), Tool: "bash",
			Arguments: argsJSON(t, map[string]any{"command": "cat d/f"})}, DispatchObserver{})
		w.calls++
		if dec.Reason == ReasonReadOnlyCommand {
			w.auto++
			if strings.Contains(res.Text, "Permission denied") {
				w.refused++
			}
		}
		if strings.Contains(res.Text, "OUTSIDE-SECRET") {
			w.leaked++
		}
	}
	stop.Store(true)
	<-done
	return w
}
