//go:build unix

package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/changes"
)

// externalTools returns write and apply_patch allowed external paths,
// staging their changes in a fresh store of workspace ws, and a
// directory outside ws.
func externalTools(t *testing.T) (ext string, wr *WriteTool, ap *ApplyPatchTool) {
	t.Helper()
	ws, ext := t.TempDir(), t.TempDir()
	st, err := changes.OpenWorkspace(t.TempDir(), ws, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Root: ws, AllowExternalPaths: true, Changes: &changes.Recorder{Store: st}, Files: NewFileTracker()}
	if wr, err = NewWrite(cfg); err != nil {
		t.Fatal(err)
	}
	if ap, err = NewApplyPatch(cfg); err != nil {
		t.Fatal(err)
	}
	return ext, wr, ap
}

// wantCreated checks that recs are the directories dirs created (mode
// 0755), parents first, then file added.
func wantCreated(t *testing.T, what string, recs []changes.Record, file string, dirs ...string) {
	t.Helper()
	if len(recs) != len(dirs)+1 {
		t.Fatalf("%s: %d changes, want %d: %+v", what, len(recs), len(dirs)+1, recs)
	}
	for i, d := range dirs {
		if c := recs[i]; c.Path != d || c.Kind != changes.Add || c.Before != nil || !c.After.Dir || c.After.Mode != 0o755 {
			t.Errorf("%s: change %d = %+v, want directory %s created", what, i, c.Change, d)
		}
	}
	if c := recs[len(dirs)]; c.Path != file || c.Kind != changes.Add || c.After == nil || c.After.Dir {
		t.Errorf("%s: last change = %+v, want %s added", what, c.Change, file)
	}
}

// A write to an external path whose directories are missing creates them
// only once the write is admitted and its intent kept, and records them
// (by their absolute paths), so a refused write leaves nothing behind
// and a rewind removes them with the file.
func TestExternalWriteRecordsDirs(t *testing.T) {
	ext, wr, _ := externalTools(t)
	file := filepath.Join(ext, "a", "b", "f.txt")
	raw := argsJSON(t, map[string]any{"path": file, "content": "x\n"})
	refuse := func(changes.Intent) error { return errors.New("the session file is full") }
	res, err := wr.Execute(context.Background(), Invocation{CallID: "c1", Arguments: raw, Intent: refuse})
	if err != nil || !res.IsError {
		t.Fatalf("write with its intent refused = %+v, %v", res, err)
	}
	if _, err := os.Lstat(filepath.Join(ext, "a")); !os.IsNotExist(err) {
		t.Fatalf("a refused write left its directory: %v", err)
	}
	res = run(t, wr, map[string]any{"path": file, "content": "x\n"})
	if res.IsError {
		t.Fatalf("write = %+v", res)
	}
	wantCreated(t, "write", res.Changes, file, filepath.Join(ext, "a"), filepath.Join(ext, "a", "b"))
	if n := rewindRecords(t, wr.cfg, res.Changes); n != 3 {
		t.Errorf("rewind of the write restored %d paths", n)
	}
	if _, err := os.Lstat(filepath.Join(ext, "a")); !os.IsNotExist(err) {
		t.Errorf("after the rewind, a: %v", err)
	}
}

// apply_patch adds a file at an external path whose directories are
// missing (it refused to before: their parent was not there to open),
// recording them; two external trees in one patch, whose new
// directories have the same names beneath their own existing ancestors,
// each have theirs recorded (a directory is claimed by its absolute path).
func TestExternalPatchRecordsDirs(t *testing.T) {
	ext, _, ap := externalTools(t)
	for _, d := range []string{"p", "q"} {
		if err := os.Mkdir(filepath.Join(ext, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	one, two := filepath.Join(ext, "p", "one", "x", "f.txt"), filepath.Join(ext, "q", "one", "x", "g.txt")
	patch := "*** Begin Patch\n*** Add File: " + one + "\n+1\n*** Add File: " + two + "\n+2\n*** End Patch\n"
	res := run(t, ap, map[string]any{"input": patch})
	if res.IsError {
		t.Fatalf("apply_patch = %+v", res)
	}
	if len(res.Changes) != 6 {
		t.Fatalf("apply_patch: %d changes, want 6: %+v", len(res.Changes), res.Changes)
	}
	wantCreated(t, "first add", res.Changes[:3], one, filepath.Join(ext, "p", "one"), filepath.Join(ext, "p", "one", "x"))
	wantCreated(t, "second add", res.Changes[3:], two, filepath.Join(ext, "q", "one"), filepath.Join(ext, "q", "one", "x"))
	if n := rewindRecords(t, ap.cfg, res.Changes); n != 6 {
		t.Errorf("rewind of the patch restored %d paths", n)
	}
	for _, d := range []string{"p/one", "q/one"} {
		if _, err := os.Lstat(filepath.Join(ext, d)); !os.IsNotExist(err) {
			t.Errorf("after the rewind, %s: %v", d, err)
		}
	}
}

// An approval shows the directories a write or a patch would create, each
// once, as part of the effect.
func TestPreviewNamesCreatedDirs(t *testing.T) {
	ext, wr, ap := externalTools(t)
	ctx := context.Background()
	pv, err := wr.Preview(ctx, argsJSON(t, map[string]any{"path": filepath.Join(ext, "a", "b", "f.txt"), "content": "x\n"}))
	if want := "create " + filepath.Join(ext, "a", "b", "f.txt") + " (2 bytes); creates directories " + filepath.Join(ext, "a") + ", " + filepath.Join(ext, "a", "b"); err != nil || pv.Detail != want {
		t.Errorf("write preview detail = %q, %v; want %q", pv.Detail, err, want)
	}
	// A directory name the model chose is shown as the diff headers show
	// it: a newline in it quoted, on the detail's one line.
	pv, err = wr.Preview(ctx, argsJSON(t, map[string]any{"path": filepath.Join(ext, "odd\ndir", "f.txt"), "content": "x\n"}))
	if want := `; creates directory "` + filepath.Join(ext, "odd") + `\ndir"`; err != nil || !strings.HasSuffix(pv.Detail, want) {
		t.Errorf("write preview detail = %q, %v; want it to end %q", pv.Detail, err, want)
	}
	writeTestFile(t, filepath.Join(ext, "old.txt"), "o\n")
	patch := "*** Begin Patch\n*** Add File: " + filepath.Join(ext, "n", "one.txt") + "\n+1\n*** Add File: " + filepath.Join(ext, "n", "two.txt") +
		"\n+2\n*** Update File: " + filepath.Join(ext, "old.txt") + "\n*** Move to: " + filepath.Join(ext, "m", "old.txt") + "\n*** End Patch\n"
	pv, err = ap.Preview(ctx, argsJSON(t, map[string]any{"input": patch}))
	want := "add " + filepath.Join(ext, "n", "one.txt") + " (2 bytes); creates directory " + filepath.Join(ext, "n") + "\n" +
		"add " + filepath.Join(ext, "n", "two.txt") + " (2 bytes)\n" +
		"move " + filepath.Join(ext, "old.txt") + " to " + filepath.Join(ext, "m", "old.txt") + " (content unchanged); creates directory " + filepath.Join(ext, "m")
	if err != nil || pv.Detail != want {
		t.Errorf("apply_patch preview detail = %q, %v; want %q", pv.Detail, err, want)
	}
}
