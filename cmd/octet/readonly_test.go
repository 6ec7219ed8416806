//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestInspectionLeavesLiveRunAlone: while a real `octet exec` under a
// cost ceiling has a request in flight, `octet sessions diff`, `show`,
// `export` and `rewind --dry-run` (each a real process) read the session
// without touching it: the live run completes, its session stays
// complete (no unsettled_dispatch marker), and the next prompt under the
// ceiling is served. On the old code diff and the dry run opened the
// session for writing and recorded the live request as unsettled: the
// live run then failed ("a request was in flight when octet stopped")
// and every later prompt was refused.
func TestInspectionLeavesLiveRunAlone(t *testing.T) {
	// The first answer streams for about 5 s: the inspections run while
	// it does.
	long := strings.Repeat("streaming while another process reads the session ", 60)
	x := newExecEnv(t,
		providertest.Reply(providertest.Message(long), providertest.FunctionCall("w1", "write", `{"path":"made.txt","content":"made\n"}`)).Pace(10*time.Millisecond),
		providertest.Text("done"),
		providertest.Text("again"),
	)
	x.writeGlobalConfig(t, "max_session_cost_usd = \"10\"\n")
	live := x.octetCmd(t, "exec", "--json", "make a file")
	var out, errb bytes.Buffer
	live.Stdout, live.Stderr = &out, &errb
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	x.awaitRequests(t, 1)
	file := x.oneSession(t)
	sid := sessionIDOf(file)
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	entry := firstEntry(t, string(before))
	for _, args := range [][]string{
		{"sessions", "diff", sid},
		{"sessions", "rewind", sid, entry, "--dry-run"},
		{"sessions", "show", sid},
		{"sessions", "export", sid},
	} {
		if r := x.runOctet(t, args...); r.code != exitOK {
			t.Errorf("%s during the run: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(after, before) {
		t.Errorf("reading the session changed it: %d bytes before, %d after:\n%s", len(before), len(after), after[len(before):])
	}
	if n := len(x.srv.Requests()); n != 1 {
		t.Fatalf("test setup: the first answer stopped streaming before the inspections ended (%d requests)", n)
	}
	if err := live.Wait(); err != nil {
		t.Fatalf("the live run: %v\nstderr: %s", err, errb.String())
	}
	s, err := session.Inspect(file)
	if err != nil {
		t.Fatal(err)
	}
	tot := s.Totals()
	s.Close()
	if tot.Uncertain || tot.UncertainMarkers != 0 {
		t.Fatalf("the live run's session became uncertain: %+v", tot)
	}
	if r := x.runOctet(t, "exec", "--session", sid, "once more"); r.code != exitOK {
		t.Errorf("the next prompt under the ceiling: exit %d\n%s", r.code, r.stderr)
	}
}

// TestInspectionOnReadOnlyHome: with OCTET_HOME read-only (a read-only
// bind mount, which stops root too), `octet sessions diff`, `show`,
// `export` and `rewind --dry-run` still answer; diff failed there on the
// old code (it opened the session for writing).
func TestInspectionOnReadOnlyHome(t *testing.T) {
	x, sid, entry := madeFileSession(t)
	readOnlyBind(t, x.home)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sessions", "diff", sid}, "== made.txt (add)"},
		{[]string{"sessions", "rewind", sid, entry, "--dry-run"}, "  delete   made.txt"},
		{[]string{"sessions", "show", sid}, "run "},
		{[]string{"sessions", "export", sid}, `"kind":"checkpoint"`},
	} {
		r := x.runOctet(t, tc.args...)
		if r.code != exitOK || !strings.Contains(r.stdout, tc.want) {
			t.Errorf("%s on a read-only OCTET_HOME: exit %d\n%s%s", strings.Join(tc.args, " "), r.code, r.stdout, r.stderr)
		}
	}
}

// readOnlyBind makes dir read-only with a read-only bind mount of itself
// (skipping when mounts are not allowed) until the test ends or undo is
// called.
func readOnlyBind(t *testing.T, dir string) (undo func()) {
	t.Helper()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mounts need CAP_SYS_ADMIN (root in CI): %v", err)
	}
	mounted := true
	undo = func() {
		if mounted {
			mounted = false
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	}
	t.Cleanup(undo)
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o600); !errors.Is(err, unix.EROFS) {
		t.Fatalf("%s is writable (%v); the test needs it read-only", dir, err)
	}
	return undo
}

