//go:build unix

package tools

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/octet-agent/octet/changes"
)

// patchWorkspace is a workspace with a change store, read and apply_patch
// sharing one tracker, and a few files.
func patchWorkspace(t *testing.T, docs Documents) (ws string, rd *ReadTool, ap *ApplyPatchTool) {
	t.Helper()
	ws = t.TempDir()
	st, err := changes.OpenWorkspace(t.TempDir(), ws, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Root: ws, Changes: &changes.Recorder{Store: st}, Files: NewFileTracker(), Documents: docs}
	if rd, err = NewRead(cfg); err != nil {
		t.Fatal(err)
	}
	if ap, err = NewApplyPatch(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(ws, "src", "app.py"), "def main():\n    args = parse()\n    run(args)\n")
	writeTestFile(t, filepath.Join(ws, "src", "old.py"), "print('old')\n")
	writeTestFile(t, filepath.Join(ws, "src", "util.py"), "import os\n\nX = 1\n")
	if err := os.Chmod(filepath.Join(ws, "src", "util.py"), 0o750); err != nil {
		t.Fatal(err)
	}
	return ws, rd, ap
}

// multiPatch adds, updates, deletes and moves (with a change) one file each.
const multiPatch = `*** Begin Patch
*** Add File: docs/usage.md
+# Usage
+Run make.
*** Update File: src/app.py
@@ def main():
     args = parse()
-    run(args)
+    run(args, verbose=True)
*** Delete File: src/old.py
*** Update File: src/util.py
*** Move to: src/helpers.py
@@
-import os
+import os.path
*** End Patch`

func patchArgs(p string) map[string]any { return map[string]any{"input": p} }

func TestApplyPatchMultiFile(t *testing.T) {
	ws, _, ap := patchWorkspace(t, nil)
	res := run(t, ap, patchArgs(multiPatch))
	if res.IsError {
		t.Fatalf("patch failed: %s", res.Text)
	}
	want := map[string]string{
		"docs/usage.md":  "# Usage\nRun make.\n",
		"src/app.py":     "def main():\n    args = parse()\n    run(args, verbose=True)\n",
		"src/helpers.py": "import os.path\n\nX = 1\n",
	}
	for p, content := range want {
		if got := readBack(t, filepath.Join(ws, p)); got != content {
			t.Errorf("%s = %q, want %q", p, got, content)
		}
	}
	for _, p := range []string{"src/old.py", "src/util.py"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); !os.IsNotExist(err) {
			t.Errorf("%s still exists (%v)", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(ws, "src", "helpers.py")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("moved file's mode = %v (%v), want 0750 kept", fi.Mode(), err)
	}
	var kinds []string
	for _, r := range res.Changes {
		kinds = append(kinds, r.Path+":"+string(r.Kind))
	}
	wantKinds := []string{"docs:add", "docs/usage.md:add", "src/app.py:modify", "src/old.py:delete", "src/helpers.py:add", "src/util.py:delete"}
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("changes = %v, want %v", kinds, wantKinds)
	}
	if !strings.Contains(res.Text, "added docs/usage.md, updated src/app.py, deleted src/old.py, moved src/util.py to src/helpers.py") {
		t.Errorf("result text %q", res.Text)
	}
}

// TestApplyPatchFailingHunkWritesNothing: the last file's hunk does not
// apply, so no file changes (the first ones would have applied), and
// the error names the file, the hunk and the lines it looked for.
func TestApplyPatchFailingHunkWritesNothing(t *testing.T) {
	ws, _, ap := patchWorkspace(t, nil)
	before := snapshotTree(t, ws)
	bad := strings.Replace(multiPatch, "-import os\n", "-import sys\n", 1)
	res := run(t, ap, patchArgs(bad))
	if !res.IsError {
		t.Fatalf("patch applied: %s", res.Text)
	}
	for _, w := range []string{"hunk 1 of 1 for src/util.py (patch line 13)", "    import sys", "nothing was written"} {
		if !strings.Contains(res.Text, w) {
			t.Errorf("error %q lacks %q", res.Text, w)
		}
	}
	if after := snapshotTree(t, ws); !maps.Equal(before, after) {
		t.Errorf("workspace changed:\nbefore %v\nafter  %v", before, after)
	}
	if len(res.Changes) != 0 {
		t.Errorf("changes %v", res.Changes)
	}
}

