//go:build unix

package tools

import (
	"fmt"
	"hash/crc32"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/changes"
)

// TestSnapshotNewProcessMatchesWalk makes random changes of every kind
// between processes and checks the first snapshot of each new process —
// the head read while the walk runs, before it, or after it — against
// what it must be: its tree what a walk of the workspace finds; its
// delta exactly the difference between the head and that tree, so its
// manifest reads back as the tree; its counts, categories, watches and
// held images those of the tree.
func TestSnapshotNewProcessMatchesWalk(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			s, walked, o := randomWorkspace(t, seed, 36)
			ws := o.ws
			for i := range 12 {
				put(t, filepath.Join(ws, fmt.Sprintf("d%d/e%d/f%d.txt", i%3, i%2, i)), fmt.Sprintf("file %d\n", i))
			}
			put(t, filepath.Join(ws, "d0/large.bin"), strings.Repeat("x", 2<<10)) // over the store's limit
			head := take(t, s).manifest
			take(t, walked)
			s.close()
			for round := range 24 {
				did := o.steps()
				if round%4 == 3 {
					settle() // no longer racy: kept from the head
				}
				what := fmt.Sprintf("round %d (%s)", round, strings.Join(did, "; "))
				next := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: s.store}})
				next.racy, next.headOrder = s.racy, round%3
				snap := take(t, next)
				take(t, walked)
				sameEntries(t, what, next, walked)
				checkFirstSnapshot(t, what, next, snap, head)
				next.close()
				if t.Failed() {
					return
				}
				head = snap.manifest
			}
		})
	}
}

// TestSnapshotNewProcessPastBudget: a new process whose first walk
// finds the workspace past the budget (files the head kept now over it,
// and back) records what the budget made of the tree, not what the walk
// compared.
func TestSnapshotNewProcessPastBudget(t *testing.T) {
	s, ws := newTestSnapshotter(t, false)
	s.store.SetMaxBytes(60)
	for _, p := range []string{"a", "b", "c"} {
		put(t, filepath.Join(ws, p), "123456789\n") // 10 bytes: 30 = the budget
	}
	settle()
	head := take(t, s).manifest
	s.close()
	for i, change := range []func(){
		func() { put(t, filepath.Join(ws, "b"), "123456789\n!") }, // c is over the budget
		func() { put(t, filepath.Join(ws, "b"), "1\n") },          // back within it
	} {
		change()
		settle()
		next := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: s.store}})
		next.racy, next.headOrder = s.racy, i%2+1
		snap := take(t, next)
		checkFirstSnapshot(t, fmt.Sprint("change ", i), next, snap, head)
		if want := []string{"c"}[:1-i]; !slices.Equal(snap.overBudget, want) {
			t.Errorf("change %d: over the budget %v, want %v", i, snap.overBudget, want)
		}
		next.close()
		head = snap.manifest
	}
}

