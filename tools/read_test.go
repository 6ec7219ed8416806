//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fsWorkspace builds a workspace with a few files, an outside directory
// and links pointing out of the workspace.
func fsWorkspace(t *testing.T) (ws, out string) {
	t.Helper()
	base := t.TempDir()
	ws, out = filepath.Join(base, "ws"), filepath.Join(base, "out")
	for _, d := range []string{filepath.Join(ws, "src"), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeTestFile(t, filepath.Join(ws, "hello.txt"), "one\ntwo\nthree\n")
	writeTestFile(t, filepath.Join(ws, "src", "main.go"), "package main\n\nfunc main() {}\n")
	writeTestFile(t, filepath.Join(out, "secret.txt"), "SECRET\n")
	if err := os.Symlink(out, filepath.Join(ws, "outlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(ws, "secret-link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, out
}

func writeTestFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func argsJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// run classifies then executes one call, like the host does.
func run(t *testing.T, tool Tool, args any) Result {
	t.Helper()
	raw, ok := args.(json.RawMessage)
	if !ok {
		raw = argsJSON(t, args)
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

func TestReadLines(t *testing.T) {
	ws, _ := fsWorkspace(t)
	rd, err := NewRead(Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, rd, map[string]any{"path": "hello.txt"})
	want := "     1\tone\n     2\ttwo\n     3\tthree\n"
	if res.IsError || res.Text != want {
		t.Fatalf("read = %q (err %v), want %q", res.Text, res.IsError, want)
	}
	res = run(t, rd, map[string]any{"path": "hello.txt", "offset": 2, "limit": 1})
	if !strings.HasPrefix(res.Text, "     2\ttwo\n") || !strings.Contains(res.Text, "use offset=3") {
		t.Errorf("offset/limit read = %q", res.Text)
	}
	res = run(t, rd, map[string]any{"path": "hello.txt", "offset": 9})
	if !res.IsError || !strings.Contains(res.Text, "beyond the end") {
		t.Errorf("offset past EOF = %+v", res)
	}
}

func TestReadBoundsOutput(t *testing.T) {
	ws, _ := fsWorkspace(t)
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "line %d %s\n", i+1, strings.Repeat("x", 40))
	}
	b.WriteString(strings.Repeat("y", 5000) + "\n")
	writeTestFile(t, filepath.Join(ws, "big.txt"), b.String())
	rd, _ := NewRead(Config{Root: ws, MaxOutputBytes: 4096})
	res := run(t, rd, map[string]any{"path": "big.txt"})
	if len(res.Text) > 4096 {
		t.Errorf("read returned %d bytes, limit 4096", len(res.Text))
	}
	if res.Details["truncated"] != true || !strings.Contains(res.Text, "use offset=") {
		t.Errorf("no truncation note: %q", res.Text[max(0, len(res.Text)-200):])
	}
	res = run(t, rd, map[string]any{"path": "big.txt", "offset": 5001})
	if !strings.Contains(res.Text, "[line truncated]") || len(res.Text) > 2200 {
		t.Errorf("long line not cut: %d bytes", len(res.Text))
	}
}

func TestReadBinaryNotDumped(t *testing.T) {
	ws, _ := fsWorkspace(t)
	writeTestFile(t, filepath.Join(ws, "bin"), "ELF\x00\x01\x02secret-bytes")
	rd, _ := NewRead(Config{Root: ws})
	res := run(t, rd, map[string]any{"path": "bin"})
	if res.IsError || !strings.Contains(res.Text, "binary file") || strings.Contains(res.Text, "secret-bytes") {
		t.Errorf("binary read = %+v", res)
	}
}

func TestFileToolsRejectEscapes(t *testing.T) {
	ws, out := fsWorkspace(t)
	tools, closeFn, err := Builtins(Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	byName := map[string]Tool{}
	for _, tl := range tools {
		byName[tl.Name()] = tl
	}
	// Shapes Classify must refuse.
	for _, p := range []string{filepath.Join(out, "secret.txt"), "/etc/passwd", "../out/secret.txt", "src/../../out/x", ""} {
		for _, name := range []string{"read", "edit", "write"} {
			args := map[string]any{"path": p, "old_text": "a", "new_text": "b", "content": "x"}
			switch name {
			case "read":
				args = map[string]any{"path": p}
			case "write":
				args = map[string]any{"path": p, "content": "x"}
			}
			if _, err := byName[name].Classify(argsJSON(t, args)); err == nil {
				t.Errorf("%s Classify(%q) accepted", name, p)
			}
		}
	}
	// Links anywhere are refused at execution.
	for _, p := range []string{"secret-link", "outlink/secret.txt"} {
		res := run(t, byName["read"], map[string]any{"path": p})
		if !res.IsError || strings.Contains(res.Text, "SECRET") || !strings.Contains(res.Text, "symbolic link") {
			t.Errorf("read %s = %+v", p, res)
		}
		res = run(t, byName["write"], map[string]any{"path": p, "content": "pwned"})
		if !res.IsError {
			t.Errorf("write %s succeeded", p)
		}
	}
	res := run(t, byName["write"], map[string]any{"path": "outlink/new.txt", "content": "pwned"})
	if !res.IsError {
		t.Errorf("write through a parent link succeeded")
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != 1 {
		t.Errorf("outside directory changed: %d entries", len(ents))
	}
	// A FIFO is an error, not a hang.
	res = run(t, byName["read"], map[string]any{"path": "fifo"})
	if !res.IsError || !strings.Contains(res.Text, "FIFO") {
		t.Errorf("read fifo = %+v", res)
	}
}

func TestClassification(t *testing.T) {
	ws, _ := fsWorkspace(t)
	cases := []struct {
		external bool
		name     string
		args     string
		want     Effect
		wantErr  bool
	}{
		{false, "read", `{"path":"hello.txt"}`, WorkspaceRead, false},
		{false, "read", `{"path":"hello.txt","offset":2,"limit":5}`, WorkspaceRead, false},
		{false, "read", `{"path":"/etc/passwd"}`, Unknown, true},
		{false, "read", `{"path":"a/../b"}`, Unknown, true},
		{false, "read", `{}`, Unknown, true},
		{false, "read", `{"path":3}`, Unknown, true},
		{false, "read", `{"path":"x","limit":0}`, Unknown, true},
		{false, "read", `{"path":"x","bogus":1}`, Unknown, true},
		{false, "read", `not json`, Unknown, true},
		{false, "read", `{"path":"x"} {}`, Unknown, true},
		{false, "edit", `{"path":"hello.txt","old_text":"a","new_text":"b"}`, WorkspaceMutation, false},
		{false, "edit", `{"path":"hello.txt","old_text":"","new_text":"b"}`, Unknown, true},
		{false, "edit", `{"path":"hello.txt","old_text":"a"}`, Unknown, true},
		{false, "edit", `{"path":"hello.txt","old_text":"a","new_text":"b","replace_all":"yes"}`, Unknown, true},
		{false, "write", `{"path":"n.txt","content":""}`, WorkspaceMutation, false},
		{false, "write", `{"path":"n.txt"}`, Unknown, true},
		{true, "read", `{"path":"hello.txt"}`, HostRead, false},
		{true, "read", `{"path":"/etc/hostname"}`, HostRead, false},
		{true, "read", `{"path":"/etc/../etc/passwd"}`, Unknown, true},
		{true, "edit", `{"path":"hello.txt","old_text":"a","new_text":"b"}`, HostMutation, false},
		{true, "write", `{"path":"/tmp/x","content":"y"}`, HostMutation, false},
	}
	for _, c := range cases {
		tools, closeFn, err := Builtins(Config{Root: ws, AllowExternalPaths: c.external})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools {
			if tl.Name() != c.name {
				continue
			}
			got, err := tl.Classify(json.RawMessage(c.args))
			if (err != nil) != c.wantErr || got != c.want {
				t.Errorf("external=%v %s Classify(%s) = %v, %v; want %v, err=%v", c.external, c.name, c.args, got, err, c.want, c.wantErr)
			}
		}
		closeFn()
	}
}

func TestStaticStatements(t *testing.T) {
	ws, _ := fsWorkspace(t)
	tools, closeFn, err := Builtins(Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	want := map[string]struct {
		c Concurrency
		r ReplaySafety
	}{
		"read": {Parallel, ReplaySafe}, "search": {Parallel, ReplaySafe},
		"edit": {Sequential, ReplayUnsafe}, "write": {Sequential, ReplayUnsafe}, "apply_patch": {Sequential, ReplayUnsafe}, "bash": {Sequential, ReplayUnsafe},
		"update_plan": {Sequential, ReplaySafe}, "view_image": {Parallel, ReplaySafe},
	}
	for _, tl := range tools {
		w, ok := want[tl.Name()]
		if !ok {
			t.Errorf("unexpected tool %q", tl.Name())
			continue
		}
		if tl.Concurrency() != w.c || tl.ReplaySafety() != w.r {
			t.Errorf("%s: concurrency %v replay %v", tl.Name(), tl.Concurrency(), tl.ReplaySafety())
		}
		var schema map[string]any
		if err := json.Unmarshal(tl.Schema(), &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s schema: %v", tl.Name(), err)
		}
		if !strings.Contains(tl.Description(), " ") {
			t.Errorf("%s has no description", tl.Name())
		}
	}
}

func TestReadExternalWhenAllowed(t *testing.T) {
	ws, out := fsWorkspace(t)
	rd, _ := NewRead(Config{Root: ws, AllowExternalPaths: true})
	res := run(t, rd, map[string]any{"path": filepath.Join(out, "secret.txt")})
	if res.IsError || !strings.Contains(res.Text, "SECRET") {
		t.Errorf("external read = %+v", res)
	}
	res = run(t, rd, map[string]any{"path": "/dev/zero"})
	if !res.IsError || !strings.Contains(res.Text, "character device") {
		t.Errorf("/dev/zero = %+v", res)
	}
	// Absolute paths inside the workspace still go through the workspace
	// resolver, which refuses links.
	res = run(t, rd, map[string]any{"path": filepath.Join(ws, "outlink", "secret.txt")})
	if !res.IsError {
		t.Errorf("absolute workspace path through a link = %+v", res)
	}
}
