package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/host"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// manyCrashFiles is how many workspace files the many-kills test's child
// changes and rewinds.
const manyCrashFiles = 4

// manyCrashKills is how many times the test kills its child.
const manyCrashKills = 100

// TestManyCrashesHelper is the child process of TestManyCrashes: it
// reopens the session named in its environment (which settles what the
// last child left unfinished), says so, and then runs writes, bash
// commands and file rewinds of its files in random order until it is
// killed.
func TestManyCrashesHelper(t *testing.T) {
	home := os.Getenv("OCTET_MANY_CRASH_HOME")
	if home == "" {
		t.Skip("child process of TestManyCrashes")
	}
	seed, _ := strconv.ParseUint(os.Getenv("OCTET_MANY_CRASH_SEED"), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 7))
	st := newStack(t, tools.UnsafeHost)
	st.Home, st.Workspace = home, os.Getenv("OCTET_MANY_CRASH_WORKSPACE")
	st.Runtime.SessionsDir = filepath.Join(home, "sessions")
	sid := os.Getenv("OCTET_MANY_CRASH_SESSION")
	h, err := host.New(st.Runtime, nil).Open(context.Background(), sid, host.Binding{})
	if err != nil {
		t.Fatal(err)
	}
	rs := h
	if err := os.WriteFile(filepath.Join(home, "ready"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for n := 0; ; n++ {
		f := fmt.Sprintf("f%d.txt", rng.IntN(manyCrashFiles))
		if rng.IntN(3) == 0 {
			var users []string
			for _, e := range rs.Branch() {
				if e.Type == session.EntryUser {
					users = append(users, e.ID)
				}
			}
			if len(users) > 0 {
				if _, err := rs.Rewind(context.Background(), host.RewindParams{SessionID: sid, EntryID: users[rng.IntN(len(users))], Files: true}); err != nil {
					t.Fatal(err)
				}
				continue
			}
		}
		tool, args := "write", fmt.Sprintf(`{"path":%q,"content":"seed %d step %d\n"}`, f, seed, n)
		if rng.IntN(2) == 0 {
			tool, args = "bash", fmt.Sprintf(`{"command":"echo seed %d step %d > %s"}`, seed, n, f)
		}
		st.Provider.Enqueue(pt.Reply(pt.FunctionCall(fmt.Sprintf("c%d-%d", seed, n), tool, args)), pt.Text("ok"))
		run, err := rs.Prompt(context.Background(), "change "+f, agent.PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		run.Wait()
	}
}

// stateOfFile returns the state of the workspace file path.
func stateOfFile(t *testing.T, path string) changes.State {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return changes.State{}
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return changes.State{Exists: true, SHA256: hex.EncodeToString(sum[:]), Mode: st.Mode().Perm(), Size: int64(len(data))}
}

// TestManyCrashes kills a real process 100 times at random points while
// it writes files through the agent (each write: images kept, intent
// kept, file changed, result recorded), changes them with real bash
// commands (snapshot and intent kept, command run, snapshot, result
// recorded) and rewinds them (plan recorded, files restored one by one). After each kill the session is reopened,
// which settles the unfinished call, and every file must be in a state
// the ledger names for it: the state after its last recorded change, or,
// when that change's outcome is not known (an indeterminate call's
// intended change, a rewind's plan), the state before it. Every image
// that state needs is readable from the store (its hash checked).
func TestManyCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 100 child processes")
	}
	st := newStack(t, tools.UnsafeHost)
	for i := range manyCrashFiles {
		writeMode(t, filepath.Join(st.Workspace, fmt.Sprintf("f%d.txt", i)), "initial\n", 0o644)
	}
	sess, err := session.Create(st.Runtime.SessionsDir, session.Header{Cwd: st.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.Header().ID
	sess.Close()
	store, err := changes.OpenWorkspace(st.Home, st.Workspace, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := &changes.Recorder{Store: store}
	uncertain := map[string]bool{}
	start := time.Now()
	for kill := range manyCrashKills {
		ready := filepath.Join(st.Home, "ready")
		os.Remove(ready)
		cmd := exec.Command(os.Args[0], "-test.run=^TestManyCrashesHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "OCTET_MANY_CRASH_HOME="+st.Home, "OCTET_MANY_CRASH_WORKSPACE="+st.Workspace,
			"OCTET_MANY_CRASH_SESSION="+sid, "OCTET_MANY_CRASH_SEED="+strconv.Itoa(kill))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("kill %d: the child never reopened the session", kill)
			}
			time.Sleep(500 * time.Microsecond)
		}
		time.Sleep(time.Duration(rand.IntN(40_000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		// The guard of a command the child ran stops it once it sees
		// the child gone; until then the command may still write.
		waitNoProcessIn(t, st.Workspace)
		for _, k := range checkCrashState(t, st, sid, rec, kill) {
			uncertain[k] = true
		}
		if t.Failed() {
			return
		}
	}
	kinds := map[string]int{}
	for k := range uncertain {
		kinds[strings.Fields(k)[0]]++
	}
	t.Logf("%d kills in %v; files left in their state before a change whose outcome the ledger records as unknown: %d of a rewind's plan, %d of an unfinished call's intent",
		manyCrashKills, time.Since(start).Round(time.Millisecond), kinds[string(session.EntryRewind)], kinds[string(session.EntryToolResult)])
}

// checkCrashState reopens session sid (settling its unfinished call) and
// checks every file against the states its ledger names. It returns the
// changes of unknown outcome (entry and path) whose file is in its state
// before the change.
func checkCrashState(t *testing.T, st *stack, sid string, rec *changes.Recorder, kill int) []string {
	t.Helper()
	h, err := host.New(st.Runtime, nil).Open(context.Background(), sid, host.Binding{})
	if err != nil {
		t.Fatalf("kill %d: reopen: %v", kill, err)
	}
	defer h.Close()
	sess := h.Ledger()
	branch := sess.Branch()
	stepsOf, err := host.Steps(sid, branch)
	if err != nil {
		t.Fatalf("kill %d: %v", kill, err)
	}
	var before []string
	for i := range manyCrashFiles {
		name := fmt.Sprintf("f%d.txt", i)
		cur := stateOfFile(t, filepath.Join(st.Workspace, name))
		initial := changes.State{Exists: true, SHA256: hex.EncodeToString(sha256Sum("initial\n")), Mode: 0o644, Size: 8}
		want := []changes.State{initial}
		unknown, recorded, at := false, false, ""
		for j, s := range stepsOf {
			for _, r := range s.Records {
				if r.Path == name {
					want, recorded, at = []changes.State{changes.StateOf(r.After)}, true, string(branch[j].Type)+" "+branch[j].ID
					if unknown = s.Rewind; unknown {
						want = append(want, changes.StateOf(r.Before))
					}
				}
			}
		}
		switch {
		case cur.Same(want[0]):
		case len(want) > 1 && cur.Same(want[1]):
			before = append(before, at+" "+name)
		default:
			t.Errorf("kill %d: %s is in a state the ledger does not name: %+v, want one of %+v (unknown outcome: %v)", kill, name, cur, want, unknown)
			continue
		}
		for _, w := range want {
			if _, err := rec.Content(w); recorded && w.Exists && err != nil {
				t.Errorf("kill %d: %s: an image the ledger names is not readable: %v", kill, name, err)
			}
		}
	}
	return before
}

func sha256Sum(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// waitNoProcessIn waits (at most 10 s) until no process runs in dir (its
// working directory): the commands of a killed octet, stopped by their
// guards.
func waitNoProcessIn(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := false
		procs, _ := filepath.Glob("/proc/[0-9]*/cwd")
		for _, p := range procs {
			if cwd, err := os.Readlink(p); err == nil && cwd == dir {
				busy = true
				break
			}
		}
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a process still runs in %s 10 s after octet was killed", dir)
		}
		time.Sleep(time.Millisecond)
	}
}