// checkFirstSnapshot fails t unless snap, the first snapshot s took,
// changed exactly what differs between the manifest head and s's tree,
// and s's counts, categories, watches and held images are its tree's.
func checkFirstSnapshot(t *testing.T, what string, s *snapshotter, snap *snapshot, head string) {
	t.Helper()
	before, err := s.load(head)
	if err != nil {
		t.Fatal(err)
	}
	tree := entriesNow(t, s)
	var want []string
	for _, p := range slices.Sorted(maps.Keys(before.entries)) {
		e, f := before.entries[p], tree[p]
		if _, ok := tree[p]; !ok || !e.sameStat(f) || e.sum != f.sum || e.skip != f.skip || e.racy != f.racy {
			want = append(want, p)
		}
	}
	for p := range tree {
		if _, ok := before.entries[p]; !ok {
			want = append(want, p)
		}
	}
	slices.Sort(want)
	var got []string
	for _, c := range snap.delta {
		got = append(got, c.path)
		if e, ok := before.entries[c.path]; c.hadOld != ok || ok && e != c.old {
			t.Errorf("%s: the change of %s has before %v %+v, the head %v %+v", what, c.path, c.hadOld, c.old, ok, e)
		}
		if e, ok := tree[c.path]; c.has != ok || ok && e != c.new {
			t.Errorf("%s: the change of %s has after %v %+v, the tree %v %+v", what, c.path, c.has, c.new, ok, e)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: the first snapshot changed\n%v\nthe head and the tree differ in\n%v", what, got, want)
	}
	back, err := s.load(snap.manifest)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(back.entries, tree) {
		t.Errorf("%s: the manifest reads back as %d entries, the tree has %d", what, len(back.entries), len(tree))
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.beginCall()() // images are held while a call runs
	var kept int64
	var large, over []string
	s.tree.each(".", func(rel string, n *node) {
		if n.kind == nodeFile && n.e.skip == skipBudget {
			over = append(over, rel)
		}
		if n.kind == nodeFile && n.e.skip != skipLarge {
			kept += n.e.size
		}
		if n.kind == nodeFile && n.e.skip == skipLarge {
			large = append(large, rel)
		}
		if n.kind == nodeFile && n.e.sum != "" && !s.holds(n.e.sum) {
			t.Errorf("%s: %s's image is not held", what, rel)
		}
		if n.wd >= 0 && s.feed != nil {
			found := false
			for m := s.wds[n.wd]; m != nil && !found; m = m.sameWD {
				found = m == n
			}
			if !found {
				t.Errorf("%s: %s's watch %d does not name it", what, rel, n.wd)
			}
		}
	})
	slices.Sort(large)
	slices.Sort(over)
	if !slices.Equal(snap.overBudget, over) {
		t.Errorf("%s: files past the budget %v, the tree's %v", what, snap.overBudget, over)
	}
	if s.entries != len(tree) || s.kept != kept {
		t.Errorf("%s: counted %d entries and %d bytes kept; the tree has %d and %d", what, s.entries, s.kept, len(tree), kept)
	}
	if !slices.Equal(snap.skipped, large) {
		t.Errorf("%s: files over the limit %v, the tree's %v", what, snap.skipped, large)
	}
}

// TestStrArena: a string the arena made keeps its bytes while later
// ones are made (in the same chunk, past its end, and ones too large to
// share a chunk) and while the bytes it was made of are reused.
func TestStrArena(t *testing.T) {
	var a strArena
	var got, want []string
	buf := make([]byte, 0, arenaChunk)
	for i := range 5000 {
		buf = fmt.Appendf(buf[:0], "name-%d-%s", i, strings.Repeat("x", i%40))
		if i%997 == 0 {
			buf = append(buf, strings.Repeat("y", arenaChunk/2)...)
		}
		got = append(got, a.str(buf))
		want = append(want, string(buf))
		clear(buf) // the caller's bytes are reused
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("string %d: %.40q, want %.40q", i, got[i], want[i])
		}
	}
	if a.str(nil) != "" {
		t.Error("empty bytes: not the empty string")
	}
}

// TestSnapshotHeadCRC: the snapshot head names the CRC-32C of each
// manifest of its chain; a new process checks the head against them (a
// CRC-32C that does not match makes it read every file again, as a
// damaged head does) and reads a head without them (an older octet's)
// checking the manifests against their names, then records them.
func TestSnapshotHeadCRC(t *testing.T) {
	s, ws := newTestSnapshotter(t, false)
	for i := range 10 {
		put(t, filepath.Join(ws, fmt.Sprintf("d%d/f%d", i%3, i)), fmt.Sprintf("file %d\n", i))
	}
	time.Sleep(3 * s.racy)
	take(t, s)
	put(t, filepath.Join(ws, "d0/f0"), "changed\n")
	time.Sleep(3 * s.racy)
	take(t, s) // a delta on the whole manifest
	s.close()
	h, ok := s.store.SnapshotHead()
	if !ok || len(h.CRC) != 2 {
		t.Fatalf("head %+v: want the CRC-32C of a whole manifest and a delta", h)
	}
	for sum, crc := range h.CRC {
		data, err := s.store.Get(sum)
		if err != nil || crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)) != crc {
			t.Errorf("manifest %s: CRC-32C %08x, want that of its bytes (%v)", sum, crc, err)
		}
	}
	hashedBy := func(h changes.SnapshotHead) int {
		t.Helper()
		if err := s.store.SetSnapshotHead(h); err != nil {
			t.Fatal(err)
		}
		next := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: s.store}})
		next.racy = s.racy
		defer next.close()
		return take(t, next).hashed
	}
	if n := hashedBy(h); n != 0 {
		t.Errorf("from the head: %d files read, want none", n)
	}
	wrong := maps.Clone(h.CRC)
	for sum := range wrong {
		wrong[sum]++
		break
	}
	if n := hashedBy(changes.SnapshotHead{Manifest: h.Manifest, CRC: wrong}); n != 10 {
		t.Errorf("from a head whose CRC-32C does not match: %d files read, want all 10", n)
	}
	if n := hashedBy(changes.SnapshotHead{Manifest: h.Manifest}); n != 0 {
		t.Errorf("from a head without CRC-32C: %d files read, want none", n)
	}
	if again, _ := s.store.SnapshotHead(); again.Manifest != h.Manifest || !maps.Equal(again.CRC, h.CRC) {
		t.Errorf("a head without CRC-32C read: now %+v, want it recorded with them (%v)", again, h.CRC)
	}
}

