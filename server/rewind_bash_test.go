package server

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/host"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// wantDir checks that path is a directory of mode (or absent, when mode
// is zero).
func wantDir(t *testing.T, what, path string, mode os.FileMode) {
	t.Helper()
	st, err := os.Lstat(path)
	switch {
	case mode == 0 && !os.IsNotExist(err):
		t.Errorf("%s: %s exists (%v), want it absent", what, path, err)
	case mode != 0 && (err != nil || !st.IsDir() || st.Mode().Perm() != mode):
		t.Errorf("%s: %s = %v, %v; want a directory of mode %v", what, path, st, err, mode)
	}
}

// bashChanges returns the kinds of the changes of each tool_finished of
// run, by call id and path, and its cannotUndo statements.
func bashChanges(e *fakeEditor, runID string) (map[string]map[string]string, map[string][]string) {
	kinds := map[string]map[string]string{}
	undo := map[string][]string{}
	for _, ev := range e.eventsOf(runID) {
		if ev.Event["kind"] != "tool_finished" {
			continue
		}
		id := ev.Event["callId"].(string)
		kinds[id] = map[string]string{}
		chs, _ := ev.Event["changes"].([]any)
		for _, c := range chs {
			m := c.(map[string]any)
			kinds[id][m["path"].(string)] = m["kind"].(string)
		}
		ss, _ := ev.Event["cannotUndo"].([]any)
		for _, s := range ss {
			undo[id] = append(undo[id], s.(string))
		}
	}
	return kinds, undo
}

// bashStack is an unsafe_host stack for tests that run real commands
// through bash (skipped without bash).
func bashStack(t *testing.T) *stack {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	return newStack(t, tools.UnsafeHost)
}

// ranGo opens an editor on the stack (its experimental capabilities caps), a
// session in it, and runs the prompt "go" there to completion.
func (st *stack) ranGo(t *testing.T, caps map[string]any) (*fakeEditor, string) {
	t.Helper()
	e, sid, _ := st.ranGoRun(t, caps)
	return e, sid
}

// ranGoRun is ranGo that also returns the run's id.
func (st *stack) ranGoRun(t *testing.T, caps map[string]any) (e *fakeEditor, sid, runID string) {
	t.Helper()
	e = st.editor(t, Options{}, caps)
	sid = e.newSession()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "go"}))
	if ans.Outcome != "completed" {
		t.Fatalf("run: %+v", ans)
	}
	return e, sid, ans.RunID
}

// path is the absolute path of the workspace's slash-separated rel.
func (st *stack) path(rel string) string {
	return filepath.Join(st.Workspace, filepath.FromSlash(rel))
}

