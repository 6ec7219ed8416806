package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// winTempDir is t.TempDir, removed file by file (Go's os.RemoveAll fails
// under Wine 8, where CI runs this test).
func winTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tools-win")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { winRemoveTree(dir) })
	return dir
}

func winRemoveTree(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if p := filepath.Join(dir, e.Name()); e.IsDir() {
			winRemoveTree(p)
		} else {
			os.Remove(p)
		}
	}
	os.Remove(dir)
}

func winRun(t *testing.T, tool Tool, args map[string]any) Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tool.Classify(raw); err != nil {
		return Result{Text: "classify: " + err.Error(), IsError: true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := tool.Execute(ctx, Invocation{CallID: "call_1", Arguments: raw})
	if err != nil {
		t.Fatalf("%s Execute: %v", tool.Name(), err)
	}
	return res
}

// TestWindowsFileTools: on Windows read, write, edit and search work on
// the workspace through the handle-relative resolver ("\" or "/" in
// paths), and Windows path shapes outside the workspace rules (drive
// letters, "..", devices, streams) are refused at classification.
func TestWindowsFileTools(t *testing.T) {
	ws := winTempDir(t)
	out := winTempDir(t)
	if err := os.WriteFile(filepath.Join(out, "secret.txt"), []byte("SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	all, closeFn, err := Builtins(Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	by := map[string]Tool{}
	for _, tl := range all {
		by[tl.Name()] = tl
	}
	if res := winRun(t, by["write"], map[string]any{"path": `src\pkg\a.go`, "content": "package pkg\n\nfunc Hello() {}\n"}); res.IsError {
		t.Fatalf("write = %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "src", "pkg", "a.go")); !strings.Contains(string(b), "Hello") {
		t.Fatalf("written file = %q", b)
	}
	if res := winRun(t, by["read"], map[string]any{"path": "src/pkg/a.go"}); res.IsError || !strings.Contains(res.Text, "func Hello()") {
		t.Fatalf("read = %+v", res)
	}
	if res := winRun(t, by["edit"], map[string]any{"path": `src\pkg\a.go`, "old_text": "Hello", "new_text": "Goodbye"}); res.IsError {
		t.Fatalf("edit = %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "src", "pkg", "a.go")); !strings.Contains(string(b), "Goodbye") {
		t.Fatalf("edited file = %q", b)
	}
	if res := winRun(t, by["search"], map[string]any{"pattern": "Goodbye"}); res.IsError || !strings.Contains(res.Text, "a.go") {
		t.Fatalf("search = %+v", res)
	}
	if res := winRun(t, by["search"], map[string]any{"pattern": "Goodbye", "path": "src/pkg/a.go"}); res.IsError || !strings.Contains(res.Text, "a.go") {
		t.Fatalf("search of one file = %+v", res)
	}
	for _, p := range []string{filepath.Join(out, "secret.txt"), `C:secret.txt`, `..\out\secret.txt`, `src\..\..\x`, `CON`, `src\nul.txt`, `a.go:stream`, `file.`} {
		if res := winRun(t, by["read"], map[string]any{"path": p}); !res.IsError || strings.Contains(res.Text, "SECRET") {
			t.Errorf("read %q = %+v", p, res)
		}
		if res := winRun(t, by["write"], map[string]any{"path": p, "content": "x"}); !res.IsError {
			t.Errorf("write %q succeeded", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "secret.txt")); string(b) != "SECRET\n" {
		t.Errorf("outside file changed: %q", b)
	}
}
