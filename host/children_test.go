package host_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// statusSink is a front door's delegation hook reduced to what it hears:
// each child's status changes, with the status the host told at that
// moment (the host records a status before the front door hears it).
type statusSink struct {
	h *host.Host

	mu   sync.Mutex
	seen []string // "<status>/<host's status>"
	id   string   // the child's session id
}

func (k *statusSink) bind(sessionID string, cfg *team.Config) {
	cfg.OnUpdate = func(child team.Snapshot) {
		told, _ := k.h.ChildStatus(team.ChildSession{SessionID: child.SessionID})
		k.mu.Lock()
		k.seen = append(k.seen, string(child.Status)+"/"+told)
		k.id = child.SessionID
		k.mu.Unlock()
	}
}

// delegatingRoot is a host with the subagents service and a root session
// bound to a statusSink, with turns enqueued.
func delegatingRoot(t *testing.T, turns ...providertest.Turn) (*testHost, *statusSink, *host.Session) {
	t.Helper()
	th := newTestHost(t, hosttest.Options{Policy: tools.UnsafeHost, Delegation: true})
	sink := &statusSink{h: th.Host}
	root, err := th.Create(t.Context(), host.Spec{Cwd: th.Workspace}, host.Binding{Delegation: sink.bind})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	th.Provider.Enqueue(turns...)
	return th, sink, root
}

func (k *statusSink) child() (string, []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.id, append([]string(nil), k.seen...)
}

// TestChildSessionOperations: a delegated child's session is listed
// under its parent with its agent and status, read (transcript, usage),
// diffed with its parent's change store, forked into an ordinary session
// at its parent's policy, renamed and deleted once ended; the front
// door's hook hears each status after the host recorded it.
func TestChildSessionOperations(t *testing.T) {
	th, sink, root := delegatingRoot(t,
		providertest.Reply(providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE write a.txt"}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":30}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Text("combined").ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("e1", "write", `{"path":"a.txt","content":"alpha\n"}`)).ForRequestContaining("CHILD-ONE"),
		providertest.Text("wrote a").ForRequestContaining("CHILD-ONE"),
	)
	prompt(t, root, "ROOT-PROMPT delegate")

	childID, heard := sink.child()
	for _, h := range heard {
		if st, told, _ := strings.Cut(h, "/"); st != told {
			t.Errorf("the front door heard %s while the host told %s", st, told)
		}
	}
	kids, err := th.ListChildren(root.ID())
	if err != nil || len(kids) != 1 || kids[0].SessionID != childID || kids[0].AgentPath != "root/worker1" || kids[0].Status != "completed" || kids[0].ParentSessionID != root.ID() {
		t.Fatalf("children: %+v, %v", kids, err)
	}
	cs, found, err := th.FindChild(childID)
	if err != nil || !found || cs.ParentSessionID != root.ID() {
		t.Fatalf("find child: %+v %v %v", cs, found, err)
	}
	if st, live := th.ChildStatus(cs); st != "completed" || live {
		t.Errorf("child status %q live %v", st, live)
	}
	read, err := th.ReadChild(cs, "", 0)
	if err != nil || len(read.Transcript.Entries) < 4 || !strings.Contains(read.Transcript.OldestFirst()[0].Text, "CHILD-ONE") || read.Usage.Requests == 0 {
		t.Fatalf("child read: %+v, %v", read, err)
	}
	chs, _, err := root.DiffChild(cs.Path, "")
	if err != nil || len(chs) != 1 || chs[0].Path != "a.txt" || chs[0].Kind != changes.Add {
		t.Fatalf("child diff: %+v, %v", chs, err)
	}

	if _, err := root.SetEffectPolicy(tools.Controlled); err != nil {
		t.Fatal(err)
	}
	fork, err := th.ForkChild(t.Context(), cs, read.Transcript.Entries[0].ID, host.Binding{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := fork.Broker().Policy(); p != tools.Controlled {
		t.Errorf("fork's policy %v, want its parent's recorded controlled", p)
	}
	fork.Close()

	if err := th.RenameChild(cs, "renamed"); err != nil {
		t.Fatal(err)
	}
	if kids, _ := th.ListChildren(root.ID()); len(kids) != 1 || kids[0].Title != "renamed" {
		t.Errorf("renamed child listed as %+v", kids)
	}
	if err := th.DeleteChild(cs); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cs.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("deleted child's file: %v", err)
	}
	if kids, _ := th.ListChildren(root.ID()); len(kids) != 0 {
		t.Errorf("deleted child still listed: %+v", kids)
	}
}

// TestLiveChildRefusesChanges: while a child's agent may write its
// session, renaming or deleting it, and deleting its parent, are refused
// with ChildBusyError; once the parent's run is cancelled the parent is
// deleted with its children's teams.
func TestLiveChildRefusesChanges(t *testing.T) {
	th, sink, root := delegatingRoot(t,
		providertest.Reply(providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-TWO stall"}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":600}`)).ForRequestContaining("ROOT-PROMPT"),
		providertest.Stall().ForRequestContaining("CHILD-TWO"),
	)
	run, err := root.Prompt(t.Context(), "ROOT-PROMPT delegate", agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range run.Events() {
		}
	}()
	var cs team.ChildSession
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if id, heard := sink.child(); len(heard) > 0 && strings.HasPrefix(heard[len(heard)-1], "running/") {
			cs, _, _ = th.FindChild(id)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never ran")
		}
	}
	var busy *host.ChildBusyError
	if err := th.RenameChild(cs, "x"); !errors.As(err, &busy) || busy.What != "renamed" || busy.Status != "running" {
		t.Errorf("rename of a running child: %v", err)
	}
	if err := th.DeleteChild(cs); !errors.As(err, &busy) {
		t.Errorf("delete of a running child: %v", err)
	}
	if _, err := th.DeletableParent(root.ID()); !errors.As(err, &busy) || busy.What != "deleted with its parent" {
		t.Errorf("delete of a running child's parent: %v", err)
	}
	run.Cancel()
	run.Wait()
	var kids []team.ChildSession
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if kids, err = th.DeletableParent(root.ID()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the parent stays undeletable after its run's cancel: %v", err)
		}
	}
	if err := th.DeleteTeams(kids); err != nil {
		t.Fatal(err)
	}
	if des, _ := os.ReadDir(filepath.Join(th.Stack.Runtime.SessionsDir, "teams")); len(des) != 0 {
		t.Errorf("teams left: %v", des)
	}
}
