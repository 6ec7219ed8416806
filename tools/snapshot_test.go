package tools

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
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

// TestBashCheckpointsAllButReads: under controlled, a command the broker
// admits as a read takes no checkpoint (no snapshot, no changes); an
// approved command takes one, and its result carries what it changed and
// what a rewind of it cannot undo.
func TestBashCheckpointsAllButReads(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	if runtime.GOOS == "windows" {
		t.Skip("no snapshots on windows")
	}
	ws := t.TempDir()
	put(t, filepath.Join(ws, "a.txt"), "one\n")
	store, err := changes.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBash(Config{Root: ws, SpillDir: t.TempDir(), Changes: &changes.Recorder{Store: store}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	br := NewBroker(BrokerConfig{Policy: Controlled, Approver: approveAll()})
	run := func(command string) (Result, ToolPolicyDecision) {
		args, _ := json.Marshal(map[string]string{"command": command})
		return br.Dispatch(context.Background(), mustHost(t, b), req("bash", string(args)), DispatchObserver{})
	}
	res, d := run("cat a.txt")
	if d.Reason != ReasonReadOnlyCommand || res.IsError {
		t.Fatalf("cat: %s %+v", d.Reason, res)
	}
	if res.Details["checkpoint"] != nil || res.CannotUndo != nil || b.snaps.last != nil {
		t.Errorf("a read took a checkpoint: %+v", res)
	}
	res, d = run("echo two >> a.txt")
	if d.Reason != ReasonApproved || res.IsError {
		t.Fatalf("echo: %s %+v", d.Reason, res)
	}
	if len(res.Changes) != 1 || res.Changes[0].Path != "a.txt" || res.Changes[0].Diff != "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n one\n+two\n" {
		t.Errorf("changes of an approved command: %+v", res.Changes)
	}
	if res.Details["checkpoint"] == nil || len(res.CannotUndo) == 0 {
		t.Errorf("an approved command's checkpoint: %v, %v", res.Details["checkpoint"], res.CannotUndo)
	}
}

// TestSnapshotUnreadableFile: a file the snapshot cannot read is left
// out and named in what the checkpoint cannot undo.
func TestSnapshotUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file")
	}
	s, ws := newTestSnapshotter(t)
	put(t, filepath.Join(ws, "locked"), "x\n")
	if err := os.Chmod(filepath.Join(ws, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	snap, err := s.take()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.entries["locked"]; ok || len(snap.failed) != 1 {
		t.Errorf("unreadable file: entries %v, failed %v", snap.entries, snap.failed)
	}
	if undo := strings.Join(s.cannotUndo(snap, snap), "\n"); !strings.Contains(undo, "could not read, not kept: 1: locked") {
		t.Errorf("cannotUndo: %q", undo)
	}
}

// TestSnapshotBudget: a snapshot keeps at most half the store's cap of
// files (by path order); the rest are not kept, and the checkpoint says
// so, so a workspace larger than the store is not read and stored in
// full on every command.
func TestSnapshotBudget(t *testing.T) {
	s, ws := newTestSnapshotter(t)
	s.rec.Store.SetMaxBytes(40)
	for _, p := range []string{"a", "b", "c"} {
		put(t, filepath.Join(ws, p), "123456789\n") // 10 bytes
	}
	snap, err := s.take()
	if err != nil {
		t.Fatal(err)
	}
	if snap.hashed != 2 || len(snap.overBudget) != 1 || snap.overBudget[0] != "c" || !snap.entries["c"].skipped {
		t.Errorf("hashed %d, over budget %v, c %+v", snap.hashed, snap.overBudget, snap.entries["c"])
	}
	if undo := strings.Join(s.cannotUndo(snap, snap), "\n"); !strings.Contains(undo, "past the 20 bytes a snapshot keeps (half the change store's cap), not kept: 1: c") {
		t.Errorf("cannotUndo: %q", undo)
	}
}
