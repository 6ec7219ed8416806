//go:build unix

package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/proc/proctest"
	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

const (
	envCrashChild = "OCTET_AGENT_CRASH_CHILD"
	envCrashWS    = "OCTET_AGENT_CRASH_WS"
	envCrashSess  = "OCTET_AGENT_CRASH_SESS"
)

// TestCrashChild is the child half of TestCrashMidToolThenResume: it runs a
// real agent whose first response asks for bash (which appends a line,
// records its pid, marks that it started and becomes a sleep), then edit,
// then read. The parent SIGKILLs it while bash sleeps.
func TestCrashChild(t *testing.T) {
	if os.Getenv(envCrashChild) == "" {
		t.Skip("child process of TestCrashMidToolThenResume")
	}
	ws, sessDir := os.Getenv(envCrashWS), os.Getenv(envCrashSess)
	srv := pt.New(t)
	srv.Enqueue(pt.Reply(
		pt.FunctionCall("b1", "bash", `{"command":"echo run >> log.txt && echo $$ > sleep.pid && touch started && exec sleep 60"}`),
		pt.FunctionCall("e1", "edit", `{"path":"note.txt","old_text":"one","new_text":"one one"}`),
		pt.FunctionCall("r1", "read", `{"path":"note.txt"}`),
	))
	sess, err := session.Create(sessDir, session.Header{Cwd: ws})
	if err != nil {
		t.Fatal(err)
	}
	host := tools.NewHost()
	builtins, _, err := tools.Builtins(tools.Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range builtins {
		host.Register(tl)
	}
	a, err := New(Config{
		Session: sess, Transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL()}),
		Model: provider.Model{Name: "scripted"}, Host: host,
		Broker: tools.NewBroker(tools.BrokerConfig{Policy: tools.UnsafeHost}),
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Prompt(context.Background(), "crash me", PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	t.Fatal("the child was supposed to be killed before the run ended")
}

// TestCrashMidToolThenResume kills a real agent process with SIGKILL while
// bash runs, then opens the session in this process: the unresolved read
// is replayed, the bash and edit calls become indeterminate and are not run
// again (the log shows one line, the file is unedited), and the session
// continues normally.
func TestCrashMidToolThenResume(t *testing.T) {
	if os.Getenv(envCrashChild) != "" {
		t.Skip("parent only")
	}
	ws, sessDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "note.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashChild+"=1", envCrashWS+"="+ws, envCrashSess+"="+sessDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
	}()
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(ws, "started")); return err == nil })
	pidText, err := os.ReadFile(filepath.Join(ws, "sleep.pid"))
	if err != nil {
		t.Fatal(err)
	}
	sleepPid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatal(err)
	}
	// Kill the agent process only, so the crash is exactly "agent died
	// mid-tool".
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	// The bash call's process guard kills the orphaned sleep (within 2 s
	// of the agent's death): the unresolved call cannot complete later.
	deadline := time.Now().Add(3 * time.Second)
	for !proctest.Gone(sleepPid) {
		if time.Now().After(deadline) {
			syscall.Kill(sleepPid, syscall.SIGKILL)
			t.Fatalf("the bash command (pid %d) outlived the killed agent", sleepPid)
		}
		time.Sleep(10 * time.Millisecond)
	}

	matches, _ := filepath.Glob(filepath.Join(sessDir, "*.jsonl"))
	if len(matches) != 1 {
		t.Fatalf("session files %v", matches)
	}
	path := matches[0]
	before := readFile(t, path)
	if resultFor(before, "b1") != nil || count(before, "checkpoint") != 0 {
		t.Fatal("the child got further than expected")
	}

	checkLeaks(t)
	sess, err := session.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	srv := pt.New(t)
	host := tools.NewHost()
	builtins, closeTools, err := tools.Builtins(tools.Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer closeTools()
	for _, tl := range builtins {
		host.Register(tl)
	}
	a, err := New(Config{
		Session: sess, Transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL()}),
		Model: provider.Model{Name: "scripted"}, Host: host,
		Broker: tools.NewBroker(tools.BrokerConfig{Policy: tools.UnsafeHost}),
	})
	if err != nil {
		t.Fatal(err)
	}
	after := readFile(t, path)
	for _, id := range []string{"b1", "e1"} {
		res := resultFor(after, id).result()
		d, _ := res["details"].(map[string]any)
		if res.str("text") != textIndeterminate || res["is_error"] != true || d["crash_recovery"] != "indeterminate" {
			t.Fatalf("%s after resume: %v", id, res)
		}
	}
	rd := resultFor(after, "r1").result()
	if d, _ := rd["details"].(map[string]any); d["crash_recovery"] != "replayed" || !strings.Contains(rd.str("text"), "one") || rd["is_error"] == true {
		t.Fatalf("read after resume: %v", rd)
	}
	log, _ := os.ReadFile(filepath.Join(ws, "log.txt"))
	if string(log) != "run\n" {
		t.Fatalf("bash ran again: log %q", log)
	}
	if note, _ := os.ReadFile(filepath.Join(ws, "note.txt")); string(note) != "one\n" {
		t.Fatalf("edit was applied after the crash: %q", note)
	}
	// Resolution is idempotent: a second agent on the session adds nothing.
	n := len(readFile(t, path))
	if _, err := New(Config{Session: sess, Transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL()}),
		Model: provider.Model{Name: "scripted"}, Host: host, Broker: tools.NewBroker(tools.BrokerConfig{})}); err != nil {
		t.Fatal(err)
	}
	if len(readFile(t, path)) != n {
		t.Fatal("second open resolved calls again")
	}
	// The session continues: the next request carries every paired output.
	srv.Enqueue(pt.Text("recovered"))
	r, err := a.Prompt(context.Background(), "what happened?", PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkRunEvents(t, drain(t, r), OutcomeCompleted)
	in := inputTypes(srv.Requests()[0])
	outputs := 0
	for _, s := range in {
		if s == "function_call_output" {
			outputs++
		}
	}
	if outputs != 3 {
		t.Fatalf("request input %v", in)
	}
}