// TestApplyPatchRefusals: an add over an existing file, an update of a
// missing file, a move onto an existing file, and a file changed since it
// was read all refuse the whole patch.
func TestApplyPatchRefusals(t *testing.T) {
	ws, rd, ap := patchWorkspace(t, nil)
	for _, c := range []struct{ patch, want string }{
		{"*** Begin Patch\n*** Add File: src/app.py\n+x\n*** End Patch", "src/app.py already exists"},
		{"*** Begin Patch\n*** Update File: nope.py\n@@\n-x\n+y\n*** End Patch", "nope.py: no such file; create it with *** Add File"},
		{"*** Begin Patch\n*** Update File: src/util.py\n*** Move to: src/app.py\n*** End Patch", "cannot move src/util.py to src/app.py: src/app.py already exists"},
		{"*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch", "patch line 2"},
		{"*** Begin Patch\n*** Delete File: src\n*** End Patch", "src is a directory"},
	} {
		res := run(t, ap, patchArgs(c.patch))
		if !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%q: result %+v, want an error containing %q", c.patch, res, c.want)
		}
	}
	run(t, rd, map[string]any{"path": "src/app.py"})
	writeTestFile(t, filepath.Join(ws, "src", "app.py"), "def main():\n    args = parse()\n    run(args)\n# changed by someone\n")
	res := run(t, ap, patchArgs(multiPatch))
	if !res.IsError || !strings.Contains(res.Text, "src/app.py: file changed since last read") {
		t.Errorf("stale file: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(ws, "docs", "usage.md")); !os.IsNotExist(err) {
		t.Error("the refused patch added a file")
	}
}

// TestApplyPatchApprovalShowsEverything: one approval for the whole
// patch, titled on one line, whose detail names every file and whose diff
// holds every file's whole diff; a file changed after it was shown makes
// the approved call write nothing.
func TestApplyPatchApprovalShowsEverything(t *testing.T) {
	ws, _, ap := patchWorkspace(t, nil)
	host := mustHost(t, ap)
	var changeAfterShown bool
	approver := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		if changeAfterShown {
			writeTestFile(t, filepath.Join(ws, "src", "old.py"), "print('edited meanwhile')\n")
		}
		return Approval{Approved: true, Digest: r.Digest}, nil
	}}
	br := NewBroker(BrokerConfig{Policy: Controlled, Approver: approver})
	dispatch := func(callID string) Result {
		res, _ := br.Dispatch(t.Context(), host, DispatchRequest{CallID: callID, Tool: "apply_patch", Arguments: argsJSON(t, patchArgs(multiPatch))}, DispatchObserver{})
		return res
	}
	changeAfterShown = true
	res := dispatch("c1")
	if !res.IsError || res.Text != errChangedSinceShown {
		t.Fatalf("changed after shown: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(ws, "docs", "usage.md")); !os.IsNotExist(err) {
		t.Fatal("a patch whose file changed after approval wrote")
	}
	changeAfterShown = false
	writeTestFile(t, filepath.Join(ws, "src", "old.py"), "print('old')\n")
	if res := dispatch("c2"); res.IsError {
		t.Fatalf("approved patch failed: %s", res.Text)
	}
	reqs := approver.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d approvals, want one per call", len(reqs))
	}
	r := reqs[1]
	if strings.Contains(r.Title, "\n") || r.Title != "apply_patch: 4 files (docs/usage.md, src/app.py, src/old.py, src/util.py)" {
		t.Errorf("title %q", r.Title)
	}
	for _, w := range []string{"add docs/usage.md (18 bytes)", "update src/app.py (", "delete src/old.py (13 bytes)", "move src/util.py to src/helpers.py and change it"} {
		if !strings.Contains(r.Detail, w) {
			t.Errorf("detail %q lacks %q", r.Detail, w)
		}
	}
	for _, w := range []string{
		"--- /dev/null\n+++ b/docs/usage.md\n", "+Run make.",
		"--- a/src/app.py\n+++ b/src/app.py\n", "-    run(args)\n+    run(args, verbose=True)",
		"--- a/src/old.py\n+++ /dev/null\n", "-print('old')",
		"--- a/src/util.py\n+++ b/src/helpers.py\n", "-import os\n+import os.path",
	} {
		if !strings.Contains(r.Diff, w) {
			t.Errorf("diff lacks %q:\n%s", w, r.Diff)
		}
	}
}