// TestSessionRewindBash runs real commands through bash — sed -i, chmod,
// rm, mv, mkdir with a new file, an append to a file over the snapshot
// limit, a write of an ignored file — and rewinds them: every
// tool_finished carries what its command changed (with modes), a rewind
// restores exactly that (bytes, modes, removed directories), the file
// the user changed after the command is a conflict left alone, the file
// over the limit is reported as not rewindable, and rewinding the rewind
// restores the commands' state.
func TestSessionRewindBash(t *testing.T) {
	st := bashStack(t)
	ws := st.path
	writeMode(t, ws("a.txt"), "one\ntwo\n", 0o640)
	writeMode(t, ws("gone.txt"), "bye\n", 0o600)
	writeMode(t, ws("src/old.txt"), "move me\n", 0o644)
	writeMode(t, ws("user.txt"), "mine\n", 0o644)
	writeMode(t, ws(".gitignore"), "ignored/\n", 0o644)
	writeMode(t, ws("ignored/x"), "x\n", 0o644)
	big := bytes.Repeat([]byte("0123456789abcdef"), 9<<16) // 9 MiB: over the 8 MiB limit
	writeMode(t, ws("big.bin"), string(big), 0o644)

	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("sed", "bash", `{"command":"sed -i 's/one/1/' a.txt && chmod 755 a.txt"}`)),
		pt.Reply(pt.FunctionCall("rm", "bash", `{"command":"rm gone.txt"}`)),
		pt.Reply(pt.FunctionCall("mv", "bash", `{"command":"mv src/old.txt moved.txt && rmdir src"}`)),
		pt.Reply(pt.FunctionCall("mkdir", "bash", `{"command":"mkdir -p d/e && chmod 700 d && echo new > d/e/f.txt && echo y > ignored/x"}`)),
		pt.Reply(pt.FunctionCall("user", "bash", `{"command":"echo octet > user.txt"}`)),
		pt.Reply(pt.FunctionCall("big", "bash", `{"command":"echo more >> big.bin"}`)),
		pt.Text("done"),
	)
	e, sid, runID := st.ranGoRun(t, map[string]any{"events": true})
	kinds, undo := bashChanges(e, runID)
	want := map[string]map[string]string{
		"sed":   {"a.txt": "modify"},
		"rm":    {"gone.txt": "delete"},
		"mv":    {"src/old.txt": "delete", "src": "delete", "moved.txt": "add"},
		"mkdir": {"d": "add", "d/e": "add", "d/e/f.txt": "add"},
		"user":  {"user.txt": "modify"},
		"big":   {"big.bin": "modify"},
	}
	for id, w := range want {
		if len(kinds[id]) != len(w) {
			t.Errorf("tool_finished %s: changes %v, want %v", id, kinds[id], w)
			continue
		}
		for p, k := range w {
			if kinds[id][p] != k {
				t.Errorf("tool_finished %s: %s is %q, want %q", id, p, kinds[id][p], k)
			}
		}
	}
	if u := strings.Join(undo["big"], "\n"); !strings.Contains(u, "network requests, processes") || !strings.Contains(u, "over the 8388608-byte snapshot limit, not kept: 1: big.bin") {
		t.Errorf("cannotUndo of the big call: %q", u)
	}
	wantFile(t, "after the run", ws("a.txt"), []byte("1\ntwo\n"), 0o755)
	wantDir(t, "after the run", ws("d"), 0o700)

	// The user changes user.txt after octet's command.
	writeMode(t, ws("user.txt"), "user again\n", 0o644)
	ids := entryIDs(t, e, sid)
	start, end := ids[0], ids[len(ids)-1]
	rw := e.rewindFiles(sid, start)
	if !rw.Applied || rw.RewindEntryID == "" {
		t.Fatalf("rewind: %+v", rw)
	}
	if _, _, c := rw.byPath("user.txt"); !strings.Contains(c, "changed since octet last changed it") {
		t.Errorf("conflict of user.txt = %q", c)
	}
	if _, _, c := rw.byPath("big.bin"); !strings.Contains(c, "cannot be rewound") || !strings.Contains(c, "restore it another way") {
		t.Errorf("conflict of big.bin = %q", c)
	}
	for _, p := range []string{"a.txt", "gone.txt", "moved.txt", "src", "src/old.txt", "d", "d/e", "d/e/f.txt"} {
		if _, _, c := rw.byPath(p); c != "" {
			t.Errorf("rewind of %s: conflict %q", p, c)
		}
	}
	check := func(what string) {
		wantFile(t, what, ws("a.txt"), []byte("one\ntwo\n"), 0o640)
		wantFile(t, what, ws("gone.txt"), []byte("bye\n"), 0o600)
		wantFile(t, what, ws("src/old.txt"), []byte("move me\n"), 0o644)
		wantFile(t, what, ws("moved.txt"), nil, 0)
		wantDir(t, what, ws("d"), 0)
		wantFile(t, what, ws("user.txt"), []byte("user again\n"), 0o644)
		wantFile(t, what, ws("ignored/x"), []byte("y\n"), 0o644) // ignored: not checkpointed
	}
	check("after the rewind")
	if data, err := os.ReadFile(ws("big.bin")); err != nil || len(data) != len(big)+5 {
		t.Errorf("big.bin after the rewind: %d bytes, %v (want it left as the command made it)", len(data), err)
	}

	// Rewinding the rewind restores the commands' state.
	back := e.rewindFiles(sid, end)
	if !back.Applied {
		t.Fatalf("rewind of the rewind: %+v", back)
	}
	wantFile(t, "after the rewind of the rewind", ws("a.txt"), []byte("1\ntwo\n"), 0o755)
	wantFile(t, "after the rewind of the rewind", ws("gone.txt"), nil, 0)
	wantFile(t, "after the rewind of the rewind", ws("moved.txt"), []byte("move me\n"), 0o644)
	wantDir(t, "after the rewind of the rewind", ws("src"), 0)
	wantDir(t, "after the rewind of the rewind", ws("d"), 0o700)
	wantDir(t, "after the rewind of the rewind", ws("d/e"), 0o755)
	wantFile(t, "after the rewind of the rewind", ws("d/e/f.txt"), []byte("new\n"), 0o644)
	wantFile(t, "after the rewind of the rewind", ws("user.txt"), []byte("user again\n"), 0o644)
}

