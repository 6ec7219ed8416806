package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/host"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// pausingIntents pauses forever after keeping an intent, having touched
// marker: the point between a tool's intent and its effect.
type pausingIntents struct {
	changes.IntentLog
	marker string
}

func (p pausingIntents) WriteIntent(key string, in changes.Intent) error {
	if err := p.IntentLog.WriteIntent(key, in); err != nil {
		return err
	}
	_ = os.WriteFile(p.marker, nil, 0o600)
	select {}
}

// TestIntentCrashHelper is the child process of TestIntentSurvivesSIGKILL:
// it runs a prompt whose edit and write pause (to be killed) after their
// intent (mode "intent") or after their effect, before the result is
// recorded (mode "effect").
func TestIntentCrashHelper(t *testing.T) {
	home := os.Getenv("OCTET_INTENT_CRASH_HOME")
	if home == "" {
		t.Skip("child process of TestIntentSurvivesSIGKILL")
	}
	st := newStack(t, tools.UnsafeHost)
	st.Home, st.Workspace = home, os.Getenv("OCTET_INTENT_CRASH_WORKSPACE")
	st.Runtime.SessionsDir = filepath.Join(home, "sessions")
	marker := filepath.Join(home, "paused")
	switch os.Getenv("OCTET_INTENT_CRASH_MODE") {
	case "intent":
		st.Intents = func(l changes.IntentLog) changes.IntentLog { return pausingIntents{l, marker} }
	case "effect":
		st.Hooks = []tools.Hooks{{AfterToolCall: func(context.Context, tools.EffectIntent, tools.Result) {
			_ = os.WriteFile(marker, nil, 0o600)
			select {}
		}}}
	}
	// Mode "command": the command itself touches the marker and waits.
	st.Provider.Enqueue(pt.Reply(pt.FunctionCall("w1", os.Getenv("OCTET_INTENT_CRASH_TOOL"), os.Getenv("OCTET_INTENT_CRASH_ARGS"))), pt.Text("done"))
	e := st.editor(t, Options{}, nil)
	sid := e.newSession()
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "go"}))
	t.Fatal("the call was not paused")
}

// TestIntentSurvivesSIGKILL kills a real process running an edit (and a
// write creating a file) right after the call kept its intended change
// and before the effect, and right after the effect and before its result
// was recorded; and a real bash process killed (with octet) while its
// command runs, after it changed a file. Reopened, the session records
// the call as indeterminate with the intended change — for bash, the
// difference between its prior snapshot and the workspace — in its
// details (the ledger shows it), and a rewind to the prompt brings the
// file back to its prior state from either point, without a conflict.
func TestIntentSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	cases := []struct {
		name, mode, tool, args string
		before, after          []byte // the file's bytes (nil: absent)
	}{
		{"edit killed before the effect", "intent", "edit", `{"path":"a.txt","old_text":"one","new_text":"1"}`, []byte("one\n"), []byte("1\n")},
		{"edit killed after the effect", "effect", "edit", `{"path":"a.txt","old_text":"one","new_text":"1"}`, []byte("one\n"), []byte("1\n")},
		{"write killed before the effect", "intent", "write", `{"path":"new/b.txt","content":"bee\n"}`, nil, []byte("bee\n")},
		{"write killed after the effect", "effect", "write", `{"path":"new/b.txt","content":"bee\n"}`, nil, []byte("bee\n")},
		{"bash killed while its command runs", "command", "bash", `{"command":"sed -i s/one/1/ a.txt && : > {marker} && sleep 5"}`, []byte("one\n"), []byte("1\n")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := newStack(t, tools.UnsafeHost)
			file := filepath.Join(st.Workspace, "a.txt")
			if c.tool == "write" {
				file = filepath.Join(st.Workspace, "new", "b.txt")
			} else {
				writeMode(t, file, string(c.before), 0o644)
			}
			args := strings.ReplaceAll(c.args, "{marker}", filepath.Join(st.Home, "paused"))
			cmd := exec.Command(os.Args[0], "-test.run=^TestIntentCrashHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), "OCTET_INTENT_CRASH_HOME="+st.Home, "OCTET_INTENT_CRASH_WORKSPACE="+st.Workspace,
				"OCTET_INTENT_CRASH_MODE="+c.mode, "OCTET_INTENT_CRASH_TOOL="+c.tool, "OCTET_INTENT_CRASH_ARGS="+args)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				if _, err := os.Stat(filepath.Join(st.Home, "paused")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatal("the child never paused")
				}
				time.Sleep(time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			want := c.before
			if c.mode != "intent" {
				want = c.after
			}
			wantFile(t, "after the kill", file, want, 0o644)

			ents, _ := os.ReadDir(st.Runtime.SessionsDir)
			var sid string
			for _, e := range ents {
				if name, ok := strings.CutSuffix(e.Name(), ".jsonl"); ok {
					sid = name
				}
			}
			// Reopening resolves the call; the prompt is the first entry.
			h, err := host.New(st.Runtime, nil).Open(context.Background(), sid, host.Binding{})
			if err != nil {
				t.Fatal(err)
			}
			sess := h.Ledger()
			var prompt string
			var recovered *session.ToolResult
			for _, e := range sess.Branch() {
				if e.Type == session.EntryUser && prompt == "" {
					prompt = e.ID
				}
				if e.Type == session.EntryToolResult && e.Result.CallID == "w1" {
					recovered = e.Result
				}
			}
			h.Close()
			if recovered == nil || recovered.Details["crash_recovery"] != "indeterminate" || recovered.Details[changes.IntentKey] != true {
				t.Fatalf("recovered result: %+v", recovered)
			}
			wantRecs := 1
			if c.tool == "write" {
				wantRecs = 2 // creating new/b.txt also records the directory new
			}
			recs, err := changes.FromDetails(recovered.Details)
			if err != nil || len(recs) != wantRecs {
				t.Fatalf("recovered changes: %v, %v", recs, err)
			}
			res := rewindIn(t, st, sid, prompt)
			for _, ch := range res.Changes {
				if ch.Conflict != "" {
					t.Errorf("rewind after the kill: %s: %s", ch.Path, ch.Conflict)
				}
			}
			if wantN := map[string]int{"intent": 0, "effect": wantRecs, "command": 1}[c.mode]; !res.Applied || len(res.Changes) != wantN {
				t.Errorf("rewind after the kill: applied %v, %d changes, want %d", res.Applied, len(res.Changes), wantN)
			}
			wantFile(t, "after the rewind", file, c.before, 0o644)
			if c.tool == "write" {
				if _, err := os.Lstat(filepath.Dir(file)); !os.IsNotExist(err) {
					t.Errorf("after the rewind, the directory the write created: %v", err)
				}
			}
		})
	}
}
