//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fileTools returns read, edit and write sharing one tracker.
func fileTools(t *testing.T, cfg Config) (rd *ReadTool, ed *EditTool, wr *WriteTool) {
	t.Helper()
	cfg.Files = NewFileTracker()
	var err error
	if rd, err = NewRead(cfg); err != nil {
		t.Fatal(err)
	}
	if ed, err = NewEdit(cfg); err != nil {
		t.Fatal(err)
	}
	if wr, err = NewWrite(cfg); err != nil {
		t.Fatal(err)
	}
	return rd, ed, wr
}

func readBack(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEditExactUnique(t *testing.T) {
	ws, _ := fsWorkspace(t)
	_, ed, _ := fileTools(t, Config{Root: ws})
	writeTestFile(t, filepath.Join(ws, "f.txt"), "a b a c\n")
	res := run(t, ed, map[string]any{"path": "f.txt", "old_text": "a", "new_text": "X"})
	if !res.IsError || !strings.Contains(res.Text, "matches 2 times") {
		t.Errorf("ambiguous edit = %+v", res)
	}
	res = run(t, ed, map[string]any{"path": "f.txt", "old_text": "zzz", "new_text": "X"})
	if !res.IsError || !strings.Contains(res.Text, "not found") {
		t.Errorf("missing text edit = %+v", res)
	}
	if got := readBack(t, filepath.Join(ws, "f.txt")); got != "a b a c\n" {
		t.Fatalf("failed edits changed the file: %q", got)
	}
	res = run(t, ed, map[string]any{"path": "f.txt", "old_text": "b", "new_text": "B"})
	if res.IsError || readBack(t, filepath.Join(ws, "f.txt")) != "a B a c\n" {
		t.Errorf("unique edit = %+v, file %q", res, readBack(t, filepath.Join(ws, "f.txt")))
	}
	res = run(t, ed, map[string]any{"path": "f.txt", "old_text": "a", "new_text": "", "replace_all": true})
	if res.IsError || res.Details["replacements"] != 2 || readBack(t, filepath.Join(ws, "f.txt")) != " B  c\n" {
		t.Errorf("replace_all = %+v, file %q", res, readBack(t, filepath.Join(ws, "f.txt")))
	}
	res = run(t, ed, map[string]any{"path": "missing.txt", "old_text": "a", "new_text": "b"})
	if !res.IsError || !strings.Contains(res.Text, "no such file") {
		t.Errorf("edit missing file = %+v", res)
	}
}

func TestEditRefusesChangedSinceRead(t *testing.T) {
	ws, _ := fsWorkspace(t)
	rd, ed, wr := fileTools(t, Config{Root: ws})
	p := filepath.Join(ws, "hello.txt")
	if res := run(t, rd, map[string]any{"path": "hello.txt"}); res.IsError {
		t.Fatal(res.Text)
	}
	// The user changes the file behind the model's back.
	writeTestFile(t, p, "one\nTWO\nthree\n")
	res := run(t, ed, map[string]any{"path": "hello.txt", "old_text": "three", "new_text": "3"})
	if !res.IsError || res.Text != errChangedSinceRead {
		t.Fatalf("stale edit = %+v", res)
	}
	res = run(t, wr, map[string]any{"path": "hello.txt", "content": "clobber"})
	if !res.IsError || res.Text != errChangedSinceRead {
		t.Fatalf("stale write = %+v", res)
	}
	if got := readBack(t, p); got != "one\nTWO\nthree\n" {
		t.Fatalf("user's change lost: %q", got)
	}
	// After reading again the edit goes through, and the model's own edit
	// counts as what it last saw, so a second edit needs no re-read.
	run(t, rd, map[string]any{"path": "hello.txt"})
	if res := run(t, ed, map[string]any{"path": "hello.txt", "old_text": "three", "new_text": "3"}); res.IsError {
		t.Fatal(res.Text)
	}
	if res := run(t, ed, map[string]any{"path": "hello.txt", "old_text": "one", "new_text": "1"}); res.IsError {
		t.Fatal(res.Text)
	}
	if got := readBack(t, p); got != "1\nTWO\n3\n" {
		t.Errorf("file = %q", got)
	}
}

func TestWriteCreatesAndReplaces(t *testing.T) {
	ws, _ := fsWorkspace(t)
	_, _, wr := fileTools(t, Config{Root: ws})
	res := run(t, wr, map[string]any{"path": "a/b/c.txt", "content": "new\n"})
	if res.IsError || res.Details["created"] != true || readBack(t, filepath.Join(ws, "a/b/c.txt")) != "new\n" {
		t.Fatalf("create = %+v", res)
	}
	if err := os.Chmod(filepath.Join(ws, "a/b/c.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	res = run(t, wr, map[string]any{"path": "a/b/c.txt", "content": "v2\n"})
	if res.IsError || res.Details["created"] != false || readBack(t, filepath.Join(ws, "a/b/c.txt")) != "v2\n" {
		t.Fatalf("replace = %+v", res)
	}
	st, _ := os.Stat(filepath.Join(ws, "a/b/c.txt"))
	if st.Mode().Perm() != 0o755 {
		t.Errorf("mode not kept: %v", st.Mode().Perm())
	}
	res = run(t, wr, map[string]any{"path": "src", "content": "x"})
	if !res.IsError || !strings.Contains(res.Text, "directory") {
		t.Errorf("write over a directory = %+v", res)
	}
}

func TestPreviews(t *testing.T) {
	ws, _ := fsWorkspace(t)
	_, ed, wr := fileTools(t, Config{Root: ws})
	ctx := context.Background()
	pv, err := ed.Preview(ctx, json.RawMessage(`{"path":"hello.txt","old_text":"two","new_text":"2"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pv.Diff, "-two\n+2\n") || !strings.Contains(pv.Diff, "--- a/hello.txt") {
		t.Errorf("edit diff = %q", pv.Diff)
	}
	if readBack(t, filepath.Join(ws, "hello.txt")) != "one\ntwo\nthree\n" {
		t.Error("Preview changed the file")
	}
	pv, err = ed.Preview(ctx, json.RawMessage(`{"path":"hello.txt","old_text":"nope","new_text":"2"}`))
	if err != nil || pv.Diff != "" || !strings.Contains(pv.Detail, "not found") {
		t.Errorf("failing edit preview = %+v, %v", pv, err)
	}
	if pv.Title != "edit hello.txt" {
		t.Errorf("edit title = %q", pv.Title)
	}
	// replace_all: the title says how many occurrences the one-line
	// old_text replaces (a replace_all that matches once says nothing).
	writeTestFile(t, filepath.Join(ws, "many.txt"), "x\ny\nx\nx\n")
	for args, want := range map[string]string{
		`{"path":"many.txt","old_text":"x","new_text":"z","replace_all":true}`: "edit many.txt (replace all: 3 occurrences)",
		`{"path":"many.txt","old_text":"y","new_text":"z","replace_all":true}`: "edit many.txt",
	} {
		if pv, err := ed.Preview(ctx, json.RawMessage(args)); err != nil || pv.Title != want {
			t.Errorf("edit %s preview title = %q, %v; want %q", args, pv.Title, err, want)
		}
	}
	pv, err = wr.Preview(ctx, json.RawMessage(`{"path":"new.txt","content":"hi\n"}`))
	if err != nil || !strings.Contains(pv.Diff, "+hi") {
		t.Errorf("write preview = %+v, %v", pv, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Error("Preview created the file")
	}
	if _, err := wr.Preview(ctx, json.RawMessage(`{"path":"/etc/x","content":""}`)); err == nil {
		t.Error("Preview accepted an absolute path with external paths off")
	}
}

func TestEditCRLFFile(t *testing.T) {
	ws, _ := fsWorkspace(t)
	_, ed, _ := fileTools(t, Config{Root: ws})
	p := filepath.Join(ws, "dos.txt")
	writeTestFile(t, p, "one\r\ntwo\r\nthree\r\n")
	res := run(t, ed, map[string]any{"path": "dos.txt", "old_text": "one\ntwo", "new_text": "1\n2\n2.5"})
	if res.IsError {
		t.Fatal(res.Text)
	}
	if got := readBack(t, p); got != "1\r\n2\r\n2.5\r\nthree\r\n" {
		t.Errorf("file = %q", got)
	}
}
