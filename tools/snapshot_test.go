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
// own store, and the workspace. With walk it has no change feed.
func newTestSnapshotter(t *testing.T, walk bool) (*snapshotter, string) {
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
	s.noFeed = walk
	t.Cleanup(s.close)
	return s, ws
}

// bothModes runs f with the change feed (where there is one) and
// walking every time: the two must find the same changes.
func bothModes(t *testing.T, f func(t *testing.T, walk bool)) {
	t.Run("feed", func(t *testing.T) { f(t, false) })
	t.Run("walk", func(t *testing.T) { f(t, true) })
}

// take takes a snapshot or fails the test.
func take(t *testing.T, s *snapshotter) *snapshot {
	t.Helper()
	snap, err := s.take(t.Context(), takeOptions{before: true})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// entriesNow returns every entry of s's tree, by path.
func entriesNow(t *testing.T, s *snapshotter) map[string]snapEntry {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	es, err := s.entriesOf(s.last)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// recorder returns the Recorder of s's store.
func recorder(s *snapshotter) *changes.Recorder { return &changes.Recorder{Store: s.store} }

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
// snapshot; a file over the limit is skipped and said to be; a file
// holding a secret is not kept, nor read again while unchanged.
func TestSnapshotChangeDetection(t *testing.T) {
	bothModes(t, func(t *testing.T, walk bool) {
		s, ws := newTestSnapshotter(t, walk)
		for _, p := range []string{"a.txt", "b.txt", "sub/c \"q\"\tä.txt", "build/out.o", ".git/HEAD"} {
			put(t, filepath.Join(ws, p), "content of "+p+"\n")
		}
		put(t, filepath.Join(ws, ".gitignore"), "build/\n")
		put(t, filepath.Join(ws, "large.bin"), strings.Repeat("x", 2<<10))
		s.redactor = NewRedactor("sk-test-0123456789")
		put(t, filepath.Join(ws, "creds"), "KEY=sk-test-0123456789\n")
		settle()
		first := take(t, s)
		if first.hashed != 5 {
			t.Errorf("first snapshot hashed %d files, want 5", first.hashed)
		}
		entries := entriesNow(t, s)
		for _, p := range []string{"build", "build/out.o", ".git", ".git/HEAD"} {
			if _, ok := entries[p]; ok {
				t.Errorf("snapshot holds %s", p)
			}
		}
		if len(first.skipped) != 1 || first.skipped[0] != "large.bin" || len(first.secret) != 1 || first.secret[0] != "creds" {
			t.Errorf("skipped = %v, secret = %v", first.skipped, first.secret)
		}
		if entries["creds"].sum != "" {
			t.Errorf("the file holding a secret was kept: %+v", entries["creds"])
		}
		// The manifest is durable and names every entry.
		man, err := s.store.Get(first.manifest)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(man), "\n"), "\n")
		if len(lines) != len(entries) {
			t.Errorf("manifest has %d lines for %d entries", len(lines), len(entries))
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
			if e, ok := entries[m.P]; !ok || e.sum != m.H || e.dir != m.D {
				t.Errorf("manifest line %q does not match the snapshot's %+v", l, e)
			}
		}
		second := take(t, s)
		if second.hashed != 0 || second.manifest != first.manifest || len(second.delta) != 0 {
			t.Errorf("unchanged workspace: hashed %d, manifest %s vs %s, delta %v", second.hashed, second.manifest, first.manifest, second.delta)
		}
		if !walk && runtime.GOOS == "linux" && second.walked {
			t.Error("the second snapshot walked the workspace: no change feed")
		}

		// Same size, mtime set back: only the ctime (and content) differ.
		st, _ := os.Lstat(filepath.Join(ws, "a.txt"))
		put(t, filepath.Join(ws, "a.txt"), "CONTENT of a.txt\n")
		if err := os.Chtimes(filepath.Join(ws, "a.txt"), st.ModTime(), st.ModTime()); err != nil {
			t.Fatal(err)
		}
		settle()
		third := take(t, s)
		got := kindsOf(s.changesBetween(recorder(s), second, third))
		if len(got) != 1 || got["a.txt"] != changes.Modify {
			t.Errorf("changes after a same-size rewrite: %v", got)
		}
		if third.hashed != 1 {
			t.Errorf("third snapshot hashed %d files, want 1 (a.txt)", third.hashed)
		}
		undo := strings.Join(s.cannotUndo(second, third), "\n")
		if !strings.Contains(undo, "file(s) over the 1024-byte snapshot limit, not kept: 1: large.bin") {
			t.Errorf("cannotUndo: %q", undo)
		}
	})
}

