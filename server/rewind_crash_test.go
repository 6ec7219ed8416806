package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// crashFiles is how many files the crash test's session changed: enough
// that restoring them (two fsyncs each) takes a while to kill into.
const crashFiles = 120

// crashLedger creates, in st, a session whose one tool result changed
// crashFiles files from "before i" to "after i" (the disk holds the after
// state), and returns its id and the ids of the entries before and after
// the change.
func crashLedger(t *testing.T, st *stack) (sid, start, end string) {
	t.Helper()
	store, err := changes.OpenWorkspace(st.Home, st.Workspace, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := &changes.Recorder{Store: store}
	var recs []changes.Record
	for i := range crashFiles {
		name := fmt.Sprintf("f%03d.txt", i)
		r, _, err := rec.Stage(name, &changes.File{Data: []byte(fmt.Sprintf("before %d\n", i)), Mode: 0o600},
			&changes.File{Data: []byte(fmt.Sprintf("after %d\n", i)), Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
		writeMode(t, filepath.Join(st.Workspace, name), fmt.Sprintf("after %d\n", i), 0o644)
	}
	sess, err := session.Create(st.Runtime.SessionsDir, session.Header{Cwd: st.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	u, err := sess.AppendEntry(session.Entry{Type: session.EntryUser, Text: "change everything"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Append(
		session.EntryRecord(session.Entry{Type: session.EntryAssistant, Items: []session.Item{{Type: session.ItemFunctionCall, CallID: "c1", Name: "write", Arguments: "{}"}}}),
		session.EntryRecord(session.Entry{Type: session.EntryToolResult, Result: &session.ToolResult{CallID: "c1", Tool: "write", Text: "ok", Details: map[string]any{changes.DetailsKey: recs}}}),
	); err != nil {
		t.Fatal(err)
	}
	return sess.Header().ID, u.ID, sess.Head()
}

// TestRewindCrashHelper is the child process of TestRewindSurvivesSIGKILL:
// it rewinds the session named in its environment and is killed while
// doing so.
func TestRewindCrashHelper(t *testing.T) {
	home := os.Getenv("OCTET_REWIND_CRASH_HOME")
	if home == "" {
		t.Skip("child process of TestRewindSurvivesSIGKILL")
	}
	st := newStack(t, tools.UnsafeHost)
	st.Home, st.Workspace = home, os.Getenv("OCTET_REWIND_CRASH_WORKSPACE")
	st.Runtime.SessionsDir = filepath.Join(home, "sessions")
	rewindIn(t, st, os.Getenv("OCTET_REWIND_CRASH_SESSION"), os.Getenv("OCTET_REWIND_CRASH_ENTRY"))
}

// rewindIn opens session sid of st in this process and rewinds its files
// to entry.
func rewindIn(t *testing.T, st *stack, sid, entry string) host.RewindResult {
	t.Helper()
	h, err := host.New(st.Runtime, nil).Open(context.Background(), sid, host.Binding{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	res, err := h.Rewind(context.Background(), host.RewindParams{SessionID: sid, EntryID: entry, Files: true})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRewindSurvivesSIGKILL kills a real process rewinding 120 files at a
// random point after it recorded its plan: every file is then in its
// state before or after the rewind, and a later rewind to the same entry
// completes the rest without a conflict (even rounds), or one to the
// entry before the rewind undoes exactly the files it restored (odd
// rounds), reading their images back from the store.
func TestRewindSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for round := range 2 {
		st := newStack(t, tools.UnsafeHost)
		sid, start, end := crashLedger(t, st)
		ledger := filepath.Join(st.Runtime.SessionsDir, sid+".jsonl")
		cmd := exec.Command(os.Args[0], "-test.run=^TestRewindCrashHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "OCTET_REWIND_CRASH_HOME="+st.Home, "OCTET_REWIND_CRASH_WORKSPACE="+st.Workspace,
			"OCTET_REWIND_CRASH_SESSION="+sid, "OCTET_REWIND_CRASH_ENTRY="+start)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			data, _ := os.ReadFile(ledger)
			if strings.Contains(string(data), `"type":"rewind"`) {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("round %d: the child never recorded its rewind plan", round)
			}
			time.Sleep(200 * time.Microsecond)
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()

		restored := 0
		for i := range crashFiles {
			p := filepath.Join(st.Workspace, fmt.Sprintf("f%03d.txt", i))
			data, err := os.ReadFile(p)
			fi, serr := os.Lstat(p)
			switch {
			case err != nil || serr != nil:
				t.Fatalf("round %d: %s: %v %v", round, p, err, serr)
			case string(data) == fmt.Sprintf("before %d\n", i) && fi.Mode().Perm() == 0o600:
				restored++
			case string(data) == fmt.Sprintf("after %d\n", i) && fi.Mode().Perm() == 0o644:
			default:
				t.Fatalf("round %d: %s is neither before nor after: %q %v", round, p, data, fi.Mode())
			}
		}
		t.Logf("round %d: killed with %d of %d files restored", round, restored, crashFiles)

		to, want, state, mode := start, crashFiles-restored, "before %d\n", os.FileMode(0o600)
		if round%2 == 1 {
			to, want, state, mode = end, restored, "after %d\n", 0o644
		}
		res := rewindIn(t, st, sid, to)
		if !res.Applied || len(res.Changes) != want {
			t.Fatalf("round %d: rewind after the kill: applied %v, %d changes, want %d", round, res.Applied, len(res.Changes), want)
		}
		for _, c := range res.Changes {
			if c.Conflict != "" {
				t.Fatalf("round %d: rewind after the kill: conflict %s: %s", round, c.Path, c.Conflict)
			}
		}
		for i := range crashFiles {
			wantFile(t, "after the rewind after the kill", filepath.Join(st.Workspace, fmt.Sprintf("f%03d.txt", i)), []byte(fmt.Sprintf(state, i)), mode)
		}
	}
}
