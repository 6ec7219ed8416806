package tools

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/internal/fsroot"
)

// This file is the bash tool's workspace checkpoint: a snapshot of the
// workspace's files before and after each command that was not admitted
// as a read, whose difference is the call's changes (the same records edit
// and write produce, so a rewind takes a command back like an edit).
//
// A snapshotter keeps a tree of the workspace's checkpointed entries —
// regular files and directories, not .git nor what .gitignore files
// ignore (search's matcher), symbolic links and special files counted,
// not followed — each file with its stat fields and the hash of its
// content, which the change store keeps. A snapshot brings the tree up to
// date and records what changed since the previous one:
//
//   - With a change feed (inotify, Linux), only the names the feed
//     reports are examined again; a snapshot of an unchanged workspace
//     reads no directory. The feed watches every checkpointed directory
//     and file (a file once the marker has reached it after a walk:
//     snapshot_mark.go), so a file written through a hard link outside
//     the workspace is reported too. Whenever the feed cannot vouch for the
//     tree — its queue overflowed, a watch could not be added (the
//     per-user limit), the mount table changed, a directory is on a file
//     system whose changes the kernel may not report, the tree is over
//     its entry bound, the command's supervision was lost — the
//     snapshot walks the whole workspace instead. The feed can cause an
//     extra walk, never a missed change.
//   - Without one, the snapshot walks the workspace, lstat-ing every
//     entry.
//
// Either way a file whose size, mtime, ctime, inode and mode are those
// the tree has keeps its hash; any other file is read (no-follow, through
// fsroot), hashed and kept in the change store, synced, before the
// snapshot returns, so every image a rewind needs is durable before the
// command runs. What changed is written as a delta manifest naming the
// previous one (a whole manifest once the deltas add up to its size),
// and the latest manifest is the store's snapshot head, from which the
// next process's first snapshot starts: a persisted stat cache, checked
// against the store's expiry.
//
// One snapshotter serves every bash tool of a process with the same
// workspace and change store (sharedSnapshotter): one tree, one feed.

// DefaultSnapshotMaxEntries bounds the entries (files and directories) one
// snapshot covers; past it the rest of the workspace is not checkpointed
// (and the checkpoint says so).
const DefaultSnapshotMaxEntries = 200_000

// racyWindow is how recent a file's mtime or ctime may be for its stat
// to be trusted by the next snapshot: a file changed again within the
// filesystem's timestamp granularity could keep all its stat fields, so
// a file this recent is hashed again (git's "racy" entries).
const racyWindow = 2 * time.Second

// skipKind says why a file's content is not kept.
type skipKind uint8

const (
	skipNone   skipKind = iota
	skipLarge           // over the per-file limit
	skipSecret          // holds a secret value octet keeps out of its files
	skipBudget          // past half the store's cap
)

// snapEntry is the state of one checkpointed path.
type snapEntry struct {
	dir   bool
	skip  skipKind
	racy  bool        // its stat is too recent to be trusted next time
	mode  fs.FileMode // permission bits
	size  int64
	mtime int64 // ns; 0 for a directory
	ctime int64 // ns; 0 for a directory, or where unknown
	ino   uint64
	sum   string // hex SHA-256; "" for a directory or a file not kept
}

// sameStat reports whether e and o have the same stat fields.
func (e snapEntry) sameStat(o snapEntry) bool {
	return e.dir == o.dir && e.mode == o.mode && e.size == o.size && e.mtime == o.mtime && e.ctime == o.ctime && e.ino == o.ino
}

// sameState reports whether e and o are the same state of their path.
func (e snapEntry) sameState(o snapEntry) bool {
	switch {
	case e.dir || o.dir:
		return e.dir == o.dir && e.mode == o.mode
	case e.skip != skipNone || o.skip != skipNone:
		if e.mtime == 0 || o.mtime == 0 { // read back from a manifest without stat fields
			return (e.skip != skipNone) == (o.skip != skipNone) && e.size == o.size && e.mode == o.mode
		}
		return (e.skip != skipNone) == (o.skip != skipNone) && e.sameStat(o)
	}
	return e.sum == o.sum && e.mode == o.mode
}

// image is the change-store image of e.
func (e snapEntry) image() *changes.Image {
	if e.dir {
		return &changes.Image{Dir: true, Mode: e.mode}
	}
	return &changes.Image{SHA256: e.sum, Size: e.size, Mode: e.mode, Unstored: e.skip != skipNone}
}

// pathChange is one path whose entry a snapshot changed.
type pathChange struct {
	path        string
	old, new    snapEntry
	hadOld, has bool
}

// snapshot is one snapshot a snapshotter took: what it changed since the
// previous one, and what it could not keep.
type snapshot struct {
	// by and epoch name the snapshotter (and its life: close ends one)
	// that took it; seq numbers its snapshots.
	by    *snapshotter
	epoch uint64
	seq   uint64
	taken time.Time
	// delta is what changed since the snapshotter's previous snapshot,
	// sorted by path (nil for a snapshot read back from its manifest).
	delta []pathChange
	// entries, only for a snapshot read back from its manifest (crash
	// recovery), is every entry.
	entries map[string]snapEntry
	// Paths not kept, sorted: over the per-file limit, holding a secret,
	// past half the store's cap, unreadable.
	skipped, secret, overBudget, failed []string
	special                             int  // symbolic links, FIFOs, sockets, devices
	partial                             bool // the entry bound was reached
	hashed                              int  // files read and hashed
	walked                              bool // the whole workspace was walked (no feed)
	// manifest is the name of the snapshot's manifest in the store,
	// written and synced.
	manifest     string
	manifestSize int64
}