// TestSnapshotIgnoreChanges: a .gitignore the command writes does not
// make the files it now ignores look deleted, nor the files a removed
// rule shows look created.
func TestSnapshotIgnoreChanges(t *testing.T) {
	bothModes(t, func(t *testing.T, walk bool) {
		s, ws := newTestSnapshotter(t, walk)
		put(t, filepath.Join(ws, "keep.log"), "log\n")
		put(t, filepath.Join(ws, "gen/x.txt"), "x\n")
		put(t, filepath.Join(ws, ".gitignore"), "gen/\n")
		pre := take(t, s)
		put(t, filepath.Join(ws, ".gitignore"), "*.log\n")
		post := take(t, s)
		got := kindsOf(s.changesBetween(recorder(s), pre, post))
		if len(got) != 1 || got[".gitignore"] != changes.Modify {
			t.Errorf("changes: %v, want only .gitignore modified", got)
		}
		if _, ok := entriesNow(t, s)["gen/x.txt"]; !ok {
			t.Error("gen/x.txt, no longer ignored, is not in the tree")
		}
	})
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
	<-b.snaps.warmDone // the first snapshot, taken ahead of the first call
	warm := b.snaps.lastSnapshot()
	res, d := run("cat a.txt")
	if d.Reason != ReasonReadOnlyCommand || res.IsError {
		t.Fatalf("cat: %s %+v", d.Reason, res)
	}
	if res.Details["checkpoint"] != nil || res.CannotUndo != nil || b.snaps.lastSnapshot() != warm {
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
// out and named in what the checkpoint cannot undo; made readable, it is
// kept.
func TestSnapshotUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file")
	}
	bothModes(t, func(t *testing.T, walk bool) {
		s, ws := newTestSnapshotter(t, walk)
		put(t, filepath.Join(ws, "locked"), "x\n")
		if err := os.Chmod(filepath.Join(ws, "locked"), 0); err != nil {
			t.Fatal(err)
		}
		snap := take(t, s)
		if _, ok := entriesNow(t, s)["locked"]; ok || len(snap.failed) != 1 {
			t.Errorf("unreadable file: failed %v", snap.failed)
		}
		if undo := strings.Join(s.cannotUndo(snap, snap), "\n"); !strings.Contains(undo, "could not read, not kept: 1: locked") {
			t.Errorf("cannotUndo: %q", undo)
		}
		if err := os.Chmod(filepath.Join(ws, "locked"), 0o644); err != nil {
			t.Fatal(err)
		}
		next := take(t, s)
		if e, ok := entriesNow(t, s)["locked"]; !ok || e.sum == "" || len(next.failed) != 0 {
			t.Errorf("made readable: %+v, failed %v", e, next.failed)
		}
	})
}

// TestSnapshotBudget: a snapshot keeps at most half the store's cap of
// files (by path order): at the budget every file is kept, a byte past
// it the last file is not, and the checkpoint says so, so a workspace
// larger than the store is not read and stored in full on every command.
// Back within the budget, the file is kept again.
func TestSnapshotBudget(t *testing.T) {
	bothModes(t, func(t *testing.T, walk bool) {
		s, ws := newTestSnapshotter(t, walk)
		s.store.SetMaxBytes(60)
		for _, p := range []string{"a", "b", "c"} {
			put(t, filepath.Join(ws, p), "123456789\n") // 10 bytes: 30 = the budget
		}
		snap := take(t, s)
		if snap.hashed != 3 || len(snap.overBudget) != 0 {
			t.Errorf("at the budget: hashed %d, over budget %v", snap.hashed, snap.overBudget)
		}
		put(t, filepath.Join(ws, "c"), "123456789\n!") // 31 bytes
		snap = take(t, s)
		if len(snap.overBudget) != 1 || snap.overBudget[0] != "c" || entriesNow(t, s)["c"].skip != skipBudget {
			t.Errorf("a byte past the budget: hashed %d, over budget %v, c %+v", snap.hashed, snap.overBudget, entriesNow(t, s)["c"])
		}
		if undo := strings.Join(s.cannotUndo(snap, snap), "\n"); !strings.Contains(undo, "past the 30 bytes a snapshot keeps (half the change store's cap), not kept: 1: c") {
			t.Errorf("cannotUndo: %q", undo)
		}
		if err := os.Remove(filepath.Join(ws, "a")); err != nil {
			t.Fatal(err)
		}
		snap = take(t, s)
		if len(snap.overBudget) != 0 || entriesNow(t, s)["c"].sum == "" {
			t.Errorf("back within the budget: over budget %v, c %+v", snap.overBudget, entriesNow(t, s)["c"])
		}
	})
}

// TestSnapshotNamesNotUTF8: a change of a path whose name is not valid
// UTF-8 is not among a checkpoint's changes — the session file and the
// wire are JSON, where such a name becomes another one (U+FFFD), so a
// rewind would make a file that never existed and miss the real one —
// and its cannotUndo names it.
func TestSnapshotNamesNotUTF8(t *testing.T) {
	bothModes(t, func(t *testing.T, walk bool) {
		s, ws := newTestSnapshotter(t, walk)
		put(t, filepath.Join(ws, "old\xff.txt"), "old\n")
		put(t, filepath.Join(ws, "ok.txt"), "ok\n")
		pre := take(t, s)
		if err := os.Remove(filepath.Join(ws, "old\xff.txt")); err != nil {
			t.Fatal(err)
		}
		put(t, filepath.Join(ws, "new\xfe.txt"), "new\n")
		put(t, filepath.Join(ws, "dir\xff/in.txt"), "in\n")
		put(t, filepath.Join(ws, "ok.txt"), "ok, changed\n")
		settle()
		post := take(t, s)
		recs, undo := s.checkpointChanges(recorder(s), pre, post)
		if got := kindsOf(recs); len(got) != 1 || got["ok.txt"] != changes.Modify {
			t.Errorf("changes: %v, want only ok.txt modified", got)
		}
		want := `not recorded: 4: "dir\xff", "dir\xff/in.txt", "new\xfe.txt", "old\xff.txt"`
		if u := strings.Join(undo, "\n"); !strings.Contains(u, want) {
			t.Errorf("cannotUndo: %q, want it to hold %q", u, want)
		}
	})
}