// TestApplyPatchRollback: when a later file fails to commit (the editor
// refuses its change), the files the patch already changed are restored.
func TestApplyPatchRollback(t *testing.T) {
	docs := newFakeDocs()
	ws, _, ap := patchWorkspace(t, docs)
	app := filepath.Join(ws, "src", "app.py")
	docs.open(app, readBack(t, app), 3)
	docs.err = errors.New("the user closed the buffer")
	before := snapshotTree(t, ws)
	// The add and the delete before it commit to disk, then the update of
	// the open document fails.
	patch := "*** Begin Patch\n*** Add File: docs/usage.md\n+x\n*** Delete File: src/old.py\n*** Update File: src/app.py\n@@\n-    run(args)\n+    run()\n*** End Patch"
	res := run(t, ap, patchArgs(patch))
	if !res.IsError || !strings.Contains(res.Text, "the user closed the buffer") || !strings.Contains(res.Text, "were restored, so nothing is changed") {
		t.Fatalf("result %+v", res)
	}
	if after := snapshotTree(t, ws); !maps.Equal(before, after) {
		t.Errorf("workspace not restored:\nbefore %v\nafter  %v", before, after)
	}
}

// TestApplyPatchOpenDocuments: an update of an open document goes
// through the editor, computed against its buffer; a deletion of a
// document with unsaved changes is refused.
func TestApplyPatchOpenDocuments(t *testing.T) {
	docs := newFakeDocs()
	ws, _, ap := patchWorkspace(t, docs)
	app, old := filepath.Join(ws, "src", "app.py"), filepath.Join(ws, "src", "old.py")
	docs.open(app, "def main():\n    args = parse()\n    run(args)  # unsaved\n", 7)
	res := run(t, ap, patchArgs("*** Begin Patch\n*** Update File: src/app.py\n@@\n-    run(args)  # unsaved\n+    run()\n*** End Patch"))
	if res.IsError {
		t.Fatalf("update of an open document: %s", res.Text)
	}
	if d, _ := docs.Document(app); string(d.Text) != "def main():\n    args = parse()\n    run()\n" || len(docs.applied) != 1 || docs.applied[0].Version != 7 {
		t.Errorf("buffer %q after %d applies", d.Text, len(docs.applied))
	}
	if got := readBack(t, app); !strings.Contains(got, "run(args)\n") {
		t.Errorf("disk written behind the editor: %q", got)
	}
	docs.open(old, "print('unsaved')\n", 1)
	res = run(t, ap, patchArgs("*** Begin Patch\n*** Delete File: src/old.py\n*** End Patch"))
	if !res.IsError || !strings.Contains(res.Text, "unsaved changes in the editor") {
		t.Errorf("delete of a dirty buffer: %+v", res)
	}
	docs.open(old, "print('old')\n", 2)
	if res := run(t, ap, patchArgs("*** Begin Patch\n*** Delete File: src/old.py\n*** End Patch")); res.IsError {
		t.Errorf("delete of a clean buffer: %s", res.Text)
	}
}

// TestApplyPatchRewind: a rewind planned from the patch's records
// restores every file it added, updated, deleted and moved, and removes
// the directory the add created.
func TestApplyPatchRewind(t *testing.T) {
	ws, _, ap := patchWorkspace(t, nil)
	before := snapshotTree(t, ws)
	res := run(t, ap, patchArgs(multiPatch))
	if res.IsError {
		t.Fatal(res.Text)
	}
	if n := rewindRecords(t, ap.cfg, res.Changes); n != 6 {
		t.Fatalf("rewind plan has %d paths, want 6 (docs among them): %+v", n, res.Changes)
	}
	if after := snapshotTree(t, ws); !maps.Equal(before, after) {
		t.Errorf("rewind left:\nbefore %v\nafter  %v", before, after)
	}
}

