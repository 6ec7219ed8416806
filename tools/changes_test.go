//go:build unix

package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/changes"
)

// changeTools returns edit and write staging their changes in a fresh
// store.
func changeTools(t *testing.T) (ws string, rec *changes.Recorder, ed *EditTool, wr *WriteTool) {
	t.Helper()
	ws, _ = fsWorkspace(t)
	st, err := changes.OpenWorkspace(t.TempDir(), ws, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec = &changes.Recorder{Store: st}
	_, ed, wr = fileTools(t, Config{Root: ws, Changes: rec})
	return ws, rec, ed, wr
}

func TestEditAndWriteCarryChanges(t *testing.T) {
	ws, rec, ed, wr := changeTools(t)
	if err := os.Chmod(filepath.Join(ws, "hello.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	res := run(t, ed, map[string]any{"path": "hello.txt", "old_text": "two", "new_text": "2"})
	if res.IsError || len(res.Changes) != 1 {
		t.Fatalf("edit = %+v", res)
	}
	c := res.Changes[0]
	if c.Path != "hello.txt" || c.Kind != changes.Modify || c.Diff != "--- a/hello.txt\n+++ b/hello.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n" {
		t.Errorf("edit change = %+v", c)
	}
	if c.Before.Mode != 0o640 || c.After.Mode != 0o640 {
		t.Errorf("modes %v %v", c.Before.Mode, c.After.Mode)
	}
	for _, img := range []*changes.Image{c.Before, c.After} {
		if _, err := rec.Store.Get(img.SHA256); err != nil {
			t.Errorf("image not kept: %v", err)
		}
	}
	res = run(t, wr, map[string]any{"path": "new/dir/f.txt", "content": "fresh\n"})
	if res.IsError || len(res.Changes) != 3 || res.Changes[2].Kind != changes.Add || res.Changes[2].Before != nil ||
		res.Changes[2].After.Mode != 0o644 || !strings.HasPrefix(res.Changes[2].Diff, "--- /dev/null\n+++ b/new/dir/f.txt\n") {
		t.Fatalf("write (create) = %+v", res)
	}
	// The directories it created come first, parents first.
	for i, d := range []string{"new", "new/dir"} {
		if c := res.Changes[i]; c.Path != d || c.Kind != changes.Add || c.Before != nil || !c.After.Dir || c.After.Mode != 0o755 {
			t.Errorf("write (create), change %d = %+v, want directory %s created", i, c, d)
		}
	}
	// A rewind past the write removes them with the file.
	if n := rewindRecords(t, wr.cfg, res.Changes); n != 3 {
		t.Errorf("rewind of the write restored %d paths", n)
	}
	if _, err := os.Lstat(filepath.Join(ws, "new")); !os.IsNotExist(err) {
		t.Errorf("after the rewind, new: %v", err)
	}
	res = run(t, wr, map[string]any{"path": "hello.txt", "content": "replaced\n"})
	if res.IsError || len(res.Changes) != 1 || res.Changes[0].Kind != changes.Modify {
		t.Errorf("write (replace) = %+v", res)
	}
	// Writing the same bytes again changes nothing.
	res = run(t, wr, map[string]any{"path": "hello.txt", "content": "replaced\n"})
	if res.IsError || res.Changes != nil {
		t.Errorf("write (same) = %+v", res)
	}
}

func TestFailedEditHasNoChange(t *testing.T) {
	_, _, ed, wr := changeTools(t)
	for _, args := range []map[string]any{
		{"path": "hello.txt", "old_text": "absent", "new_text": "x"},
		{"path": "missing.txt", "old_text": "a", "new_text": "b"},
		{"path": "secret-link", "old_text": "SECRET", "new_text": "x"},
	} {
		if res := run(t, ed, args); !res.IsError || res.Changes != nil {
			t.Errorf("edit %v = %+v", args, res)
		}
	}
	if res := run(t, wr, map[string]any{"path": "src", "content": "x"}); !res.IsError || res.Changes != nil {
		t.Errorf("write over a directory = %+v", res)
	}
}

// The images are kept before the file is changed: when the store cannot
// keep them, nothing is written.
func TestChangeStoreFailureWritesNothing(t *testing.T) {
	ws, rec, ed, wr := changeTools(t)
	tmp := filepath.Join(rec.Store.Dir(), "tmp")
	if err := os.RemoveAll(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o600); err != nil { // breaks every blob write, even for root
		t.Fatal(err)
	}
	res := run(t, ed, map[string]any{"path": "hello.txt", "old_text": "two", "new_text": "2"})
	if !res.IsError || res.Changes != nil || !strings.Contains(res.Text, "nothing was written") {
		t.Errorf("edit = %+v", res)
	}
	res = run(t, wr, map[string]any{"path": "n.txt", "content": "x"})
	if !res.IsError || !strings.Contains(res.Text, "keep the new content of n.txt") {
		t.Errorf("write = %+v", res)
	}
	if got := readBack(t, filepath.Join(ws, "hello.txt")); got != "one\ntwo\nthree\n" {
		t.Errorf("file changed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "n.txt")); !os.IsNotExist(err) {
		t.Errorf("n.txt was created: %v", err)
	}
}

func TestRedactorRedactsChanges(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	orig := []changes.Record{{Change: changes.Change{Path: "f", Kind: changes.Modify, Diff: "+key = " + key + "\n"}}}
	res := NewRedactor(key).Result(Result{Text: "ok", Changes: orig})
	if strings.Contains(res.Changes[0].Diff, key) || !strings.Contains(res.Changes[0].Diff, RedactedSecret) {
		t.Errorf("diff = %q", res.Changes[0].Diff)
	}
	if !strings.Contains(orig[0].Diff, key) {
		t.Error("the tool's own records were changed")
	}
}