// snapshotter takes a workspace's snapshots: see the top of this file.
type snapshotter struct {
	root       string
	store      *changes.Store
	maxEntries int
	racy       time.Duration // racyWindow
	// maxWatches, when positive, bounds the feed's watches (tests).
	maxWatches int
	// noFeed turns the change feed off (tests, benchmarks of the walk).
	noFeed bool
	// headOrder, in tests, fixes when a first walk's snapshot head is
	// read: before the walk (headFirst) or after it (headLast).
	headOrder int

	// takes holds the snapshot under way (a channel, so a call can stop
	// waiting for it); counts is its progress.
	takes   chan struct{}
	waiting atomic.Int32 // snapshots waiting for takes (the marker lets them go first)
	counts  takeCounters
	// warm is the first snapshot, taken ahead of the first call
	// (prewarm): its cancel and its end.
	warmCancel context.CancelFunc
	warmDone   chan struct{}
	warmNow    chan struct{} // closed by warmUp: prewarm waits no longer
	warmOnce   sync.Once
	began      atomic.Bool // a snapshot was asked for (prewarm has nothing to do)
	// marker adds the watches a walk leaves out (snapshot_mark.go): nil
	// when it is not running.
	marker *markerRun

	mu       sync.Mutex
	redactor *Redactor // a file holding a secret it knows is not kept
	tree     *node     // nil before the first snapshot
	entries  int       // checkpointed entries in the tree
	kept     int64     // bytes of the tree's files within the per-file limit
	cats     categories
	wds      map[int32]*node
	feed     *feed               // nil: none (unsupported, refused, or dropped)
	stale    string              // why the feed cannot vouch for the tree ("": it can)
	feedOff  string              // why there is no feed, when it was refused
	retry    time.Time           // when a refused feed may be tried again
	pending  map[string]struct{} // paths to examine, drained from the feed
	recheck  map[string]struct{} // paths the feed cannot watch: examined every time
	marks    []string            // directories whose files a walk left to the marker
	since    int                 // snapshots begun since the walk that left marks
	last     *snapshot
	lastSeen time.Time // the store's expiry time when the tree was verified
	history  []*snapshot
	chain    manifestChain
	epoch    uint64 // counts closes: snapshots of an earlier life are read back
	users    int    // bash tools sharing it (sharedSnapshotter)

	// held counts, by blob, the images the tree names and the prior
	// images its remembered deltas name. The store does not expire them
	// while a bash call runs (calls > 0): a command's prior images must
	// outlive it until its checkpoint names them. Between calls they
	// expire like any blob no checkpoint needs, and the next snapshot
	// checks the tree against the store.
	heldMu sync.Mutex
	held   map[uint64]int32 // by heldKey
	// unkeyed are images held whose keys are not yet counted in held:
	// counted when the store first asks, or a count falls (a first
	// snapshot holds every file's image, and the store seldom asks).
	unkeyed [][]string
	calls   atomic.Int32
	unhold  func()
}

// newSnapshotter returns a snapshotter of cfg's workspace, or nil when
// cfg keeps no change store (or the platform has no no-follow reads).
func newSnapshotter(cfg Config) *snapshotter {
	if cfg.Changes == nil || cfg.Changes.Store == nil || runtime.GOOS == "windows" {
		return nil
	}
	s := &snapshotter{
		root: filepath.Clean(cfg.Root), store: cfg.Changes.Store, redactor: cfg.Redactor,
		maxEntries: DefaultSnapshotMaxEntries, racy: racyWindow,
		cats: newCategories(), wds: map[int32]*node{}, pending: map[string]struct{}{}, recheck: map[string]struct{}{},
		takes: make(chan struct{}, 1), held: map[uint64]int32{},
	}
	s.unhold = s.store.Hold(s.holds)
	return s
}

// beginCall marks a bash call running until the returned function is
// called: the snapshots' images are held meanwhile.
func (s *snapshotter) beginCall() (end func()) {
	s.calls.Add(1)
	return func() { s.calls.Add(-1) }
}

// holds reports whether a call runs and the snapshots name blob sum (the
// store asks, expiring).
func (s *snapshotter) holds(sum string) bool {
	if s.calls.Load() == 0 {
		return false
	}
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	s.keyHeld()
	return s.held[heldKey(sum)] > 0
}

// heldKey is the key of blob sum in held: the first 64 bits of the hash
// (hex), or of the name's FNV-1a hash were it not one. Two blobs with one
// key are held together: one may outlive its need, never the reverse.
func heldKey(sum string) uint64 {
	var k [8]byte
	if len(sum) >= 2*len(k) {
		if _, err := hex.Decode(k[:], []byte(sum[:2*len(k)])); err == nil {
			return binary.BigEndian.Uint64(k[:])
		}
	}
	h := fnv.New64a()
	h.Write([]byte(sum))
	return h.Sum64()
}

// hold adds n to the count of each blob of sums (when n is 1, taking
// sums for keyHeld to count later).
func (s *snapshotter) hold(sums []string, n int32) {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if n == 1 {
		if len(sums) > 0 {
			s.unkeyed = append(s.unkeyed, sums)
		}
		return
	}
	s.keyHeld()
	s.countHeld(sums, n)
}

// keyHeld counts the images held not yet counted; s.heldMu is held.
func (s *snapshotter) keyHeld() {
	for _, sums := range s.unkeyed {
		s.countHeld(sums, 1)
	}
	s.unkeyed = nil
}