// TestSessionRewindBashNamesNotUTF8: a command removes a file and makes
// one whose names are not valid UTF-8. Their changes are not recorded
// (JSON would name other files: U+FFFD) but said in cannotUndo, and a
// rewind neither makes a file that never existed nor reports success
// for them.
func TestSessionRewindBashNamesNotUTF8(t *testing.T) {
	st := bashStack(t)
	ws := st.path
	writeMode(t, ws("old\xff.txt"), "old\n", 0o644)
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("odd", "bash", `{"command":"rm $'old\\xff.txt' && echo new > $'new\\xfe.txt' && echo ok > ok.txt"}`)),
		pt.Text("done"),
	)
	e, sid, runID := st.ranGoRun(t, map[string]any{"events": true})
	kinds, undo := bashChanges(e, runID)
	if len(kinds["odd"]) != 1 || kinds["odd"]["ok.txt"] != "add" {
		t.Errorf("changes: %v, want only ok.txt added", kinds["odd"])
	}
	if u := strings.Join(undo["odd"], "\n"); !strings.Contains(u, "not valid UTF-8") {
		t.Errorf("cannotUndo: %q", u)
	}
	ids := entryIDs(t, e, sid)
	var rw rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": ids[0], "files": true}, &rw)
	wantFile(t, "after the rewind", ws("ok.txt"), nil, 0)
	wantFile(t, "after the rewind", ws("old\uFFFD.txt"), nil, 0)
	wantFile(t, "after the rewind", ws("new\xfe.txt"), []byte("new\n"), 0o644)
	for _, c := range rw.Changes {
		if c.Path != "ok.txt" {
			t.Errorf("the rewind planned %q: %+v", c.Path, c)
		}
	}
}

// TestSessionRewindBashUnhashedFile: a command creates a file over the
// snapshot limit, so its content is not kept. A rewind leaves it (octet
// cannot tell whether it changed since) and says that — not that someone
// else changed it — and what to do; forced, it is removed.
func TestSessionRewindBashUnhashedFile(t *testing.T) {
	st := bashStack(t)
	big := filepath.Join(st.Workspace, "big.bin")
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("big", "bash", `{"command":"head -c 9437184 /dev/zero > big.bin"}`)),
		pt.Text("done"),
	)
	e, sid := st.ranGo(t, map[string]any{"events": true})
	ids := entryIDs(t, e, sid)
	var rw rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": ids[0], "files": true}, &rw)
	_, _, c := rw.byPath("big.bin")
	if strings.Contains(c, "not by octet") || !strings.Contains(c, "cannot tell whether it changed since") || !strings.Contains(c, "force this path") {
		t.Errorf("conflict of big.bin = %q", c)
	}
	if st, err := os.Stat(big); err != nil || st.Size() != 9437184 {
		t.Fatalf("big.bin after the rewind: %v, %v (want it left)", st, err)
	}
	var forced rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": ids[0], "files": true, "force": []string{"big.bin"}}, &forced)
	if _, _, c := forced.byPath("big.bin"); c != "" || !forced.Applied {
		t.Errorf("forced rewind: %+v", forced)
	}
	wantFile(t, "after the forced rewind", big, nil, 0)
}