// TestHeadBuilderChunks: the runs a head is read into share chunks —
// directories small and large (past a chunk, and past half of one),
// lines of a directory coming back after others (the root's, between
// its subdirectories'; a delta's, removals among them) — and each
// directory's entries read back as its lines say: the last line of each
// name, the removed left out, sorted.
func TestHeadBuilderChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	b := headBuilder{runs: map[string]*headRun{}}
	want := map[string]map[string]snapEntry{}
	line := func(dir, name string, size int64, del bool) {
		p := name
		if dir != "." {
			p = dir + "/" + name
		}
		m := &manifestLine{S: size, H: fmt.Sprintf("%064x", size), Del: del, D: dir == "."}
		b.add([]byte(p), m)
		if want[dir] == nil {
			want[dir] = map[string]snapEntry{}
		}
		if del {
			delete(want[dir], name)
		} else {
			want[dir][name] = m.entry()
		}
	}
	dirs := []string{"."}
	for d := range 60 {
		dir := fmt.Sprintf("d%02d", d)
		dirs = append(dirs, dir)
		line(".", dir, 0, false) // a whole manifest's order: the root's lines come back after each directory's
		n := rng.IntN(40)
		switch d {
		case 7:
			n = headChunkMax + 100 // past a chunk
		case 21:
			n = headChunkMax / 2 // half a chunk: grows by itself
		case 30:
			n = headChunkMin - 1 // fills the first chunk but one
		}
		for i := range n {
			line(dir, fmt.Sprintf("f%05d", i), int64(d*100000+i), false)
		}
	}
	for range 300 { // a delta's lines: any directory, out of order
		dir := dirs[1+rng.IntN(len(dirs)-1)]
		line(dir, fmt.Sprintf("f%05d", rng.IntN(50)), rng.Int64N(1000), rng.IntN(3) == 0)
	}
	h := b.index()
	for _, dir := range dirs {
		got := h.dirs[dir]
		if !slices.IsSortedFunc(got, func(x, y headEntry) int { return strings.Compare(x.name, y.name) }) {
			t.Fatalf("%s: entries not sorted", dir)
		}
		if len(got) != len(want[dir]) {
			t.Fatalf("%s: %d entries read back, want %d", dir, len(got), len(want[dir]))
		}
		for _, he := range got {
			if w, ok := want[dir][he.name]; !ok || w != he.e {
				t.Fatalf("%s/%s read back as %+v, want %+v (there: %v)", dir, he.name, he.e, w, ok)
			}
		}
	}
}
