package mcp

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether process pid exists (signal 0).
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(syscall.Signal(0)) == nil
}

// TestHoldStopsAndReleaseStarts: a manager started held starts no
// process and registers no tool; Release starts its servers; Hold stops
// the process tree and withdraws the tools before it returns, and the
// server is listed disabled with the hold's reason; Enable is refused
// while held.
func TestHoldStopsAndReleaseStarts(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("signal 0 liveness check is POSIX")
	}
	const why = "effect policy controlled_bash_approval (this session)"
	f := start(t, Options{Servers: []Spec{stdioSpec("t")}, Hold: why})
	if s := f.server(t, "t"); s.State != StateDisabled || s.Reason != why {
		t.Fatalf("held at start: state %s (%s)", s.State, s.Reason)
	}
	if n := len(f.host.Tools()); n != 0 {
		t.Fatalf("held at start: %d tools registered", n)
	}
	if _, err := f.m.Enable("t", nil); err == nil || !strings.Contains(err.Error(), why) {
		t.Fatalf("Enable while held: %v", err)
	}

	f.m.Release(context.Background())
	if s := f.server(t, "t"); s.State != StateRunning {
		t.Fatalf("after Release: state %s (%s)", s.State, s.Reason)
	}
	res, _ := f.call(t, "mcp__t__pid", `{}`)
	pid, err := strconv.Atoi(strings.TrimSpace(res.Text))
	if err != nil || !alive(pid) {
		t.Fatalf("pid %q: %v", res.Text, err)
	}

	f.m.Hold(why)
	if alive(pid) {
		// The guard reaps it; give the kernel a moment to finish.
		waitFor(t, "the held server's process to end", func() bool { return !alive(pid) })
	}
	if _, ok := f.host.Lookup("mcp__t__pid"); ok {
		t.Fatal("a held server's tool is still registered")
	}
	s := f.server(t, "t")
	if s.State != StateDisabled || s.Reason != why {
		t.Fatalf("after Hold: state %s (%s)", s.State, s.Reason)
	}
	for _, ti := range s.Tools {
		if ti.State == ToolActive {
			t.Errorf("tool %s listed active while held", ti.Name)
		}
	}

	// Released again, it comes back with its tools.
	f.m.Release(context.Background())
	waitFor(t, "the server to run again", func() bool { return f.server(t, "t").State == StateRunning })
	if _, ok := f.host.Lookup("mcp__t__echo"); !ok {
		t.Fatal("tools not registered after a second Release")
	}
}

// TestStdioServerOutsideWorkspace: a hostile workspace cannot choose what
// a configured command runs. The command is looked up on PATH without
// the workspace's entries and relative ones (a same-named program there
// is never run), the server's PATH has them removed, it starts in
// Options.Dir rather than the workspace, and it learns the workspace as
// its MCP root.
func TestStdioServerOutsideWorkspace(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("shell-script decoy")
	}
	ws := t.TempDir()
	dir := t.TempDir()
	good := t.TempDir()
	marker := filepath.Join(t.TempDir(), "decoy-ran")
	// The real server, by a plain name, outside the workspace.
	if err := os.Symlink(serverBin, filepath.Join(good, "mcp-srv")); err != nil {
		t.Fatal(err)
	}
	// A decoy with the same name in the workspace, and in the working
	// directory a relative entry would name.
	decoy := "#!/bin/sh\ntouch " + marker + "\nexit 1\n"
	for _, d := range []string{filepath.Join(ws, "bin"), ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "mcp-srv"), []byte(decoy), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := strings.Join([]string{filepath.Join(ws, "bin"), "", ".", "bin", good}, string(filepath.ListSeparator))
	sp := Spec{Name: "t", Command: "mcp-srv", Env: map[string]string{"PATH": path}, StartupTimeout: 30 * time.Second, ToolTimeout: 10 * time.Second}
	f := start(t, Options{Servers: []Spec{sp}, Workspace: ws, Dir: dir})
	if s := f.server(t, "t"); s.State != StateRunning {
		t.Fatalf("state %s (%s)", s.State, s.Reason)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the workspace's decoy ran")
	}
	res, _ := f.call(t, "mcp__t__where", `{}`)
	got := map[string]string{}
	for _, line := range strings.Split(res.Text, "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	if got["cwd"] != dir {
		t.Errorf("server cwd = %q, want %q (not the workspace %q)", got["cwd"], dir, ws)
	}
	if got["path"] != good {
		t.Errorf("server PATH = %q, want only %q", got["path"], good)
	}
	if want := fileURI(ws); got["roots"] != want {
		t.Errorf("server roots = %q, want %q", got["roots"], want)
	}
}
