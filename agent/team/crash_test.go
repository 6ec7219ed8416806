package team

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// crashDirEnv makes TestCrashHelper the process a crash test kills.
const crashDirEnv = "OCTET_TEAM_CRASH_DIR"

// TestCrashHelper is not a test on its own: run by
// TestCrashBetweenLeaseAndAppend with crashDirEnv set, it drives a root
// run whose child messages it, and stops for good (to be SIGKILLed) right
// after its wait leased the message, before the result is appended.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("only run by TestCrashBetweenLeaseAndAppend")
	}
	f := newFixture(t, fixtureOpt{sessions: dir})
	f.childSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("m1", ToolMessageParent, `{"message":"CRASH-MSG: the answer is 42"}`)),
		providertest.Stall(),
	)
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("s1", ToolSpawn, `{"task":"ask"}`)),
		providertest.Reply(providertest.FunctionCall("w1", ToolWait, `{"timeout_seconds":60}`)),
		providertest.Stall(),
	)
	leased = func() {
		fmt.Printf("LEASED %s\n", f.root.Session().Path())
		os.Stdout.Sync()
		time.Sleep(time.Hour)
	}
	r, err := f.root.Prompt(context.Background(), "go", agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
}

// TestCrashBetweenLeaseAndAppend: a process SIGKILLed after a wait leased
// a child's message and before its result was appended leaves the message
// in provenance (with its id) and in no committed result of the root
// session; the next owning run of the same root session redelivers it to
// its wait (recorded again, naming the earlier message), and once that
// wait's result is committed no later team delivers it again.
func TestCrashBetweenLeaseAndAppend(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "LEASED ") {
				lines <- strings.TrimPrefix(sc.Text(), "LEASED ")
			}
		}
		close(lines)
	}()
	var rootPath string
	select {
	case rootPath = <-lines:
	case <-time.After(60 * time.Second):
		t.Fatal("the helper never leased the message")
	}
	if rootPath == "" {
		t.Fatal("the helper ended without leasing the message")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// Provenance and the root session reopen: the message is recorded, with
	// its id, and no committed result carries it.
	teams, _ := filepath.Glob(filepath.Join(dir, "teams", "team-*"))
	if len(teams) != 1 {
		t.Fatalf("%d team directories", len(teams))
	}
	recs, err := ReadProvenance(filepath.Join(teams[0], JournalName))
	if err != nil {
		t.Fatal(err)
	}
	var msg Record
	for _, r := range recs {
		if r.Kind == KindMessage && strings.HasPrefix(r.Text, "CRASH-MSG") {
			msg = r
		}
	}
	if msg.MessageID == 0 || msg.Path != "root" || msg.From != "root/worker1" {
		t.Fatalf("message record %+v", msg)
	}
	sess, err := session.Open(rootPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range sess.Branch() {
		if e.Result != nil && (strings.Contains(e.Result.Text, "CRASH-MSG") || e.Result.Details[ConsumedKey] != nil) {
			t.Fatalf("a committed result consumed the message: %+v", e.Result)
		}
	}
	sess.Close()

	// The next owning run of the same root session waits before it spawns
	// anything: the wait starts the run's team, which redelivers the
	// message to it.
	f := newFixture(t, fixtureOpt{sessions: dir, session: rootPath})
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("w2", ToolWait, `{"timeout_seconds":30}`)),
		providertest.Text("root done"),
	)
	r, err := f.root.Prompt(context.Background(), "continue", agent.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events() {
	}
	if res := r.Wait(); res.Outcome != agent.OutcomeCompleted {
		t.Fatalf("second run %s %v", res.Outcome, res.Err)
	}
	var w2 *session.ToolResult
	for _, e := range f.root.Session().Branch() {
		if e.Result != nil && e.Result.CallID == "w2" {
			w2 = e.Result
		}
	}
	if w2 == nil || !strings.Contains(w2.Text, "CRASH-MSG: the answer is 42") || !strings.Contains(w2.Text, `"from":"root/worker1"`) || w2.Details[ConsumedKey] == nil {
		t.Fatalf("the next wait lacks the redelivered message: %+v", w2)
	}
	teams, _ = filepath.Glob(filepath.Join(dir, "teams", "team-*"))
	var again Record
	for _, tdir := range teams {
		recs, _ := ReadProvenance(filepath.Join(tdir, JournalName))
		for _, r := range recs {
			if r.Kind == KindMessage && r.Redelivers != "" {
				again = r
			}
		}
	}
	if want := fmt.Sprintf("%s/%d", recs[0].Team, msg.MessageID); again.Redelivers != want || again.Text != msg.Text {
		t.Fatalf("redelivery record %+v, want it to name %s", again, want)
	}

	// A third team of the session: the committed wait consumed it.
	tm := f.team()
	if page, resolve := tm.Lease("root", MaxPageBytes); len(page) != 0 {
		resolve(false)
		t.Fatalf("a consumed message came again: %+v", page)
	}
}

// TestRedeliverRemainder: a run that ends with part of a long message
// consumed (one committed page) leaves the rest to the session's next
// team, which redelivers it from where the committed page ended; messages
// of another root session's teams are not delivered.
func TestRedeliverRemainder(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	long := strings.Repeat("ü€𝄞 ", 3000) // 30 KB, parts of several rune sizes
	f.childSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("m1", ToolMessageParent, fmt.Sprintf(`{"message":%q}`, long))),
		providertest.Text("child done"),
	)
	f.rootSrv.Enqueue(
		providertest.Reply(providertest.FunctionCall("s1", ToolSpawn, `{"task":"write"}`)),
		providertest.Reply(providertest.FunctionCall("w1", ToolWait, `{"timeout_seconds":30}`)),
		providertest.Text("root done"),
	)
	f.completeRoot(t, "go")
	// Another root session sharing the teams directory gets nothing.
	other := newFixture(t, fixtureOpt{sessions: f.sessions})
	ot := other.team()
	if page, resolve := ot.Lease("root", MaxPageBytes); len(page) != 0 {
		resolve(false)
		t.Fatalf("another session's team got %d messages", len(page))
	}
	tm := f.team()
	var got strings.Builder
	for {
		page, resolve := tm.Lease("root", MaxPageBytes)
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			if !m.Automatic {
				got.WriteString(m.Text)
			}
		}
		resolve(true)
	}
	rest := got.String()
	if rest == "" || len(rest) >= len(long) || !strings.HasSuffix(long, rest) || !utf8.ValidString(rest) {
		t.Fatalf("redelivered %d of %d bytes; want the valid tail after the first page", len(rest), len(long))
	}
	if len(long)-len(rest) > MaxPageBytes {
		t.Fatalf("%d bytes lost: more than the committed page", len(long)-len(rest))
	}
}