// countHeld adds n to the count of each blob of sums; s.heldMu is held.
func (s *snapshotter) countHeld(sums []string, n int32) {
	if n > 0 && len(sums) > 2*len(s.held) {
		// Sized once (a first snapshot holds every file), not grown.
		held := make(map[uint64]int32, len(s.held)+len(sums))
		maps.Copy(held, s.held)
		s.held = held
	}
	for _, sum := range sums {
		k := heldKey(sum)
		if s.held[k] += n; s.held[k] <= 0 {
			delete(s.held, k)
		}
	}
}

// takeOptions are a snapshot's options.
type takeOptions struct {
	// walk makes the snapshot walk the workspace whatever the feed says
	// (the command's supervision was lost: something may write unseen).
	walk bool
	// progress, when set, receives "[checkpointing …]" lines once the
	// snapshot takes longer than checkpointProgressDelay.
	progress func(string)
	// before marks a snapshot a command follows: its images are the
	// command's before-images, so once a command has run since a walk,
	// the files the walk left to the marker are marked first.
	before bool
}

// take snapshots the workspace: it brings the tree up to date, hashes
// and keeps (synced) every file whose stat changed, and writes the
// manifest (synced). An error means the snapshot is not durable; a done
// ctx stops it within about 100 ms, changing nothing.
func (s *snapshotter) take(ctx context.Context, o takeOptions) (*snapshot, error) {
	s.began.Store(true)
	prog := startCheckpointProgress(o.progress, &s.counts)
	defer prog.stop()
	s.waiting.Add(1)
	select {
	case s.takes <- struct{}{}: // one snapshot at a time (the first may be under way)
		s.waiting.Add(-1)
	case <-ctx.Done():
		s.waiting.Add(-1)
		return nil, ctx.Err()
	}
	defer func() { <-s.takes }()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.reset()
	if s.unhold == nil { // closed, and taken again
		s.unhold = s.store.Hold(s.holds)
	}
	root, err := fsroot.Open(s.root)
	if err != nil {
		return nil, fmt.Errorf("open the workspace: %w", err)
	}
	defer root.Close()
	if o.before && s.since > 0 {
		s.markSome(ctx, nil, math.MaxInt)
	}
	s.since++
	now := time.Now()
	u, err := s.update(ctx, root, now, o)
	if err != nil {
		return nil, err
	}
	defer u.close()
	s.budget(u)
	batch := s.store.Batch()
	defer batch.Release()
	if err := s.hashAll(ctx, root, batch, u); err != nil {
		return nil, err
	}
	snap := &snapshot{by: s, epoch: s.epoch, seq: s.nextSeq(), taken: now, hashed: len(u.work), walked: u.walked}
	snap.delta = s.commit(u)
	if u.walked {
		s.setMarks(u.toMark)
	}
	s.cats.fill(snap)
	snap.partial = u.partial
	if err := s.writeManifest(snap); err != nil {
		// The tree is right; only this snapshot is not durable. The next
		// one writes a whole manifest.
		s.store.Unpin(s.chain.sums)
		s.chain = manifestChain{}
		return nil, err
	}
	s.remember(snap)
	return snap, nil
}

// nextSeq returns the next snapshot's number.
func (s *snapshotter) nextSeq() uint64 {
	if s.last == nil {
		return 1
	}
	return s.last.seq + 1
}

// remember makes snap the last snapshot and keeps its delta (and the
// prior images it names) for changesBetween.
func (s *snapshotter) remember(snap *snapshot) {
	s.last = snap
	s.history = append(s.history, snap)
	total := 0
	for _, h := range s.history {
		total += len(h.delta)
	}
	for len(s.history) > 1 && (len(s.history) > historyMax || total > historyMaxChanges) {
		total -= len(s.history[0].delta)
		s.release(s.history[0])
		s.history = s.history[1:]
	}
}

// History bounds: the snapshots whose deltas a snapshotter keeps, and
// their changes together. Comparing with an older snapshot reads both
// manifests.
const (
	historyMax        = 64
	historyMaxChanges = 1 << 20
)

// release stops holding the prior images a forgotten snapshot's delta
// named.
func (s *snapshotter) release(snap *snapshot) {
	var sums []string
	for _, c := range snap.delta {
		if c.hadOld && c.old.sum != "" {
			sums = append(sums, c.old.sum)
		}
	}
	s.hold(sums, -1)
}

// prewarmDelay is how long a new snapshotter waits before it takes its
// first snapshot, unless told sooner that a model request is out
// (warmUp): the start-up work of the process that made it — the first
// model request, its environment and git summary — does not share the
// CPU with the walk (in `octet exec` at 10,000 files the request went out
// ~35 ms sooner, at 100,000 ~100 ms). A call that comes sooner takes the
// snapshot itself.
const prewarmDelay = 200 * time.Millisecond

// prewarm takes the first snapshot after prewarmDelay, or once warmUp is
// called, in the background, so the first call finds the tree and the
// feed ready (a call that comes while it runs waits for it, or stops
// waiting when cancelled), unless a call took one first.
func (s *snapshotter) prewarm() {
	ctx, cancel := context.WithCancel(context.Background())
	s.warmCancel, s.warmDone = cancel, make(chan struct{})
	s.warmNow = make(chan struct{})
	go func() {
		defer close(s.warmDone)
		t := time.NewTimer(prewarmDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.warmNow:
		case <-ctx.Done():
			return
		}
		if s.began.Load() {
			return // a call took it
		}
		if _, err := s.take(ctx, takeOptions{}); err != nil && ctx.Err() == nil {
			slog.Warn("checkpoint: the first snapshot of the workspace failed; the first bash call takes it again", "workspace", s.root, "err", err)
		}
	}()
}

// warmUp ends prewarm's delay: a model request is out, and the process
// waits for its answer with the CPU to spare. Only the first call does
// anything.
func (s *snapshotter) warmUp() {
	if s.warmNow != nil {
		s.warmOnce.Do(func() { close(s.warmNow) })
	}
}