// TestSessionRewindBashTypeChanges: commands replace a file with a
// directory, a directory with a file, and a file with a symbolic link. A
// rewind puts back the file and the directory (bytes, modes, the
// directory's file) — they are as the commands left them — and says of
// the link what to do; rewinding the rewind makes the commands' state
// again.
func TestSessionRewindBashTypeChanges(t *testing.T) {
	st := bashStack(t)
	ws := st.path
	writeMode(t, ws("f"), "file f\n", 0o640)
	writeMode(t, ws("d/x"), "in d\n", 0o600)
	writeMode(t, ws("d/sub/y"), "in d/sub\n", 0o644)
	if err := os.Chmod(ws("d"), 0o750); err != nil {
		t.Fatal(err)
	}
	writeMode(t, ws("l"), "file l\n", 0o644)
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("todir", "bash", `{"command":"rm f && mkdir f && echo in > f/in"}`)),
		pt.Reply(pt.FunctionCall("tofile", "bash", `{"command":"rm -r d && echo now a file > d"}`)),
		pt.Reply(pt.FunctionCall("tolink", "bash", `{"command":"rm l && ln -s f l"}`)),
		pt.Text("done"),
	)
	e, sid := st.ranGo(t, map[string]any{"events": true})
	ids := entryIDs(t, e, sid)
	start, end := ids[0], ids[len(ids)-1]
	rw := e.rewindFiles(sid, start)
	for _, p := range []string{"f", "f/in", "d", "d/x", "d/sub", "d/sub/y"} {
		if _, _, c := rw.byPath(p); c != "" {
			t.Errorf("rewind of %s: conflict %q", p, c)
		}
	}
	if _, _, c := rw.byPath("l"); !strings.Contains(c, "symbolic link") || !strings.Contains(c, "move it away, then rewind again") {
		t.Errorf("conflict of l = %q", c)
	}
	wantFile(t, "after the rewind", ws("f"), []byte("file f\n"), 0o640)
	wantDir(t, "after the rewind", ws("d"), 0o750)
	wantFile(t, "after the rewind", ws("d/x"), []byte("in d\n"), 0o600)
	wantFile(t, "after the rewind", ws("d/sub/y"), []byte("in d/sub\n"), 0o644)
	if fi, err := os.Lstat(ws("l")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("l after the rewind: %v, %v (want the link left)", fi, err)
	}

	back := e.rewindFiles(sid, end)
	for _, c := range back.Changes {
		if c.Conflict != "" && c.Path != "l" {
			t.Errorf("rewind of the rewind, %s: conflict %q", c.Path, c.Conflict)
		}
	}
	wantDir(t, "after the rewind of the rewind", ws("f"), 0o755)
	wantFile(t, "after the rewind of the rewind", ws("f/in"), []byte("in\n"), 0o644)
	wantFile(t, "after the rewind of the rewind", ws("d"), []byte("now a file\n"), 0o644)
}

