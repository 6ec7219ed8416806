package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/changes"
)

// newTestSnapshotter returns a snapshotter of a new workspace with its
// own store, and the workspace.
func newTestSnapshotter(t *testing.T) (*snapshotter, string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("no snapshots on windows")
	}
	ws := t.TempDir()
	store, err := changes.Open(t.TempDir(), 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	s := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: store}})
	// ext4 and tmpfs have nanosecond timestamps: a short window, waited
	// out (settle), lets the test see the stat cache at work.
	s.racy = 10 * time.Millisecond
	return s, ws
}

// settle waits out the racy window.
func settle() { time.Sleep(20 * time.Millisecond) }

func put(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func kindsOf(recs []changes.Record) map[string]changes.Kind {
	out := map[string]changes.Kind{}
	for _, r := range recs {
		out[r.Path] = r.Kind
	}
	return out
}

// TestSnapshotChangeDetection: a second snapshot hashes only the files
// whose stat changed; a same-size rewrite whose mtime is set back is
// still found (ctime); what .gitignore ignores and .git are not in a
// snapshot; a file over the limit is skipped and said to be.
func TestSnapshotChangeDetection(t *testing.T) {
	s, ws := newTestSnapshotter(t)
	for _, p := range []string{"a.txt", "b.txt", "sub/c \"q\"\tä.txt", "build/out.o", ".git/HEAD"} {
		put(t, filepath.Join(ws, p), "content of "+p+"\n")
	}
	put(t, filepath.Join(ws, ".gitignore"), "build/\n")
	put(t, filepath.Join(ws, "large.bin"), strings.Repeat("x", 2<<10))
	s.redactor = NewRedactor("sk-test-0123456789")
	put(t, filepath.Join(ws, "creds"), "KEY=sk-test-0123456789\n")
	settle()
	first, err := s.take()
	if err != nil {
		t.Fatal(err)
	}
	if first.hashed != 5 {
		t.Errorf("first snapshot hashed %d files, want 5", first.hashed)
	}
	for _, p := range []string{"build", "build/out.o", ".git", ".git/HEAD"} {
		if _, ok := first.entries[p]; ok {
			t.Errorf("snapshot holds %s", p)
		}
	}
	if len(first.skipped) != 1 || first.skipped[0] != "large.bin" || len(first.secret) != 1 || first.secret[0] != "creds" {
		t.Errorf("skipped = %v, secret = %v", first.skipped, first.secret)
	}
	if s.rec.Store.Has(first.entries["creds"].sum, first.entries["creds"].size) || first.entries["creds"].sum != "" {
		t.Errorf("the file holding a secret was kept: %+v", first.entries["creds"])
	}
	// The manifest is durable and names every entry.
	man, err := s.rec.Store.Get(first.manifest)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(man), "\n"), "\n")
	if len(lines) != len(first.entries) {
		t.Errorf("manifest has %d lines for %d entries", len(lines), len(first.entries))
	}
	for _, l := range lines {
		var m struct {
			P string `json:"p"`
			H string `json:"h"`
			D bool   `json:"d"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("manifest line %q: %v", l, err)
		}
		if e, ok := first.entries[m.P]; !ok || e.sum != m.H || e.dir != m.D {
			t.Errorf("manifest line %q does not match the snapshot's %+v", l, e)
		}
	}
	second, err := s.take()
	if err != nil {
		t.Fatal(err)
	}
	if second.hashed != 1 || // creds: a file not kept is read each time
		second.manifest != first.manifest {
		t.Errorf("unchanged workspace: hashed %d, manifest %s vs %s", second.hashed, second.manifest, first.manifest)
	}

	// Same size, mtime set back: only the ctime (and content) differ.
	st, _ := os.Lstat(filepath.Join(ws, "a.txt"))
	put(t, filepath.Join(ws, "a.txt"), "CONTENT of a.txt\n")
	if err := os.Chtimes(filepath.Join(ws, "a.txt"), st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	settle()
	third, err := s.take()
	if err != nil {
		t.Fatal(err)
	}
	got := kindsOf(s.changesBetween(second, third))
	if len(got) != 1 || got["a.txt"] != changes.Modify {
		t.Errorf("changes after a same-size rewrite: %v", got)
	}
	if third.hashed != 2 {
		t.Errorf("third snapshot hashed %d files, want 2 (a.txt, creds)", third.hashed)
	}
	undo := strings.Join(s.cannotUndo(second, third), "\n")
	if !strings.Contains(undo, "file(s) over the 1024-byte snapshot limit, not kept: 1: large.bin") {
		t.Errorf("cannotUndo: %q", undo)
	}
}

// TestSnapshotIgnoreChanges: a .gitignore the command writes does not
// make the files it now ignores look deleted, nor the files a removed
// rule shows look created.
func TestSnapshotIgnoreChanges(t *testing.T) {
	s, ws := newTestSnapshotter(t)
	put(t, filepath.Join(ws, "keep.log"), "log\n")
	put(t, filepath.Join(ws, "gen/x.txt"), "x\n")
	put(t, filepath.Join(ws, ".gitignore"), "gen/\n")
	pre, err := s.take()
	if err != nil {
		t.Fatal(err)
	}
	put(t, filepath.Join(ws, ".gitignore"), "*.log\n")
	post, err := s.take()
	if err != nil {
		t.Fatal(err)
	}
	got := kindsOf(s.changesBetween(pre, post))
	if len(got) != 1 || got[".gitignore"] != changes.Modify {
		t.Errorf("changes: %v, want only .gitignore modified", got)
	}
}