// close releases the feed and every pin.
func (s *snapshotter) close() {
	if s.warmCancel != nil {
		s.warmCancel()
		<-s.warmDone
		s.warmCancel = nil
	}
	s.stopMarker()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks = nil
	s.dropFeed()
	s.history = nil // what it held goes with held, below
	s.store.Unpin(s.chain.sums)
	s.chain = manifestChain{}
	s.heldMu.Lock()
	clear(s.held)
	s.unkeyed = nil
	s.heldMu.Unlock()
	if s.unhold != nil {
		s.unhold()
		s.unhold = nil
	}
	s.tree, s.last = nil, nil
	s.entries, s.kept = 0, 0
	s.cats = newCategories()
	clear(s.recheck)
	clear(s.pending)
	s.epoch++
}

// addRedactor makes s also keep out files holding r's secrets. Files it
// kept before are read again when r knows a secret s did not.
func (s *snapshotter) addRedactor(r *Redactor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	merged, grew := s.redactor.union(r)
	s.redactor = merged
	if grew && s.tree != nil {
		s.tree.each(".", func(_ string, n *node) {
			if n.kind == nodeFile {
				n.e.racy = true // read again by the next walk
			}
		})
		s.loseFeed("a new secret to keep out")
	}
}

// loseFeed records that the feed cannot vouch for the tree: the next
// snapshot walks (keeping the feed's instance and its watches: adding a
// watch to a watched file finds the one it has, and an instance closed
// gives its watches back to the per-user limit only some time later).
func (s *snapshotter) loseFeed(why string) {
	if s.feed != nil && s.stale == "" {
		slog.Debug("checkpoint: walking the workspace", "workspace", s.root, "why", why)
		s.stale = why
	}
}

// dropFeed closes the feed (its watches go).
func (s *snapshotter) dropFeed() {
	if s.feed != nil {
		s.feed.close()
		s.feed, s.stale = nil, ""
		clear(s.wds)
	}
}

// update is what a snapshot changes in the tree: subtrees replaced (each
// new one read, its files to hash in work), not yet applied.
type update struct {
	repls   []repl
	work    []hashJob
	walked  bool
	partial bool
	feed    *feed // a walk's new feed; nil: none (or the current one)
	dirs    map[string]*os.File
	toMark  []string // a walk's directories holding files left to the marker
	kept    int64    // a walk's bytes of files within the per-file limit
	// head, for a walk with no tree before it (its root repl's old is
	// nil), is the snapshot head it was compared with (nil: none); pre is
	// what its workers gathered doing so (commitAcc.enter): every entry
	// but the files in work; nil once the budget or the entry bound
	// changed the tree since.
	head *headIndex
	pre  *commitAcc
}

// repl replaces the node name of parent (the root when parent is nil),
// old, by new (either may be nil).
type repl struct {
	parent   *node
	name     string
	rel      string
	old, new *node
}

// close releases the directories the update opened.
func (u *update) close() {
	for _, d := range u.dirs {
		d.Close()
	}
}

// update finds what changed: from the feed when it can vouch for the
// tree, by a walk otherwise.
func (s *snapshotter) update(ctx context.Context, root *fsroot.Root, now time.Time, o takeOptions) (*update, error) {
	verify := false
	if exp := s.store.ExpiredAt(); !exp.Equal(s.lastSeen) {
		// Blobs expired since (between calls the tree's images may go
		// too): a hash whose blob is gone is not reused.
		verify, s.lastSeen = s.tree != nil, exp
		s.loseFeed("the change store expired images")
	}
	if s.feed != nil && s.stale == "" && !o.walk && s.tree != nil {
		u, err := s.fedUpdate(ctx, root, now)
		if err == nil {
			return u, nil
		}
		if !errors.Is(err, errNeedWalk) {
			return nil, err
		}
	}
	return s.walkAll(ctx, root, now, verify)
}

// errNeedWalk is fedUpdate's answer when the feed cannot vouch for the
// tree.
var errNeedWalk = errors.New("the workspace must be walked")

// walkAll reads the whole workspace into a new tree, with a new feed
// watching it when one can be had.
func (s *snapshotter) walkAll(ctx context.Context, root *fsroot.Root, now time.Time, verify bool) (*update, error) {
	old := s.tree
	if old == nil {
		defer relaxGC()()
	}
	s.loseFeed("walking the workspace")
	u := &update{walked: true}
	w := &snapWalker{s: s, root: root, racyBefore: now.Add(-s.racy).UnixNano(), maxBlob: s.store.MaxBlobBytes(), verify: verify}
	if old == nil {
		// The store's snapshot head is read while the walk runs; each
		// directory walked once it is read is compared with it then,
		// the others once both are done.
		w.seeded = make(chan struct{})
		go func() {
			defer close(w.seeded)
			w.head, w.verify = s.seed()
		}()
	}
	fresh := false // a new instance (else the feed's own, reset)
	switch {
	case s.feed != nil:
		s.feed.reset() // what it queued so far: the walk looks at everything
		w.feed, w.reuse = s.feed, true
	case !s.noFeed && now.After(s.retry):
		f, err := newFeed(s.maxWatches)
		if err == nil {
			w.feed, fresh = f, true
		} else {
			s.feedOff, s.retry = err.Error(), now.Add(feedRetry)
		}
	}
	w.markLater = w.feed != nil
	top := newNode("", nil, nodeDir)
	if w.seeded != nil && s.headOrder == headFirst {
		<-w.seeded
	}
	err := w.walk(ctx, []snapDir{{n: top, rel: ".", old: old}})
	if w.seeded != nil {
		<-w.seeded
	}
	if err != nil {
		if fresh {
			w.feed.close()
		}
		return nil, err
	}
	if w.seeded != nil {
		u.head, u.pre = w.head, w.compareAll()
	}
	u.repls = []repl{{rel: ".", old: old, new: top}}
	u.work, u.partial, u.toMark, u.kept = w.work, w.partial, w.toMark, w.kept.Load()
	if u.partial {
		u.pre = nil // gathered before the cut
		u.work = trimTree(top, s.maxEntries, u.work)
		w.loseFeed(fmt.Sprintf("the workspace has more than %d entries", s.maxEntries))
	}
	switch {
	case w.feed == nil:
	case w.feedLost != "":
		if fresh {
			w.feed.close() // s.feed is nil: giveUpFeed drops nothing
		}
		s.giveUpFeed(w.feedLost)
	default:
		u.feed = w.feed
		s.feedOff = ""
	}
	return u, nil
}

