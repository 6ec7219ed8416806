package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// firstEntry returns the id of the first entry in a session's export.
func firstEntry(t *testing.T, export string) string {
	t.Helper()
	for _, line := range strings.Split(export, "\n") {
		var rec struct {
			Kind string `json:"kind"`
			ID   string `json:"id"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Kind == "entry" && rec.ID != "" {
			return rec.ID
		}
	}
	t.Fatalf("no entry in the export:\n%s", export)
	return ""
}

// TestSessionsDiffAndRewind: `octet sessions diff` prints the last run's
// changes; `octet sessions rewind --dry-run` previews the rewind and
// changes nothing; without it the files are restored.
func TestSessionsDiffAndRewind(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.FunctionCall("r1", "read", `{"path":"notes.txt"}`)),
		providertest.Reply(
			providertest.FunctionCall("e1", "edit", `{"path":"notes.txt","old_text":"beta","new_text":"BETA"}`),
			providertest.FunctionCall("w1", "write", `{"path":"made.txt","content":"made\n"}`),
		),
		providertest.Text("done"),
	)
	notes := filepath.Join(x.ws, "notes.txt")
	before, err := os.ReadFile(notes)
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "change things")
	if r.code != exitOK {
		t.Fatalf("exec: exit %d: %s", r.code, r.stderr)
	}
	lines, _ := parseJSONLines(t, r.stdout)
	id := lines[0].SessionID

	r = runCLI(t, x.ws, x.vars, "sessions", "diff", id)
	if r.code != exitOK || !strings.Contains(r.stdout, "changed 2 file(s)") || !strings.Contains(r.stdout, "== made.txt (add)\n--- /dev/null\n+++ b/made.txt") ||
		!strings.Contains(r.stdout, "+BETA") {
		t.Errorf("diff: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	entry := firstEntry(t, runCLI(t, x.ws, x.vars, "sessions", "export", id).stdout)

	r = runCLI(t, x.ws, x.vars, "sessions", "rewind", id, entry, "--dry-run")
	if r.code != exitOK || !strings.Contains(r.stdout, "dry run (nothing changed): would rewind files of session "+id) ||
		!strings.Contains(r.stdout, "  delete   made.txt\n") || !strings.Contains(r.stdout, "  restore  notes.txt\n") ||
		!strings.Contains(r.stdout, "-BETA") {
		t.Errorf("dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(x.ws, "made.txt")); err != nil {
		t.Errorf("the dry run removed made.txt: %v", err)
	}

	r = runCLI(t, x.ws, x.vars, "sessions", "rewind", id, entry, "--files")
	if r.code != exitOK || !strings.Contains(r.stdout, "rewound files of session "+id) || !strings.Contains(r.stdout, "recorded as entry ") {
		t.Errorf("rewind: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(x.ws, "made.txt")); !os.IsNotExist(err) {
		t.Errorf("made.txt after the rewind: %v", err)
	}
	if got, _ := os.ReadFile(notes); string(got) != string(before) {
		t.Errorf("notes.txt after the rewind = %q, want %q", got, before)
	}
	if r := runCLI(t, x.ws, x.vars, "sessions", "rewind", id); r.code != exitUsage {
		t.Errorf("rewind without an entry: exit %d", r.code)
	}
}

// TestSessionsRewindForceHint: `octet sessions rewind` suggests --force
// only for a conflict forcing overwrites. A file octet wrote that is a
// symbolic link now is not replaced even forced: its conflict says to
// move it away, and no --force hint follows; a file the user changed
// gets the hint.
func TestSessionsRewindForceHint(t *testing.T) {
	x, id, entry := madeFileSession(t)
	made := filepath.Join(x.ws, "made.txt")
	if err := os.Remove(made); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("notes.txt", made); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, x.ws, x.vars, "sessions", "rewind", id, entry, "--dry-run")
	if !strings.Contains(r.stdout, "is a symbolic link now") || strings.Contains(r.stdout, "--force") {
		t.Errorf("dry run over a link: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := os.Remove(made); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(made, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, x.ws, x.vars, "sessions", "rewind", id, entry, "--dry-run")
	if !strings.Contains(r.stdout, "changed since") || !strings.Contains(r.stdout, "--force <path>") {
		t.Errorf("dry run over the user's file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestSessionsRewindWorkspaceGone: a files rewind of a session whose
// workspace was moved away fails (exit 1), saying so and what to do,
// instead of reporting each of its files as "no such file or directory"
// and exiting 0.
func TestSessionsRewindWorkspaceGone(t *testing.T) {
	x, id, entry := madeFileSession(t)
	moved := x.ws + ".moved"
	if err := os.Rename(x.ws, moved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(moved, x.ws) })
	r := runCLI(t, t.TempDir(), x.vars, "sessions", "rewind", id, entry)
	if r.code != exitFailed || !strings.Contains(r.stderr, "is not there") || !strings.Contains(r.stderr, "put it back, then rewind again") {
		t.Errorf("rewind: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// madeFileSession runs an octet exec whose model writes made.txt and
// returns its environment, the session's id and its first entry's.
func madeFileSession(t *testing.T) (x *execEnv, sid, entry string) {
	t.Helper()
	x = newExecEnv(t,
		providertest.Reply(providertest.FunctionCall("w1", "write", `{"path":"made.txt","content":"made\n"}`)),
		providertest.Text("done"),
	)
	if r := x.runOctet(t, "exec", "make a file"); r.code != exitOK {
		t.Fatalf("exec: exit %d\n%s", r.code, r.stderr)
	}
	file := x.oneSession(t)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return x, sessionIDOf(file), firstEntry(t, string(raw))
}