// TestBranchIntoBatchResolvesAtPrompt: moving the head into the middle of a
// batch leaves calls without results on the active branch; the next Prompt
// pairs them (replaying only the replay-safe read) before it sends anything.
func TestBranchIntoBatchResolvesAtPrompt(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{policy: tools.UnsafeHost})
	h.writeFile("a.txt", "alpha\n")
	h.srv.Enqueue(pt.Reply(
		pt.FunctionCall("w1", "write", `{"path":"b.txt","content":"beta\n"}`),
		pt.FunctionCall("r1", "read", `{"path":"a.txt"}`),
	), pt.Text("done"))
	checkRunEvents(t, drain(t, h.prompt("go", PromptOptions{})), OutcomeCompleted)
	var asst string
	for _, e := range h.sess.Branch() {
		if e.Type == session.EntryAssistant && asst == "" {
			asst = e.ID
		}
	}
	if err := h.sess.SetHead(asst); err != nil {
		t.Fatal(err)
	}
	h.srv.Enqueue(pt.Text("again"))
	checkRunEvents(t, drain(t, h.prompt("retry from there", PromptOptions{})), OutcomeCompleted)
	req := h.srv.Requests()[2]
	if got := strings.Join(inputTypes(req), " "); got != "message:user function_call function_call function_call_output function_call_output message:user" {
		t.Fatalf("request input %s", got)
	}
	var texts []string
	for _, e := range h.sess.Branch() {
		if e.Type == session.EntryToolResult {
			texts = append(texts, e.Result.CallID+"="+e.Result.Details["crash_recovery"].(string))
		}
	}
	if strings.Join(texts, " ") != "w1=indeterminate r1=replayed" {
		t.Fatalf("resolved %v", texts)
	}
}

// TestReplayRuleIsExact: crash replay needs ReplaySafe AND an exact Pure or
// WorkspaceRead classification AND valid arguments. A ReplaySafe HostRead,
// a replay-unsafe WorkspaceRead and a ReplaySafe call with invalid
// arguments all become indeterminate and never run; only the ReplaySafe
// Pure and WorkspaceRead calls are executed again.
func TestReplayRuleIsExact(t *testing.T) {
	checkLeaks(t)
	dir := t.TempDir()
	sess, err := session.Create(dir, session.Header{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.AppendEntry(session.Entry{Type: session.EntryUser, Text: "go"}); err != nil {
		t.Fatal(err)
	}
	call := func(id, name, args string) session.Item {
		return session.Item{Type: session.ItemFunctionCall, CallID: id, Name: name, Arguments: args}
	}
	if _, err := sess.AppendEntry(session.Entry{Type: session.EntryAssistant, Items: []session.Item{
		call("hr", "hread", `{"n":1}`), call("wu", "wunsafe", `{"n":2}`), call("bad", "pure", `{"n":"x"}`),
		call("pp", "pure", `{"n":3}`), call("ws", "wsafe", `{"n":4}`),
	}}); err != nil {
		t.Fatal(err)
	}
	sess.Close()
	sess, err = session.Open(sess.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	probes := map[string]*probeTool{
		"hread":   {name: "hread", effect: tools.HostRead, replay: tools.ReplaySafe},
		"wunsafe": {name: "wunsafe", effect: tools.WorkspaceRead, replay: tools.ReplayUnsafe},
		"pure":    {name: "pure", effect: tools.Pure, replay: tools.ReplaySafe},
		"wsafe":   {name: "wsafe", effect: tools.WorkspaceRead, replay: tools.ReplaySafe},
	}
	host := tools.NewHost()
	for _, p := range probes {
		if err := host.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	srv := pt.New(t)
	if _, err := New(Config{
		Session: sess, Transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL()}),
		Model: provider.Model{Name: "scripted"}, Host: host,
		Broker: tools.NewBroker(tools.BrokerConfig{Policy: tools.UnsafeHost}),
	}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range sess.Branch() {
		if e.Type == session.EntryToolResult {
			got[e.Result.CallID], _ = e.Result.Details["crash_recovery"].(string)
		}
	}
	want := map[string]string{"hr": "indeterminate", "wu": "indeterminate", "bad": "indeterminate", "pp": "replayed", "ws": "replayed"}
	for id, w := range want {
		if got[id] != w {
			t.Fatalf("%s: %q, want %q (all %v)", id, got[id], w, got)
		}
	}
	if probes["hread"].executed.Load() != 0 || probes["wunsafe"].executed.Load() != 0 ||
		probes["pure"].executed.Load() != 1 || probes["wsafe"].executed.Load() != 1 {
		t.Fatal("replay executed the wrong calls")
	}
}