// feedRetry is how long after a refused feed a walk tries again.
const feedRetry = time.Minute

// trimTree cuts the tree at top to its first max entries in path order
// (a walk past the entry bound) and returns work without the files cut.
func trimTree(top *node, max int, work []hashJob) []hashJob {
	var rels []string
	byRel := map[string]*node{}
	top.each(".", func(rel string, n *node) {
		if n != top && n.entry() {
			rels = append(rels, rel)
			byRel[rel] = n
		}
	})
	if len(rels) <= max {
		return work
	}
	slices.Sort(rels)
	cut := map[*node]bool{}
	for _, rel := range rels[max:] {
		n := byRel[rel]
		cut[n] = true
		delete(n.parent.kids, n.name)
	}
	return slices.DeleteFunc(work, func(j hashJob) bool {
		for n := j.n; n != nil; n = n.parent {
			if cut[n] {
				return true
			}
		}
		return false
	})
}

// budget keeps what a snapshot keeps within half the store's cap: past
// it, files (by path order) are not kept, as files over the per-file
// limit are not, and said to be (overBudget) — so a workspace larger than
// the store does not make every snapshot read and keep files that then
// expire. While the workspace is within the budget this costs nothing;
// past it, a pass over every entry.
func (s *snapshotter) budget(u *update) {
	limit := s.store.MaxBytes() / 2
	kept := s.kept
	if u.walked && !u.partial {
		kept = u.kept // the whole tree, counted by the walk
	} else {
		for _, r := range u.repls {
			kept += keptBytes(r.new) - keptBytes(r.old)
		}
	}
	if kept <= limit && len(s.cats.sets[skipBudget]) == 0 {
		return
	}
	u.pre = nil // gathered before the budget changed the files
	// Every file of the tree as it will be, by path.
	type file struct {
		rel  string
		n    *node
		live bool // in the current tree, not in a new subtree
	}
	var files []file
	replaced := map[*node]bool{}
	for _, r := range u.repls {
		if r.old != nil {
			replaced[r.old] = true
		}
		if r.new != nil {
			r.new.each(r.rel, func(rel string, n *node) {
				if n.kind == nodeFile && n.e.skip != skipLarge {
					files = append(files, file{rel: rel, n: n})
				}
			})
		}
	}
	if s.tree != nil && !replaced[s.tree] {
		var visit func(rel string, n *node)
		visit = func(rel string, n *node) {
			if replaced[n] {
				return
			}
			if n.kind == nodeFile && n.e.skip != skipLarge {
				files = append(files, file{rel: rel, n: n, live: true})
			}
			for name, k := range n.kids {
				visit(joinRel(rel, name), k)
			}
		}
		visit(".", s.tree)
	}
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.rel, b.rel) })
	queued := map[*node]bool{}
	for _, j := range u.work {
		queued[j.n] = true
	}
	var total int64
	for _, f := range files {
		total += f.n.e.size
		over := total > limit
		was := f.n.e.skip == skipBudget
		switch {
		case !f.live && over:
			f.n.e.skip, f.n.e.sum = skipBudget, ""
			queued[f.n] = false
		case !f.live && was: // within the budget again
			f.n.e.skip = skipNone
			queued[f.n] = true
			u.work = append(u.work, hashJob{rel: f.rel, n: f.n})
		case f.live && over != was:
			// A live file whose budget changed: replaced by a copy.
			c := *f.n
			c.kids, c.sameWD = nil, nil
			c.e.skip, c.e.sum = skipNone, ""
			if over {
				c.e.skip = skipBudget
			} else {
				u.work = append(u.work, hashJob{rel: f.rel, n: &c})
				queued[&c] = true
			}
			u.repls = append(u.repls, repl{parent: f.n.parent, name: f.n.name, rel: f.rel, old: f.n, new: &c})
		}
	}
	u.work = slices.DeleteFunc(u.work, func(j hashJob) bool { return !queued[j.n] })
}

// keptBytes returns the bytes of the files below n within the per-file
// limit (what the budget counts).
func keptBytes(n *node) int64 {
	if n == nil {
		return 0
	}
	var total int64
	n.each(".", func(_ string, k *node) {
		if k.kind == nodeFile && k.e.skip != skipLarge {
			total += k.e.size
		}
	})
	return total
}

// hashWorkers is how many files are read, hashed and written at once;
// they are made durable together at the end (one syncfs on Linux).
const hashWorkers = 4