// TestSessionRewindBashKeepsUsedDir: the user puts a file in a directory
// a command made. The rewind's plan — its dry run too — says that the
// directory (and its parent) stays, naming the file, and the rewind
// removes the command's file and completes, instead of failing part-way
// on a directory that is not empty.
func TestSessionRewindBashKeepsUsedDir(t *testing.T) {
	st := bashStack(t)
	ws := st.path
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("mk", "bash", `{"command":"mkdir -p d/e && echo x > d/e/f"}`)),
		pt.Text("done"),
	)
	e, sid := st.ranGo(t, map[string]any{"events": true})
	writeMode(t, ws("d/e/mine.txt"), "mine\n", 0o644)
	ids := entryIDs(t, e, sid)
	for _, dry := range []bool{true, false} {
		var rw rewindAnswer
		e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": ids[0], "files": true, "dryRun": dry}, &rw)
		if !dry && !rw.Applied {
			t.Errorf("rewind: %+v (want it applied, the directories left)", rw)
		}
		for p, holds := range map[string]string{"d": "(d/e)", "d/e": "(d/e/mine.txt)"} {
			if _, _, c := rw.byPath(p); !strings.Contains(c, holds) || !strings.Contains(c, "move them away") {
				t.Errorf("dry run %v: conflict of %s = %q", dry, p, c)
			}
		}
		if _, _, c := rw.byPath("d/e/f"); c != "" {
			t.Errorf("dry run %v: conflict of d/e/f = %q", dry, c)
		}
	}
	wantFile(t, "after the rewind", ws("d/e/f"), nil, 0)
	wantFile(t, "after the rewind", ws("d/e/mine.txt"), []byte("mine\n"), 0o644)
}

// TestSessionRewindBashUserBetween: the user changes a file between two
// of octet's commands. Rewinding past both would discard the user's
// change too: it is a conflict saying so (what the file held then is in
// the change store: rewinding to the entry before the second command
// keeps it), and the file is left; forced, it is rewound.
func TestSessionRewindBashUserBetween(t *testing.T) {
	st := bashStack(t)
	a := filepath.Join(st.Workspace, "a.txt")
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("one", "bash", `{"command":"echo one > a.txt"}`)),
		pt.Text("done"),
		pt.Reply(pt.FunctionCall("two", "bash", `{"command":"echo two >> a.txt"}`)),
		pt.Text("done"),
	)
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "first"}))
	writeMode(t, a, "mine\n", 0o644)
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "second"}))
	wantFile(t, "after the runs", a, []byte("mine\ntwo\n"), 0o644)
	ids := entryIDs(t, e, sid)
	var rw rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": ids[0], "files": true}, &rw)
	if _, _, c := rw.byPath("a.txt"); !strings.Contains(c, "between") || !strings.Contains(c, "force this path") {
		t.Errorf("conflict of a.txt = %q", c)
	}
	wantFile(t, "after the rewind", a, []byte("mine\ntwo\n"), 0o644)
	var forced rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": ids[0], "files": true, "force": []string{"a.txt"}}, &forced)
	if _, _, c := forced.byPath("a.txt"); c != "" {
		t.Errorf("forced: conflict %q", c)
	}
	wantFile(t, "after the forced rewind", a, nil, 0)

	// Rewinding only the second prompt (the entry before it: the first
	// prompt's answer) keeps the user's change, made before it.
	var back rewindAnswer
	e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": ids[len(ids)-1], "files": true}, &back)
	var page host.TranscriptPage
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": sid}, &page)
	second := ""
	for i, en := range page.Entries { // newest first
		if en.Type == "user" && en.Text == "second" {
			second = page.Entries[i+1].ID
			break
		}
	}
	last := e.rewindFiles(sid, second)
	if len(last.Changes) != 1 || last.Changes[0].Conflict != "" || !last.Applied {
		t.Errorf("rewind of the second prompt: %+v", last)
	}
	wantFile(t, "after the rewind of the second prompt", a, []byte("mine\n"), 0o644)
}