// TestApplyPatchCreatedDirs: the directories a patch's added and moved
// files need are recorded once each, parents first and before the file
// that needs them, with the mode they were given (0755, whatever the
// umask); a rewind removes them, and keeps a directory that holds a file
// octet did not write.
func TestApplyPatchCreatedDirs(t *testing.T) {
	ws, _, ap := patchWorkspace(t, nil)
	before := snapshotTree(t, ws)
	defer syscall.Umask(syscall.Umask(0o077))
	res := run(t, ap, patchArgs("*** Begin Patch\n*** Add File: docs/guide/a.md\n+a\n*** Add File: docs/guide/b.md\n+b\n"+
		"*** Update File: src/util.py\n*** Move to: lib/py/util.py\n@@\n-import os\n+import os.path\n*** End Patch"))
	if res.IsError {
		t.Fatal(res.Text)
	}
	var got []string
	for _, r := range res.Changes {
		got = append(got, r.Path)
		if r.After != nil && r.After.Dir && (r.Before != nil || r.After.Mode != 0o755 || r.Diff != "directory "+r.Path+" created (mode 0755)") {
			t.Errorf("record of %s: %+v", r.Path, r)
		}
	}
	want := []string{"docs", "docs/guide", "docs/guide/a.md", "docs/guide/b.md", "lib", "lib/py", "lib/py/util.py", "src/util.py"}
	if !slices.Equal(got, want) {
		t.Fatalf("records %q, want %q", got, want)
	}
	for _, d := range []string{"docs", "docs/guide", "lib", "lib/py"} {
		fi, err := os.Stat(filepath.Join(ws, d))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s has mode %v, want 0755", d, fi.Mode().Perm())
		}
	}
	if n := rewindRecords(t, ap.cfg, res.Changes); n != len(want) {
		t.Fatalf("rewind restored %d paths, want %d", n, len(want))
	}
	if after := snapshotTree(t, ws); !maps.Equal(before, after) {
		t.Errorf("rewind left:\nbefore %v\nafter  %v", before, after)
	}

	// A file the user added to a directory the patch created keeps it.
	res = run(t, ap, patchArgs("*** Begin Patch\n*** Add File: notes/n.md\n+n\n*** End Patch"))
	if res.IsError {
		t.Fatal(res.Text)
	}
	mustWrite(t, filepath.Join(ws, "notes", "mine.md"), "mine\n")
	plan := changes.PlanRewind([]changes.Step{{Records: res.Changes}}, nil, 0)
	var preps []Restoration
	for _, r := range plan {
		rs, _, err := ap.cfg.PrepareRestore(r, false, true)
		if err != nil {
			t.Fatal(err)
		}
		preps = append(preps, rs)
	}
	ap.cfg.SettlePlan(preps, true)
	if preps[0].Conflict == "" || !strings.Contains(preps[0].Conflict, "notes/mine.md") {
		t.Errorf("rewind of notes, which holds a file octet did not write: conflict %q", preps[0].Conflict)
	}
}

// rewindRecords rewinds the changes recs made, in the order a rewind
// applies them (directories removed last, children first), and returns
// how many paths it restored; any conflict fails the test.
func rewindRecords(t *testing.T, cfg Config, recs []changes.Record) int {
	t.Helper()
	plan := changes.PlanRewind([]changes.Step{{Records: recs}}, nil, 0)
	var preps, rmdirs []Restoration
	for _, r := range plan {
		rs, needed, err := cfg.PrepareRestore(r, false, true)
		if err != nil || !needed || rs.Conflict != "" {
			t.Fatalf("prepare %s: needed %v conflict %q err %v", r.Path, needed, rs.Conflict, err)
		}
		if rs.RemovesDir() {
			rmdirs = append(rmdirs, rs)
		} else {
			preps = append(preps, rs)
		}
	}
	slices.Reverse(rmdirs)
	for _, rs := range append(preps, rmdirs...) {
		if err := cfg.ApplyRestore(t.Context(), rs); err != nil {
			t.Fatalf("restore %s: %v", rs.Record.Path, err)
		}
	}
	return len(plan)
}

// snapshotTree maps every path under root to its content and mode.
func snapshotTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		out[rel] = fi.Mode().Perm().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