// hashAll reads, hashes and keeps the files of u.work. A file that
// vanished or became something else meanwhile is left out of the tree
// (the command has not run yet, or has ended).
func (s *snapshotter) hashAll(ctx context.Context, root *fsroot.Root, batch *changes.Batch, u *update) error {
	type done struct {
		job     hashJob
		sum     string
		stored  bool
		missing bool // vanished since the walk
		failed  bool // could not be read (permissions)
		secret  bool
		err     error
	}
	s.counts.toHash.Store(int64(len(u.work)))
	jobs := make(chan hashJob)
	results := make(chan done)
	var wg sync.WaitGroup
	for range min(hashWorkers, max(len(u.work), 1)) {
		wg.Go(func() {
			for job := range jobs {
				if ctx.Err() != nil {
					results <- done{job: job, err: ctx.Err()}
					continue
				}
				data, _, err := root.ReadFile(job.rel, s.store.MaxBlobBytes())
				if err != nil {
					var tl *fsroot.TooLargeError
					switch {
					case errors.As(err, &tl):
						results <- done{job: job} // grew past the limit
					case fsroot.IsNotExist(err):
						results <- done{job: job, missing: true}
					default:
						results <- done{job: job, failed: true}
					}
					continue
				}
				if s.redactor.Contains(data) {
					results <- done{job: job, secret: true}
					continue
				}
				sum, stored, err := batch.Put(data)
				results <- done{job: job, sum: sum, stored: stored, err: err}
			}
		})
	}
	go func() {
		defer close(jobs)
		for _, job := range u.work {
			select {
			case jobs <- job:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()
	var errs []error
	for d := range results {
		s.counts.hashed.Add(1)
		n := d.job.n
		switch {
		case d.err != nil:
			if !errors.Is(d.err, ctx.Err()) {
				errs = append(errs, fmt.Errorf("keep %s: %w", d.job.rel, d.err))
			}
		case d.missing && n.parent.kids[n.name] == n: // in a new subtree
			delete(n.parent.kids, n.name)
		case d.missing: // a file replacing a live node
			n.kind = nodeMissing
		case d.failed:
			n.kind = nodeFailed
		case d.secret: // never copied into $OCTET_HOME
			n.e.skip = skipSecret
		case !d.stored: // grew past the limit since the walk
			n.e.skip = skipLarge
		default:
			n.e.sum = d.sum
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The images are durable before the snapshot naming them is.
	if err := batch.Sync(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// categories are the paths of the tree that are not kept, by reason,
// and the special files; fill gives a snapshot sorted lists of them,
// sharing the previous snapshot's where nothing changed.
type categories struct {
	sets    map[skipKind]map[string]struct{} // skipLarge, skipSecret, skipBudget
	failed  map[string]struct{}
	special int
	lists   [4][]string // by skipKind; lists[0] is failed
	dirty   [4]bool
}

func newCategories() categories {
	return categories{
		sets:   map[skipKind]map[string]struct{}{skipLarge: {}, skipSecret: {}, skipBudget: {}},
		failed: map[string]struct{}{},
		dirty:  [4]bool{true, true, true, true},
	}
}

// move moves path rel from node o's category to node n's (nil: none).
func (c *categories) move(rel string, o, n *node) {
	for i, k := range []*node{o, n} {
		if k == nil || k.parent == nil {
			continue
		}
		set, idx := c.setOf(k)
		switch {
		case k.kind == nodeSpecial && i == 0:
			c.special--
		case k.kind == nodeSpecial:
			c.special++
		case set != nil:
			if i == 0 {
				delete(set, rel)
			} else {
				set[rel] = struct{}{}
			}
			c.dirty[idx] = true
		}
	}
}

// setOf returns the set node n's path belongs to, and its index.
func (c *categories) setOf(n *node) (map[string]struct{}, int) {
	switch {
	case n.kind == nodeFailed:
		return c.failed, 0
	case n.kind == nodeFile && n.e.skip != skipNone:
		return c.sets[n.e.skip], int(n.e.skip)
	}
	return nil, 0
}

// fill sets snap's lists.
func (c *categories) fill(snap *snapshot) {
	for i := range c.lists {
		if !c.dirty[i] {
			continue
		}
		set := c.failed
		if i > 0 {
			set = c.sets[skipKind(i)]
		}
		list := make([]string, 0, len(set))
		for p := range set {
			list = append(list, p)
		}
		slices.Sort(list)
		c.lists[i], c.dirty[i] = list, false
	}
	snap.failed, snap.skipped, snap.secret, snap.overBudget = c.lists[0], c.lists[skipLarge], c.lists[skipSecret], c.lists[skipBudget]
	snap.special = c.special
}

// changesBetween returns the records of what changed from pre to post,
// sorted by path, described by rec. A path only in pre is not a deletion
// when it is still a regular file (unreadable now) or is ignored by the
// .gitignore rules post has (the command wrote a rule); a path only in
// post is not a creation when the rules pre had ignored it (the command
// removed a rule). Everything else is a change: a directory renamed
// moves its files, whatever their times.
func (s *snapshotter) changesBetween(rec *changes.Recorder, pre, post *snapshot) []changes.Record {
	spans, err := s.between(pre, post)
	if err != nil {
		return []changes.Record{{Change: changes.Change{Path: ".", Kind: changes.Modify, DiffOmitted: true,
			Diff: "the workspace's changes could not be compared: " + err.Error()}}}
	}
	rules := s.rulesBetween(pre, post, spans)
	var out []changes.Record
	for _, c := range spans {
		a, b := c.old, c.new
		switch {
		case c.hadOld && c.has && a.sameState(b):
			continue
		case !c.hadOld && !c.has:
			continue
		case c.hadOld && !c.has:
			if st, err := os.Lstat(filepath.Join(s.root, filepath.FromSlash(c.path))); err == nil &&
				(st.Mode().IsRegular() || rules.ignored(c.path, st.IsDir(), false)) {
				continue
			}
		case !c.hadOld && c.has:
			if rules.ignored(c.path, b.dir, true) {
				continue
			}
		}
		var before, after *changes.Image
		var old, updated []byte
		if c.hadOld {
			before = a.image()
			old = s.content(a)
		}
		if c.has {
			after = b.image()
			updated = s.content(b)
		}
		out = append(out, rec.Describe(c.path, before, after, old, updated))
	}
	return out
}

// checkpointChanges returns changesBetween's records of pre and post and
// what a rewind of them cannot undo (cannotUndo's statements). A path
// that is not valid UTF-8 is left out of the records and named among
// those statements: changes reach the session file and the wire as JSON,
// where such a path becomes another one (U+FFFD) that a rewind would
// create while leaving the real one as it is.
func (s *snapshotter) checkpointChanges(rec *changes.Recorder, pre, post *snapshot) ([]changes.Record, []string) {
	all := s.changesBetween(rec, pre, post)
	undo := s.cannotUndo(pre, post)
	out := all[:0:0]
	var unnamed []string
	for _, r := range all {
		if utf8.ValidString(r.Path) {
			out = append(out, r)
		} else {
			unnamed = append(unnamed, strconv.Quote(r.Path))
		}
	}
	if l := pathList(unnamed, nil); l != "" {
		undo = append(undo, "change(s) of path(s) whose name is not valid UTF-8 (JSON, in which changes are recorded, cannot name them), not recorded: "+l)
	}
	return out, undo
}

// ruleFiles gives the content of the workspace's .gitignore files as pre
// and as post had them.
type ruleFiles struct {
	s       *snapshotter
	changed map[string]pathChange // the .gitignore files that changed
	post    func(rel string) (snapEntry, bool)
}

// rulesBetween returns the .gitignore files of pre and post.
func (s *snapshotter) rulesBetween(pre, post *snapshot, spans []pathChange) *ruleFiles {
	r := &ruleFiles{s: s, changed: map[string]pathChange{}}
	for _, c := range spans {
		if path.Base(c.path) == ".gitignore" {
			r.changed[c.path] = c
		}
	}
	var postEntries map[string]snapEntry
	r.post = func(rel string) (snapEntry, bool) {
		if postEntries == nil {
			s.mu.Lock()
			postEntries, _ = s.entriesOf(post)
			s.mu.Unlock()
			if postEntries == nil {
				postEntries = map[string]snapEntry{}
			}
		}
		e, ok := postEntries[rel]
		return e, ok
	}
	if post == s.lastSnapshot() {
		r.post = s.treeEntry
	}
	return r
}

// lastSnapshot returns the last snapshot taken.
func (s *snapshotter) lastSnapshot() *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// treeEntry returns the tree's entry of rel.
func (s *snapshotter) treeEntry(rel string) (snapEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := lookup(s.tree, rel)
	if n == nil || !n.entry() {
		return snapEntry{}, false
	}
	return n.e, true
}

// content returns the .gitignore rel as pre (atPre) or post had it.
func (r *ruleFiles) content(rel string, atPre bool) []byte {
	c, changed := r.changed[rel]
	switch {
	case changed && atPre && !c.hadOld, changed && !atPre && !c.has:
		return nil
	case changed && atPre:
		return r.s.content(c.old)
	case changed:
		return r.s.content(c.new)
	}
	e, ok := r.post(rel) // unchanged: as pre had it
	if !ok {
		return nil
	}
	return r.s.content(e)
}

// rules returns the .gitignore rel as pre (atPre) or post had it, within
// the bound a walk reads.
func (r *ruleFiles) rules(rel string, atPre bool) []byte {
	if data := r.content(rel, atPre); len(data) <= maxIgnoreFileBytes {
		return data
	}
	return nil
}

// ignored reports whether the .gitignore rules pre (atPre) or post had
// ignored path rel, as a walk would have: rel or a directory above it
// matched, with the rules of every directory from the root down.
func (r *ruleFiles) ignored(rel string, isDir, atPre bool) bool {
	parts := strings.Split(rel, "/")
	affected := false
	for g := range r.changed {
		if d := path.Dir(g); d == "." || strings.HasPrefix(rel, d+"/") {
			affected = true
		}
	}
	if !affected && atPre {
		return false // its rules did not change, and post has it
	}
	var d *ignoreDir
	for i := range parts {
		if data := r.rules(path.Join(path.Join(parts[:i]...), ".gitignore"), atPre); data != nil {
			d = d.with(data, parts[:i])
		}
		if i == len(parts)-1 {
			break
		}
		if d.Match(parts[:i+1], true) {
			return true
		}
		d = d.child(parts[:i+1], parts[i])
	}
	return d.Match(parts, isDir)
}

// between returns, by path, each path's entry in pre and in post that
// differs: folded from the deltas of the snapshots between them when
// they are remembered, otherwise compared in full (read back from the
// manifests as needed).
func (s *snapshotter) between(pre, post *snapshot) ([]pathChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pre.entries == nil && post.entries == nil && pre.seq <= post.seq && s.ours(pre) && s.ours(post) {
		if spans, ok := s.fold(pre.seq, post.seq); ok {
			return spans, nil
		}
	}
	a, err := s.entriesOf(pre)
	if err != nil {
		return nil, err
	}
	b, err := s.entriesOf(post)
	if err != nil {
		return nil, err
	}
	var out []pathChange
	for p, e := range a {
		f, ok := b[p]
		if !ok || !e.sameState(f) {
			out = append(out, pathChange{path: p, old: e, hadOld: true, new: f, has: ok})
		}
	}
	for p, f := range b {
		if _, ok := a[p]; !ok {
			out = append(out, pathChange{path: p, new: f, has: true})
		}
	}
	slices.SortFunc(out, func(x, y pathChange) int { return strings.Compare(x.path, y.path) })
	return out, nil
}

// ours reports whether snap was taken by s in its current life.
func (s *snapshotter) ours(snap *snapshot) bool { return snap.by == s && snap.epoch == s.epoch }

// fold folds the remembered deltas of the snapshots after seq from up to
// seq to: each path's entry before the first and after the last.
func (s *snapshotter) fold(from, to uint64) ([]pathChange, bool) {
	if from == to {
		return nil, true
	}
	i := slices.IndexFunc(s.history, func(h *snapshot) bool { return h.seq == from+1 })
	if i < 0 || s.history[len(s.history)-1].seq < to {
		return nil, false
	}
	byPath := map[string]*pathChange{}
	var paths []string
	for _, h := range s.history[i:] {
		if h.seq > to {
			break
		}
		for _, c := range h.delta {
			if f := byPath[c.path]; f != nil {
				f.new, f.has = c.new, c.has
				continue
			}
			c := c
			byPath[c.path] = &c
			paths = append(paths, c.path)
		}
	}
	slices.Sort(paths)
	out := make([]pathChange, 0, len(paths))
	for _, p := range paths {
		out = append(out, *byPath[p])
	}
	return out, true
}

// entriesOf returns every entry of snap: its own, the tree's when it is
// the last snapshot, or read back from its manifest.
func (s *snapshotter) entriesOf(snap *snapshot) (map[string]snapEntry, error) {
	switch {
	case snap.entries != nil:
		return snap.entries, nil
	case snap == s.last && s.tree != nil && s.ours(snap):
		out := make(map[string]snapEntry, s.entries)
		s.tree.each(".", func(rel string, n *node) {
			if n.entry() && n.parent != nil {
				out[rel] = n.e
			}
		})
		return out, nil
	}
	loaded, err := s.load(snap.manifest)
	if err != nil {
		return nil, err
	}
	return loaded.entries, nil
}

// content returns the kept bytes of e (nil for a directory or a file not
// kept).
func (s *snapshotter) content(e snapEntry) []byte {
	if e.dir || e.skip != skipNone || e.sum == "" {
		return nil
	}
	data, err := s.store.Get(e.sum)
	if err != nil {
		return nil
	}
	return data
}

// pathList names the paths of a and b (at most 10 of them) with their
// count; "" when there are none.
func pathList(a, b []string) string {
	all := append(slices.Clone(a), b...)
	slices.Sort(all)
	all = slices.Compact(all)
	if len(all) == 0 {
		return ""
	}
	shown := all[:min(len(all), 10)]
	more := ""
	if len(all) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(all)-len(shown))
	}
	return fmt.Sprintf("%d: %s%s", len(all), strings.Join(shown, ", "), more)
}

// cannotUndo states what a rewind of a command checkpointed by pre and
// post cannot take back.
func (s *snapshotter) cannotUndo(pre, post *snapshot) []string {
	out := []string{"effects outside the workspace's files: network requests, processes the command started or signalled, files outside the workspace, .git, and files .gitignore ignores"}
	if l := pathList(pre.skipped, post.skipped); l != "" {
		out = append(out, fmt.Sprintf("file(s) over the %d-byte snapshot limit, not kept: %s", s.store.MaxBlobBytes(), l))
	}
	if l := pathList(pre.secret, post.secret); l != "" {
		out = append(out, "file(s) holding a secret octet keeps out of its own files (the API key), not kept: "+l)
	}
	if l := pathList(pre.overBudget, post.overBudget); l != "" {
		out = append(out, fmt.Sprintf("file(s) past the %d bytes a snapshot keeps (half the change store's cap), not kept: %s", s.store.MaxBytes()/2, l))
	}
	if l := pathList(pre.failed, post.failed); l != "" {
		out = append(out, "file(s) octet could not read, not kept: "+l)
	}
	if n := max(pre.special, post.special); n > 0 {
		out = append(out, fmt.Sprintf("%d symbolic link(s) or special file(s), not followed or kept", n))
	}
	if pre.partial || post.partial {
		out = append(out, fmt.Sprintf("the workspace has more than %d entries: those past the bound (in path order) were not checkpointed", s.maxEntries))
	}
	return out
}

// CrashRecoverer is implemented by tools whose intent is a snapshot
// (bash): crash recovery asks them what changed since it.
type CrashRecoverer interface {
	// RecoverChanges returns what changed in the workspace since the
	// snapshot in.Snapshot names, and what a rewind of it cannot undo.
	RecoverChanges(in changes.Intent) ([]changes.Record, []string, error)
}

var _ CrashRecoverer = (*BashTool)(nil)

// RecoverChanges implements CrashRecoverer: the changes between the
// snapshot a command killed with octet took before it and the workspace
// now (which may include what the user did since).
func (t *BashTool) RecoverChanges(in changes.Intent) ([]changes.Record, []string, error) {
	if t.snaps == nil || in.Snapshot == "" {
		return nil, nil, nil
	}
	defer t.snaps.beginCall()()
	pre, err := t.snaps.load(in.Snapshot)
	if err != nil {
		return nil, nil, err
	}
	post, err := t.snaps.take(context.Background(), takeOptions{walk: true})
	if err != nil {
		return nil, nil, err
	}
	recs, undo := t.snaps.checkpointChanges(t.cfg.Changes, pre, post)
	undo = append([]string{"the command was killed with octet: what it did is known only from the workspace's files, which may also hold later changes"}, undo...)
	return recs, undo, nil
}