// TestRewindOnReadOnlyHomeSaysWhy: sessions rewind (which writes) on a
// read-only OCTET_HOME fails saying why and what to do, as exec
// --session does, and names the step once. It printed the bare error
// ("open session: open session: … read-only file system").
func TestRewindOnReadOnlyHomeSaysWhy(t *testing.T) {
	x, sid, entry := madeFileSession(t)
	readOnlyBind(t, x.home)
	r := x.runOctet(t, "sessions", "rewind", sid, entry)
	if r.code != exitFailed || !strings.Contains(r.stderr, "is read-only: make it writable again") || strings.Contains(r.stderr, "open session: open session") {
		t.Errorf("rewind on a read-only OCTET_HOME: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(x.ws, "made.txt")); err != nil {
		t.Errorf("the failed rewind changed the workspace: %v", err)
	}
}

// TestRewindRefusesALiveRun: sessions rewind (files or conversation) of a
// session whose run another process (here a real octet exec) has in
// progress is refused (exit 1), as octet/session/rewind is while a run
// is active, and changes nothing; once the run ended it works. The CLI
// went ahead: the live run's answer was attached to the rewound entry,
// under the wrong prompt, and its files could be restored under it.
func TestRewindRefusesALiveRun(t *testing.T) {
	long := strings.Repeat("streaming while someone rewinds the session ", 60)
	x := newExecEnv(t, append(editTurns(), providertest.Text(long).Pace(10*time.Millisecond))...)
	if r := x.runOctet(t, "exec", "--json", "change beta"); r.code != exitOK {
		t.Fatalf("exec: exit %d\n%s", r.code, r.stderr)
	}
	files := x.sessionFiles(t)
	if len(files) != 1 {
		t.Fatalf("session files %v", files)
	}
	sid := strings.TrimSuffix(filepath.Base(files[0]), ".jsonl")
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	entry := firstEntry(t, string(raw))
	live := x.octetCmd(t, "exec", "--session", sid, "go on")
	var errb bytes.Buffer
	live.Stderr = &errb
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	x.awaitRequests(t, 4)
	for _, mode := range []string{"--files", "--conversation"} {
		before, _ := os.ReadFile(files[0])
		r := x.runOctet(t, "sessions", "rewind", sid, entry, mode)
		if r.code != exitFailed || !strings.Contains(r.stderr, "a run in progress in another process") {
			t.Errorf("rewind %s during a live run: exit %d\n%s%s", mode, r.code, r.stdout, r.stderr)
		}
		if after, _ := os.ReadFile(files[0]); !bytes.Equal(after, before) {
			t.Errorf("rewind %s during a live run changed the session:\n%s", mode, after[len(before):])
		}
	}
	if got, _ := os.ReadFile(filepath.Join(x.ws, "notes.txt")); string(got) != "alpha\ngamma\n" {
		t.Errorf("notes.txt %q: restored under the live run", got)
	}
	if err := live.Wait(); err != nil {
		t.Fatalf("the live run: %v\n%s", err, errb.String())
	}
	if r := x.runOctet(t, "sessions", "rewind", sid, entry); r.code != exitOK {
		t.Errorf("rewind after the run ended: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestExecRefusesALiveRun: octet exec --session of a session another
// process (here a real octet exec) has a run of in progress is refused
// (exit 1) before any request, as octet/prompt is while a run is active.
// It went ahead: the two runs interleaved on one branch (each run's
// answer under the other's prompt) and the second reported its usage
// uncertain because of the first's request in flight.
func TestExecRefusesALiveRun(t *testing.T) {
	long := strings.Repeat("streaming while another exec continues the session ", 60)
	x := newExecEnv(t, providertest.Text("one"), providertest.Text(long).Pace(10*time.Millisecond), providertest.Text("three"))
	r := x.runOctet(t, "exec", "--json", "first")
	sid := parseResult(t, r.stdout).SessionID
	live := x.octetCmd(t, "exec", "--session", sid, "second")
	var errb bytes.Buffer
	live.Stderr = &errb
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	x.awaitRequests(t, 2)
	before, _ := os.ReadFile(x.sessionFiles(t)[0])
	r = x.runOctet(t, "exec", "--session", sid, "third")
	if r.code != exitFailed || !strings.Contains(r.stderr, "a run in progress in another process") {
		t.Fatalf("exec during a live run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := len(x.srv.Requests()); n != 2 {
		t.Errorf("%d provider requests, want 2", n)
	}
	if after, _ := os.ReadFile(x.sessionFiles(t)[0]); !bytes.HasPrefix(after, before) || bytes.Contains(after, []byte(`"third"`)) {
		t.Errorf("the refused exec wrote to the session:\n%s", after[len(before):])
	}
	if err := live.Wait(); err != nil {
		t.Fatalf("the live run: %v\n%s", err, errb.String())
	}
	if strings.Contains(errb.String(), "uncertain") {
		t.Errorf("the live run reports uncertain usage:\n%s", errb.String())
	}
	if r := x.runOctet(t, "exec", "--session", sid, "third"); r.code != exitOK {
		t.Errorf("exec after the run ended: exit %d\n%s", r.code, r.stderr)
	}
}

// TestWritesOnReadOnlyHomeSayWhat: sessions delete and login on a
// read-only OCTET_HOME fail saying what to do, as exec --session does
// (they printed the bare "read-only file system").
func TestWritesOnReadOnlyHomeSayWhat(t *testing.T) {
	x := newExecEnv(t, providertest.Text("done"))
	if r := x.runOctet(t, "exec", "hello"); r.code != exitOK {
		t.Fatalf("exec: exit %d\n%s", r.code, r.stderr)
	}
	file := x.oneSession(t)
	sid := sessionIDOf(file)
	readOnlyBind(t, x.home)
	const advice = "is read-only: make it writable again"
	if r := x.runOctet(t, "sessions", "delete", sid); r.code != exitFailed || !strings.Contains(r.stderr, advice) {
		t.Errorf("sessions delete: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the session is gone: %v", err)
	}
	r := runBin(t, x.home, map[string]string{"OCTET_HOME": x.home}, "sk-read-only-1\n", "login")
	if r.code == exitOK || !strings.Contains(r.stderr, advice) || strings.Contains(r.stdout+r.stderr, "sk-read-only") {
		t.Errorf("login: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
