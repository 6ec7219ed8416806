package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/provider/providertest"
)

// shownEntries returns the entry ids (first column) sessions show printed
// before each "[kind]".
func shownEntries(out, kind string) []string {
	re := regexp.MustCompile(`(?m)^([0-9a-f]{8,}) \[` + regexp.QuoteMeta(kind) + `\]`)
	var ids []string
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestSessionsShowEntryIDsAndRewindByPrefix: sessions show prints each
// entry's id, short and unambiguous; rewind takes it (any unambiguous
// prefix of an entry id), and an unknown entry is a usage error (exit 2)
// in the command line's words, not the editor protocol's.
func TestSessionsShowEntryIDsAndRewindByPrefix(t *testing.T) {
	x := newExecEnv(t, editTurns()...)
	r := runBin(t, x.ws, x.vars, "", "exec", "--json", "change beta")
	if r.code != exitOK {
		t.Fatalf("exec: exit %d: %s", r.code, r.stderr)
	}
	sid := parseResult(t, r.stdout).SessionID
	show := runBin(t, x.ws, x.vars, "", "sessions", "show", sid[:15])
	users := shownEntries(show.stdout, "user")
	if show.code != exitOK || len(users) != 1 || len(shownEntries(show.stdout, "assistant")) != 3 || len(shownEntries(show.stdout, "result c2 ok")) != 1 {
		t.Fatalf("sessions show: exit %d, user entries %v:\n%s", show.code, users, show.stdout)
	}
	r = runBin(t, x.ws, x.vars, "", "sessions", "rewind", sid, users[0], "--dry-run")
	if r.code != exitOK || !strings.Contains(r.stdout, "would rewind files of session "+sid+" to entry "+users[0]) || !strings.Contains(r.stdout, "restore  notes.txt") {
		t.Errorf("rewind by the shown id: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runBin(t, x.ws, x.vars, "", "sessions", "rewind", sid, users[0][:6])
	if got, _ := os.ReadFile(filepath.Join(x.ws, "notes.txt")); r.code != exitOK || string(got) != "alpha\nbeta\n" {
		t.Errorf("rewind by a 6-digit prefix: exit %d, notes.txt %q\n%s%s", r.code, got, r.stdout, r.stderr)
	}
	r = runBin(t, x.ws, x.vars, "", "sessions", "rewind", sid, "zzzz")
	if r.code != exitUsage || !strings.Contains(r.stderr, `no entry "zzzz" in session `+sid+" (octet sessions show "+sid+" lists the entry ids)") ||
		strings.Contains(r.stderr, "octet/") {
		t.Errorf("unknown entry: exit %d: %s", r.code, r.stderr)
	}
	r = runBin(t, x.ws, x.vars, "", "sessions", "diff", sid, "--run", "run_zz")
	if r.code != exitUsage || strings.Contains(r.stderr, "octet/") {
		t.Errorf("unknown run: exit %d: %s", r.code, r.stderr)
	}
}

// TestSessionsDelete: delete takes ids and prefixes, removes each session
// with its listing cache and holder file, refuses (exit 1, the session
// kept) one a running octet exec has open, and deletes it once that ended.
func TestSessionsDelete(t *testing.T) {
	x := newExecEnv(t, providertest.Text("one"), providertest.Text("two"))
	var ids []string
	for _, p := range []string{"first", "second"} {
		r := runBin(t, x.ws, x.vars, "", "exec", "--json", p)
		ids = append(ids, parseResult(t, r.stdout).SessionID)
	}
	sessions := filepath.Join(x.home, "sessions")
	// The shortest prefix of the first id that is not the second's (two
	// sessions of the same second share their first 16 characters).
	n := 0
	for n < len(ids[0]) && n < len(ids[1]) && ids[0][n] == ids[1][n] {
		n++
	}
	prefix := ids[0][:n+1]
	r := runBin(t, x.ws, x.vars, "", "sessions", "delete", prefix, "nope")
	if r.code != exitUsage || len(x.sessionFiles(t)) != 2 {
		t.Fatalf("an unknown id among them: exit %d, %d sessions left: %s", r.code, len(x.sessionFiles(t)), r.stderr)
	}
	r = runBin(t, x.ws, x.vars, "", "sessions", "delete", prefix)
	if r.code != exitOK || r.stdout != "deleted session "+ids[0]+"\n" {
		t.Fatalf("delete: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(sessions, ids[0]+".*")); len(left) != 0 {
		t.Errorf("delete left %v", left)
	}

	// A running exec holds the other session open.
	x.srv.Enqueue(providertest.Text("never finished").StallAfter(4))
	cmd := exec.CommandContext(t.Context(), octetBin, "exec", "--session", ids[1], "more")
	cmd.Dir, cmd.Env = x.ws, binEnv(x.vars)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(30 * time.Second); len(x.srv.Requests()) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the exec made no request")
		}
	}
	r = runBin(t, x.ws, x.vars, "", "sessions", "delete", ids[1])
	if r.code != exitFailed || !strings.Contains(r.stderr, "session "+ids[1]+" not deleted: it is open in another process") {
		t.Errorf("delete of an open session: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(sessions, ids[1]+".jsonl")); err != nil {
		t.Fatalf("the open session was deleted: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if r := runBin(t, x.ws, x.vars, "", "sessions", "delete", ids[1]); r.code != exitOK {
		t.Errorf("delete after the exec ended: exit %d: %s", r.code, r.stderr)
	}
	if left, _ := os.ReadDir(sessions); len(left) != 0 {
		var names []string
		for _, de := range left {
			names = append(names, de.Name())
		}
		t.Errorf("sessions directory holds %v", names)
	}
}

// TestSessionsPrune: prune deletes the sessions not updated for the given
// age (--failed: only those whose last run did not complete), --dry-run
// only lists them, and files left by a session deleted by hand go too.
func TestSessionsPrune(t *testing.T) {
	x := newExecEnv(t,
		providertest.Text("ok"),
		providertest.Status(400, "invalid_request_error", "bad", "refused"),
		providertest.Text("ok"),
	)
	var ids []string
	for _, p := range []string{"old ok", "old failed", "recent"} {
		r := runBin(t, x.ws, x.vars, "", "exec", "--json", p)
		ids = append(ids, parseResult(t, r.stdout).SessionID)
	}
	sessions := filepath.Join(x.home, "sessions")
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, id := range ids[:2] {
		if err := os.Chtimes(filepath.Join(sessions, id+".jsonl"), old, old); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(sessions, "20200101-000000-000000000000.listing"), []byte("stale"), 0o600)

	for _, args := range [][]string{{}, {"--older-than", "0d"}, {"--older-than", "soon"}} {
		if r := runBin(t, x.ws, x.vars, "", append([]string{"sessions", "prune"}, args...)...); r.code != exitUsage {
			t.Errorf("prune %v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	r := runBin(t, x.ws, x.vars, "", "sessions", "prune", "--older-than", "30d", "--failed", "--dry-run")
	if r.code != exitOK || strings.TrimSpace(r.stdout) == "" || strings.Count(r.stdout, "would delete") != 1 || !strings.Contains(r.stdout, ids[1]) {
		t.Errorf("dry run: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := len(x.sessionFiles(t)); n != 3 {
		t.Fatalf("the dry run deleted %d sessions", 3-n)
	}
	r = runBin(t, x.ws, x.vars, "", "sessions", "prune", "--older-than", "30d", "--failed")
	if r.code != exitOK || !strings.Contains(r.stdout, "deleted session "+ids[1]) || len(x.sessionFiles(t)) != 2 {
		t.Errorf("prune --failed: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "removed 1 leftover file(s)") {
		t.Errorf("the leftover listing cache was not removed:\n%s", r.stdout)
	}
	r = runBin(t, x.ws, x.vars, "", "sessions", "prune", "--older-than", "4w")
	files := x.sessionFiles(t)
	if r.code != exitOK || len(files) != 1 || !strings.Contains(files[0], ids[2]) {
		t.Errorf("prune: exit %d, left %v:\n%s%s", r.code, files, r.stdout, r.stderr)
	}
	sc := bufio.NewScanner(strings.NewReader(runBin(t, x.ws, x.vars, "", "sessions", "list").stdout))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), ids[0]) || strings.HasPrefix(sc.Text(), ids[1]) {
			t.Errorf("still listed: %s", sc.Text())
		}
	}
}

// TestSessionsPruneAgeOverflow: an age in days or weeks too large for a
// duration is a usage error. It used to wrap around: --older-than 213504d
// (about 585 years) became 25 minutes, and prune deleted a session
// updated an hour ago.
func TestSessionsPruneAgeOverflow(t *testing.T) {
	x := newExecEnv(t, providertest.Text("ok"))
	r := runBin(t, x.ws, x.vars, "", "exec", "--json", "keep me")
	id := parseResult(t, r.stdout).SessionID
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(x.home, "sessions", id+".jsonl"), hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	for _, age := range []string{"213504d", "30501w", "9223372036854775807d"} {
		r = runBin(t, x.ws, x.vars, "", "sessions", "prune", "--older-than", age)
		if r.code != exitUsage || strings.Contains(r.stdout, id) || !strings.Contains(r.stderr, "too large") {
			t.Errorf("prune --older-than %s: exit %d:\n%s%s", age, r.code, r.stdout, r.stderr)
		}
		if len(x.sessionFiles(t)) != 1 {
			t.Fatalf("prune --older-than %s deleted the session updated an hour ago", age)
		}
	}
}

// TestDamagedSessionSaysWhatToDo: a session file damaged before its last
// record (here a line that is not JSON followed by another: not a torn
// tail, which an open repairs) is refused by exec --session, sessions
// show, export and rewind --dry-run, and each says what to do, not only
// where the damage is; the file is left byte-identical. Following the
// advice (truncating the file where the damage begins) makes the session
// continue. The old messages named the line and "corrupt record" only.
func TestDamagedSessionSaysWhatToDo(t *testing.T) {
	x := newExecEnv(t, providertest.Text("first answer"), providertest.Text("continued"))
	if r := x.runOctet(t, "exec", "first"); r.code != exitOK {
		t.Fatalf("first exec: exit %d\n%s", r.code, r.stderr)
	}
	path := x.sessionFiles(t)[0]
	sid := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged := append(append([]byte{}, good...), "garbage\ngarbage\n"...)
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	truncate := "truncate -s " + strconv.Itoa(len(good))
	for _, args := range [][]string{
		{"exec", "--session", sid, "again"},
		{"sessions", "show", sid},
		{"sessions", "export", sid},
		{"sessions", "rewind", sid, "0", "--dry-run"},
	} {
		r := x.runOctet(t, args...)
		if r.code == exitOK {
			t.Errorf("%v: exit 0 on a damaged session", args)
		}
		if !strings.Contains(r.stderr, "corrupt record") || !strings.Contains(r.stderr, truncate) || !strings.Contains(r.stderr, "octet sessions delete") {
			t.Errorf("%v does not say what to do (want %q and octet sessions delete):\n%s", args, truncate, r.stderr)
		}
	}
	if now, _ := os.ReadFile(path); string(now) != string(damaged) {
		t.Fatalf("the damaged file was changed")
	}
	if err := os.Truncate(path, int64(len(good))); err != nil {
		t.Fatal(err)
	}
	if r := x.runOctet(t, "exec", "--session", sid, "again"); r.code != exitOK || !strings.Contains(r.stdout, "continued") {
		t.Errorf("after truncating as advised: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestPruneRemovesOrphanTeams: a delegated child's session and team
// whose parent session is gone (a delete or prune killed between the
// parent's file and its children's) are deleted by the next prune; the
// team of a session still there is kept. They stayed for good: prune
// removed only the caches of missing files, and sessions delete takes
// no child's id.
func TestPruneRemovesOrphanTeams(t *testing.T) {
	delegation := func() []providertest.Turn {
		return []providertest.Turn{
			providertest.Reply(providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE answer"}`)).ForRequestContaining("ROOT-PROMPT"),
			providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":600}`)).ForRequestContaining("ROOT-PROMPT"),
			providertest.Text("child done").ForRequestContaining("CHILD-ONE"),
			providertest.Text("root done").ForRequestContaining("ROOT-PROMPT"),
		}
	}
	x := newExecEnv(t, delegation()...)
	if r := x.runOctet(t, "exec", "ROOT-PROMPT delegate it"); r.code != exitOK {
		t.Fatalf("first exec: exit %d\n%s", r.code, r.stderr)
	}
	orphaned := x.oneSession(t)
	x.srv.Enqueue(delegation()...)
	if r := x.runOctet(t, "exec", "ROOT-PROMPT delegate it again"); r.code != exitOK {
		t.Fatalf("second exec: exit %d\n%s", r.code, r.stderr)
	}
	teamsGlob := filepath.Join(x.home, "sessions", "teams", "team-*")
	if teams, _ := filepath.Glob(teamsGlob); len(teams) != 2 {
		t.Fatalf("team directories %v, want two", teams)
	}
	if err := os.Remove(orphaned); err != nil {
		t.Fatal(err)
	}
	r := x.runOctet(t, "sessions", "prune", "--older-than", "100d")
	if r.code != exitOK || !strings.Contains(r.stdout, "deleted 1 child agent session(s) whose parent session is gone") {
		t.Errorf("prune: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	teams, _ := filepath.Glob(teamsGlob)
	if len(teams) != 1 {
		t.Fatalf("team directories after prune %v, want the kept session's", teams)
	}
	kids, _ := filepath.Glob(filepath.Join(teams[0], "*.jsonl"))
	if len(kids) < 2 { // its journal and its child's session
		t.Errorf("the kept session's team lost its files: %v", kids)
	}
}