// TestSessionRewindBashParentNowFile: a command removes h/y, then the
// user replaces the directory h with a file. The rewind cannot make h/y
// again without replacing the user's file: its plan (and dry run) says
// so, naming h, and the rewind completes without touching h.
func TestSessionRewindBashParentNowFile(t *testing.T) {
	st := bashStack(t)
	ws := st.path
	writeMode(t, ws("h/y"), "y\n", 0o644)
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("rm", "bash", `{"command":"rm h/y"}`)),
		pt.Text("done"),
	)
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "go"}))
	if err := os.Remove(ws("h")); err != nil {
		t.Fatal(err)
	}
	writeMode(t, ws("h"), "mine\n", 0o644)
	ids := entryIDs(t, e, sid)
	for _, dry := range []bool{true, false} {
		var rw rewindAnswer
		e.mustCall("octet/session/rewind", map[string]any{"sessionId": sid, "entryId": ids[0], "files": true, "dryRun": dry}, &rw)
		if _, _, c := rw.byPath("h/y"); !strings.Contains(c, "h is a regular file now") || !strings.Contains(c, "move h away") {
			t.Errorf("dry run %v: conflict of h/y = %q", dry, c)
		}
		if !dry && !rw.Applied {
			t.Errorf("rewind: %+v", rw)
		}
	}
	wantFile(t, "after the rewind", ws("h"), []byte("mine\n"), 0o644)
}

// TestSessionRewindBashSpecialBits: a command that sets the set-user-ID
// and set-group-ID bits of files and the sticky bit of a directory, and
// clears one that was set, changes their modes: each is in its
// tool_finished with the modes in octal, and a rewind restores them, and
// the rewind of the rewind sets them again.
func TestSessionRewindBashSpecialBits(t *testing.T) {
	st := bashStack(t)
	ws := st.path
	writeMode(t, ws("tool"), "#!/bin/sh\n", 0o755)
	writeMode(t, ws("group"), "g\n", 0o755)
	writeMode(t, ws("was-suid"), "s\n", 0o755)
	if err := os.Chmod(ws("was-suid"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ws("drop"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ws("drop"), 0o777); err != nil {
		t.Fatal(err)
	}
	st.Provider.Enqueue(
		pt.Reply(pt.FunctionCall("chmod", "bash", `{"command":"chmod u+s tool && chmod g+s group && chmod +t drop && chmod u-s was-suid"}`)),
		pt.Text("done"),
	)
	e, sid, runID := st.ranGoRun(t, map[string]any{"events": true})
	diffs := map[string]string{}
	for _, ev := range e.eventsOf(runID) {
		if ev.Event["kind"] != "tool_finished" {
			continue
		}
		chs, _ := ev.Event["changes"].([]any)
		for _, c := range chs {
			m := c.(map[string]any)
			diffs[m["path"].(string)] = m["diff"].(string)
		}
	}
	want := map[string]string{
		"tool":     "mode of tool changed: 0755 → 4755; content unchanged",
		"group":    "mode of group changed: 0755 → 2755; content unchanged",
		"was-suid": "mode of was-suid changed: 4755 → 0755; content unchanged",
		"drop":     "mode of directory drop changed: 0777 → 1777",
	}
	for p, d := range want {
		if diffs[p] != d {
			t.Errorf("change of %s = %q, want %q", p, diffs[p], d)
		}
	}
	modes := func(what string, want map[string]os.FileMode) {
		t.Helper()
		for p, m := range want {
			fi, err := os.Lstat(ws(p))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode() &^ os.ModeDir; got != m {
				t.Errorf("%s: %s has mode %v, want %v", what, p, got, m)
			}
		}
	}
	after := map[string]os.FileMode{"tool": 0o755 | os.ModeSetuid, "group": 0o755 | os.ModeSetgid, "was-suid": 0o755, "drop": 0o777 | os.ModeSticky}
	modes("after the command", after)
	ids := entryIDs(t, e, sid)
	rw := e.rewindFiles(sid, ids[0])
	if !rw.Applied || len(rw.Changes) != 4 {
		t.Fatalf("rewind: %+v", rw)
	}
	modes("after the rewind", map[string]os.FileMode{"tool": 0o755, "group": 0o755, "was-suid": 0o755 | os.ModeSetuid, "drop": 0o777})
	if back := e.rewindFiles(sid, ids[len(ids)-1]); !back.Applied || len(back.Changes) != 4 {
		t.Fatalf("rewind of the rewind: %+v", back)
	}
	modes("after the rewind of the rewind", after)
}
