package host_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// testHost is a host over the real runtime (hosttest) at launch policy
// launch, with the scripted provider played in process: no sockets and
// no JSON-RPC.
type testHost struct {
	*host.Host
	*hosttest.Stack
}

func newTestHost(t *testing.T, o hosttest.Options) *testHost {
	t.Helper()
	o.InProcess = true
	st := hosttest.New(t, o)
	th := &testHost{Host: host.New(st.Runtime, nil), Stack: st}
	t.Cleanup(func() { th.Host.Close() })
	return th
}

// create makes a session in the workspace, closed at the test's end.
func (th *testHost) create(t *testing.T, spec host.Spec) *host.Session {
	t.Helper()
	if spec.Cwd == "" {
		spec.Cwd = th.Workspace
	}
	s, err := th.Create(t.Context(), spec, host.Binding{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// prompt runs text to its end.
func prompt(t *testing.T, s *host.Session, text string) agent.RunResult {
	t.Helper()
	r, err := s.Prompt(t.Context(), text, agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	res := r.Wait()
	if res.Err != nil {
		t.Fatalf("run %s: %v", res.RunID, res.Err)
	}
	return res
}

func sessionFiles(t *testing.T, th *testHost) []string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(th.Stack.Runtime.SessionsDir, "*.jsonl"))
	return names
}

// TestCreateOpenListDelete: a created session is listed, keeps its
// recorded policy across a close and an open, and is gone after Delete
// (opening it or deleting it again is host.ErrNoSession).
func TestCreateOpenListDelete(t *testing.T) {
	th := newTestHost(t, hosttest.Options{Policy: tools.UnsafeHost})
	ask := tools.Controlled
	s, err := th.Create(t.Context(), host.Spec{Cwd: th.Workspace, Title: "first", Policy: &ask}, host.Binding{})
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	if got := s.Broker().Policy(); got != tools.Controlled {
		t.Errorf("new session's policy %v, want controlled", got)
	}
	list, err := th.List(t.Context())
	if err != nil || len(list) != 1 || list[0].SessionID != id || list[0].Title != "first" || list[0].Cwd != th.Workspace {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if p := th.RecordedPolicy(id); p == nil || *p != tools.Controlled {
		t.Errorf("recorded policy %v, want controlled", p)
	}
	again, err := th.Open(t.Context(), id, host.Binding{})
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Broker().Policy(); got != tools.Controlled {
		t.Errorf("reopened session's policy %v, want controlled", got)
	}
	again.Close()
	if err := th.Delete(id); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{id, "", ".", "../x", "a/b"} {
		if _, err := th.Open(t.Context(), bad, host.Binding{}); !errors.Is(err, host.ErrNoSession) {
			t.Errorf("open %q: %v, want host.ErrNoSession", bad, err)
		}
	}
	if err := th.Delete(id); !errors.Is(err, host.ErrNoSession) {
		t.Errorf("second delete: %v, want host.ErrNoSession", err)
	}
}

// TestRefusedCreateLeavesNothing: a policy looser than the launch policy
// and an agent the runtime cannot build each refuse the creation, with
// their typed errors, and leave no session file.
func TestRefusedCreateLeavesNothing(t *testing.T) {
	th := newTestHost(t, hosttest.Options{Policy: tools.Controlled})
	loose := tools.UnsafeHost
	if _, err := th.Create(t.Context(), host.Spec{Cwd: th.Workspace, Policy: &loose}, host.Binding{}); !errors.Is(err, tools.ErrPolicyLooser) {
		t.Errorf("looser policy: %v, want ErrPolicyLooser", err)
	}
	th.NewAgentErr = errors.New("no credentials")
	_, err := th.Create(t.Context(), host.Spec{Cwd: th.Workspace}, host.Binding{})
	if _, ok := errors.AsType[*host.AgentError](err); !ok || err.Error() != "build agent: no credentials" {
		t.Errorf("failed agent: %v, want an host.AgentError", err)
	}
	if _, err := th.Create(t.Context(), host.Spec{Cwd: filepath.Join(th.Workspace, "missing")}, host.Binding{}); err == nil {
		t.Errorf("a missing workspace was accepted")
	}
	if files := sessionFiles(t, th); len(files) != 0 {
		t.Errorf("refused creations left %v", files)
	}
}

// TestRunForkDiffRewind drives one run that writes a file, then the
// operations on its result: the automatic title, the transcript page,
// the diff, a fork (refused where calls lack their results), a dry
// rewind and a real one.
func TestRunForkDiffRewind(t *testing.T) {
	th := newTestHost(t, hosttest.Options{Policy: tools.UnsafeHost})
	s := th.create(t, host.Spec{})
	path := filepath.Join(th.Workspace, "a.txt")
	th.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "write", `{"path":"a.txt","content":"hello\n"}`)),
		providertest.Text("done"),
	)
	if err := s.TitleFromPrompt("write a file\nplease"); err != nil {
		t.Fatal(err)
	}
	res := prompt(t, s, "write a file\nplease")
	if got := s.Title(); got != "write a file" {
		t.Errorf("automatic title %q", got)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "hello\n" {
		t.Fatalf("written file: %q, %v", data, err)
	}

	page, err := s.Transcript("", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 4 || page.Entries[0].Type != string(session.EntryAssistant) || page.Entries[3].Type != string(session.EntryUser) {
		t.Fatalf("transcript page (newest first): %+v", page.Entries)
	}
	if _, err := s.Transcript("nope", 0); !isInputError(err) {
		t.Errorf("page before an unknown entry: %v, want an host.InputError", err)
	}

	chs, run, err := s.Diff("")
	if err != nil || run != res.RunID || len(chs) != 1 || chs[0].Path != "a.txt" || chs[0].Kind != changes.Add {
		t.Fatalf("diff: %+v run %q, %v", chs, run, err)
	}

	branch := s.Branch()
	user, call, result := branch[0].ID, branch[1].ID, branch[2].ID
	if _, err := th.Fork(t.Context(), s, call, host.Binding{}); !isInputError(err) {
		t.Errorf("fork at a call without its result: %v, want an host.InputError", err)
	}
	fork, err := th.Fork(t.Context(), s, result, host.Binding{})
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()
	if got := fork.Branch(); len(got) != 3 || got[2].ID != result {
		t.Errorf("fork's branch: %d entries, want the 3 up to %s", len(got), result)
	}

	dry, err := s.Rewind(t.Context(), host.RewindParams{SessionID: s.ID(), EntryID: user, Files: true, DryRun: true})
	if err != nil || dry.Applied || len(dry.Changes) != 1 || dry.Changes[0].Kind != changes.Delete {
		t.Fatalf("dry rewind: %+v, %v", dry, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("a dry rewind changed the file: %v", err)
	}
	done, err := s.Rewind(t.Context(), host.RewindParams{SessionID: s.ID(), EntryID: user, Files: true, Conversation: true})
	if err != nil || !done.Applied || done.Head != user || done.RewindEntryID == "" {
		t.Fatalf("rewind: %+v, %v", done, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the rewind left the file: %v", err)
	}
	if _, err := s.Rewind(t.Context(), host.RewindParams{EntryID: "nope", Files: true}); !isInputError(err) {
		t.Errorf("rewind to an unknown entry: %v, want an host.InputError", err)
	}
}

func isInputError(err error) bool {
	_, ok := errors.AsType[*host.InputError](err)
	return ok
}

// TestCheckTitle: control and format characters become spaces, nothing
// left or too long is an host.InputError.
func TestCheckTitle(t *testing.T) {
	if got, err := host.CheckTitle(" a\u202e\tb\n "); err != nil || got != "a b" {
		t.Errorf("host.CheckTitle: %q, %v", got, err)
	}
	for _, bad := range []string{"", " \u200b\n", strings.Repeat("x", host.MaxTitleRunes+1)} {
		if _, err := host.CheckTitle(bad); !isInputError(err) {
			t.Errorf("host.CheckTitle(%q): %v, want an host.InputError", bad, err)
		}
	}
}
