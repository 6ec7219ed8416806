package tools

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/octet-agent/octet/internal/fsroot"
)

// This file is the snapshotter's tree: the workspace's checkpointed
// entries as the last snapshot found them, with the change feed's watch
// on each, and the walk that reads a directory tree into a new one.

// nodeKind is what a tree node is.
type nodeKind uint8

const (
	nodeFile    nodeKind = iota // a regular file (its entry checkpointed)
	nodeDir                     // a directory (its entry checkpointed, its entries read)
	nodeSpecial                 // a symbolic link, FIFO, socket or device: counted, not followed or kept
	nodeFailed                  // a regular file that could not be read: named, not kept
	nodeMissing                 // a file that vanished before it could be read (never in the tree)
)

// node is one name of the tree.
type node struct {
	name   string
	parent *node
	kind   nodeKind
	e      snapEntry
	// unwatched marks a file or directory the feed could not watch (no
	// permission): it is examined again on every snapshot.
	unwatched bool
	kids      map[string]*node // a directory's entries
	inh       *ignoreDir       // a directory: the rules it inherits
	ign       *ignoreDir       // a directory: the rules for its entries (inh and its .gitignore)
	wd        int32            // the feed's watch; -1 for none
	sameWD    *node            // the next node of the same watch (a hard link, a bind mount)
}

func newNode(name string, parent *node, kind nodeKind) *node {
	return &node{name: name, parent: parent, kind: kind, wd: -1}
}

// rel returns n's slash-separated workspace path ("." for the root).
func (n *node) rel() string {
	if n.parent == nil {
		return "."
	}
	var parts []string
	for m := n; m.parent != nil; m = m.parent {
		parts = append(parts, m.name)
	}
	slices.Reverse(parts)
	return strings.Join(parts, "/")
}

// parts returns n's path components (none for the root).
func (n *node) parts() []string {
	if n.parent == nil {
		return nil
	}
	return strings.Split(n.rel(), "/")
}

// entry reports whether n is checkpointed (a file or directory).
func (n *node) entry() bool { return n.kind == nodeFile || n.kind == nodeDir }

// joinRel returns the path of name in the directory rel.
func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// each calls fn with n and every node below it, each with its path
// (parents before their entries).
func (n *node) each(rel string, fn func(rel string, n *node)) {
	fn(rel, n)
	for name, k := range n.kids {
		k.each(joinRel(rel, name), fn)
	}
}

// lookup returns the node at rel below root (nil when there is none).
func lookup(root *node, rel string) *node {
	n := root
	if rel == "." {
		return n
	}
	for name := range strings.SplitSeq(rel, "/") {
		if n == nil || n.kind != nodeDir {
			return nil
		}
		n = n.kids[name]
	}
	return n
}

// hashJob is a file of a new subtree whose content must be read.
type hashJob struct {
	rel string
	n   *node
}

// snapWalker reads directory trees into new nodes, comparing each file's
// stat with the node of the same path in the old tree (a first walk's,
// with the snapshot head's entry): a file whose stat is the same (and
// was not racy) keeps its hash; every other file is a hashJob. With a feed, every directory is watched before it is read and
// every file before it is stat'ed, so a change after that is an event.
type snapWalker struct {
	s          *snapshotter
	root       *fsroot.Root
	feed       *feed // nil: none
	racyBefore int64
	maxBlob    int64
	verify     bool // a reused hash must name a blob the store still holds
	// seeded, for a walk with no tree before it, is closed once head
	// (the snapshot head's entries, nil for none) and verify are set: each
	// directory walked after that is compared with head at once
	// (compareDir), the others by compareAll.
	seeded chan struct{}
	head   *headIndex

	// markLater leaves a file with one link to the marker (its
	// directory's watch sees every change made through the workspace);
	// reuse lets a file keep the watch its old node had, when the stat
	// says it is the same file (a walk with the feed it had).
	markLater, reuse bool

	mu       sync.Mutex
	work     []hashJob
	entries  int          // entries read so far (files and directories)
	feedLost string       // why the feed cannot vouch for what was read
	partial  bool         // the entry bound was reached
	toMark   []string     // directories holding files left to the marker
	kept     atomic.Int64 // bytes of the files compared within the per-file limit
	unseeded []snapDir    // directories walked before the head was read
	// accs is what each worker gathered comparing with the head.
	accs [walkWorkers]commitAcc
}

// snapDir is a directory waiting to be read: n (new, its entry already
// set), its path and components, and the node of its path in the old
// tree (nil: none).
type snapDir struct {
	n     *node
	rel   string
	parts []string
	old   *node
}

// When a first walk reads the snapshot head (snapshotter.headOrder, in
// tests): while it walks, before or after.
const (
	headAnyTime = iota
	headFirst
	headLast
)

// walkWorkers is how many directories a walk reads at once.
const walkWorkers = 4

// walk reads the directories dirs and everything below them, on
// walkWorkers goroutines, until ctx is done (its error is returned; the
// nodes read so far are then of no use).
func (w *snapWalker) walk(ctx context.Context, dirs []snapDir) error {
	jobs := make(chan snapDir)
	results := make(chan []snapDir)
	var wg sync.WaitGroup
	if len(dirs) == 0 {
		return ctx.Err()
	}
	for i := range walkWorkers {
		wg.Go(func() {
			var t *watchThread
			switch {
			case w.feed != nil && !w.markLater:
				// A thread of its own for the watch per file (not for the
				// few a walk that leaves files to the marker adds: a
				// locked thread's handoffs cost more than they save).
				t = newWatchThread(i)
			case w.feed != nil:
				t = instanceThread(i)
			}
			var l dirLister
			for job := range jobs {
				results <- w.readDir(ctx, job, t, &l, &w.accs[i])
			}
		})
	}
	defer func() { close(jobs); wg.Wait() }()
	pending := slices.Clone(dirs)
	inFlight := 0
	for len(pending) > 0 || inFlight > 0 {
		var send chan snapDir
		var next snapDir
		if len(pending) > 0 {
			send, next = jobs, pending[len(pending)-1]
		}
		select {
		case send <- next:
			pending = pending[:len(pending)-1]
			inFlight++
		case subdirs := <-results:
			inFlight--
			pending = append(pending, subdirs...)
		case <-ctx.Done():
			// Let the workers finish the directory they hold.
			go func() {
				for ; inFlight > 0; inFlight-- {
					<-results
				}
			}()
			return ctx.Err()
		}
	}
	return ctx.Err()
}

// readDir reads one directory into job.n, compares it with the snapshot
// head's when the walk has one to compare with (gathering in a), and
// returns its subdirectories.
func (w *snapWalker) readDir(ctx context.Context, job snapDir, t *watchThread, l *dirLister, a *commitAcc) []snapDir {
	subdirs := w.listDir(ctx, job, t, l)
	if w.seeded == nil || ctx.Err() != nil {
		return subdirs
	}
	if w.headRead() {
		w.compareDir(job, a)
	} else {
		w.mu.Lock()
		w.unseeded = append(w.unseeded, job)
		w.mu.Unlock()
	}
	return subdirs
}

// headRead reports whether the snapshot head is read (w.head and
// w.verify are set).
func (w *snapWalker) headRead() bool {
	select {
	case <-w.seeded:
		return w.s.headOrder != headLast
	default:
		return false
	}
}

// dirEnt is an entry a directory listing gave: its name and type bits.
type dirEnt struct {
	name string
	typ  fs.FileMode
}

// listDir reads one directory into job.n (listing it with l) and returns
// its subdirectories.
// A directory that cannot be opened (gone, not a directory any more, no
// permission) is left empty and, when it exists, examined again next
// time.
func (w *snapWalker) listDir(ctx context.Context, job snapDir, t *watchThread, l *dirLister) []snapDir {
	n := job.n
	n.kids = map[string]*node{}
	if ctx.Err() != nil {
		return nil
	}
	dir, err := w.root.OpenDir(job.rel)
	if err != nil {
		if !fsroot.IsNotExist(err) {
			n.unwatched = true
		}
		return nil
	}
	defer dir.Close()
	dirfd := int(dir.Fd())
	t.enter(dirfd)
	defer t.leave()
	// The directory's entry is the directory opened (it may have been
	// replaced since its parent listed it).
	if st, ok := fstatEntry(dir); ok {
		n.e = st
	}
	if w.feed != nil {
		if wd, err := w.feed.watchDir(t, dirfd); err == nil {
			n.wd = wd
		} else {
			w.noteWatchError(n, err)
		}
		if ok, fsName := feedFilesystem(dirfd); !ok {
			w.loseFeed("the workspace has a directory (" + job.rel + ") on a file system whose changes the kernel may not report (" + fsName + ")")
		}
	}
	n.ign = n.inh
	// Unlike a listing's, a symbolic link named .gitignore is not read.
	if data, err := readNoFollow(dir, ".gitignore", maxIgnoreFileBytes); err == nil {
		n.ign = n.inh.with(data, job.parts)
	}
	var subdirs []snapDir
	read, toMark := 0, false
	scratch := append(slices.Clip(job.parts), "") // an entry's path, for Match
	// In chunks: a directory of millions of names is read only up to the
	// entry bound.
	for !w.over() {
		ents, err := l.next(dir)
		if ctx.Err() != nil {
			return nil
		}
		if len(n.kids) == 0 {
			// Sized for the first chunk (most directories' whole
			// listing): growing a map entry by entry rehashes it at
			// each doubling.
			n.kids = make(map[string]*node, len(ents))
		}
		kept := w.keep(n, ents, scratch)
		nodes := make([]node, len(kept)) // one allocation, not one a node
		for i, e := range kept {
			name, isDir := e.name, e.typ.IsDir()
			var old *node
			if job.old != nil && job.old.kind == nodeDir {
				old = job.old.kids[name]
			}
			k := w.entry(dir, t, n, name, isDir, old, &nodes[i])
			if k == nil {
				continue
			}
			n.kids[name] = k
			read++
			toMark = toMark || w.markLater && k.kind == nodeFile && k.wd < 0 && !k.unwatched
			switch k.kind {
			case nodeDir:
				parts := append(slices.Clip(job.parts), name)
				k.inh = n.ign.child(parts, name)
				subdirs = append(subdirs, snapDir{n: k, rel: joinRel(job.rel, name), parts: parts, old: old})
			case nodeFile:
				if w.seeded == nil {
					o, file := fileOf(old)
					w.compare(job.rel, k, o, file)
				}
			}
		}
		w.count(read)
		read = 0
		if err != nil || len(ents) == 0 {
			break
		}
	}
	if toMark {
		w.mu.Lock()
		w.toMark = append(w.toMark, job.rel)
		w.mu.Unlock()
	}
	return subdirs
}

// keep returns the entries of ents, a chunk of directory n's listing, to
// be stat'ed — not .git, nor what n's rules ignore — in ents' own array;
// the others that are not regular files nor directories it enters in n
// (counted, not followed). scratch is n's path parts and a slot for a
// name.
func (w *snapWalker) keep(n *node, ents []dirEnt, scratch []string) []dirEnt {
	kept := ents[:0]
	for _, e := range ents {
		isDir := e.typ.IsDir()
		switch {
		case isDir && e.name == ".git":
			continue
		case !isDir && !e.typ.IsRegular():
			n.kids[e.name] = newNode(e.name, n, nodeSpecial)
			continue
		}
		scratch[len(scratch)-1] = e.name // Match keeps no path
		if n.ign != nil && n.ign.Match(scratch, isDir) {
			continue
		}
		kept = append(kept, e)
	}
	return kept
}

// entry makes the node of name, an entry of dir (node n) whose type the
// directory listing gave, old the node its path had (nil: none), in k,
// the memory for it: a walk makes a listing chunk's nodes in one
// allocation, which lives while any of them does (a node replaced later
// keeps its siblings' memory; at most what the walk made). A file is
// watched, then stat'ed — with markLater, only a file with more than one
// link is (then stat'ed again); nil when it vanished meanwhile.
func (w *snapWalker) entry(dir *os.File, t *watchThread, n *node, name string, isDir bool, old *node, k *node) *node {
	*k = node{name: name, parent: n, kind: nodeFile, wd: -1}
	if isDir {
		k.kind = nodeDir
	} else if w.feed != nil && !w.markLater {
		w.watchFile(k, t, dir, name)
	}
	st, links, ok := statAt(dir, dir.Name(), name)
	if ok && !isDir && !st.dir && w.markLater {
		switch {
		case links > 1:
			// Its other names may be outside the workspace, where its
			// directory's watch sees no write.
			w.watchFile(k, t, dir, name)
			st, _, ok = statAt(dir, dir.Name(), name)
		case w.reuse && old != nil && old.kind == nodeFile && old.wd >= 0 && old.e.sameStat(st):
			k.wd = old.wd // the same file, watched all along
		}
	}
	if !ok {
		if k.wd >= 0 && k.wd != old.watch() {
			w.feed.unwatch(k.wd)
		}
		return nil
	}
	switch {
	case st.dir != isDir:
		// Replaced since the listing: by the time the parent's watch
		// reports it, the next snapshot looks again.
		if k.wd >= 0 && k.wd != old.watch() {
			w.feed.unwatch(k.wd)
		}
		k.wd = -1
		if !st.dir {
			k.kind = nodeFile
			k.unwatched = true
		} else {
			k.kind = nodeDir
		}
	}
	k.e = st
	return k
}

// watch is n's watch (-1 for none, or no node).
func (n *node) watch() int32 {
	if n == nil {
		return -1
	}
	return n.wd
}

// watchFile watches the file name of dir, node k.
func (w *snapWalker) watchFile(k *node, t *watchThread, dir *os.File, name string) {
	if wd, err := w.feed.watchFile(t, int(dir.Fd()), name); err == nil {
		k.wd = wd
	} else if !errors.Is(err, fs.ErrNotExist) {
		w.noteWatchError(k, err)
	}
}

// noteWatchError records why n could not be watched: the watch limit
// loses the feed (the walk goes on without it); no permission leaves n
// to be examined on every snapshot.
func (w *snapWalker) noteWatchError(n *node, err error) {
	if errors.Is(err, errWatchLimit) {
		w.loseFeed(err.Error())
		return
	}
	n.unwatched = true
}

// loseFeed records that the feed cannot vouch for the tree.
func (w *snapWalker) loseFeed(why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.feedLost == "" {
		w.feedLost = why
	}
}

// maxIgnoreFileBytes bounds a .gitignore file a snapshot reads: a larger
// one is not read (as search does), and ignores nothing.
const maxIgnoreFileBytes = 1 << 20

// over reports whether the walk is past the entry bound.
func (w *snapWalker) over() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.partial
}

// count adds n entries read, marking the walk partial past the bound.
func (w *snapWalker) count(n int) {
	w.mu.Lock()
	w.entries += n
	if w.entries > w.s.maxEntries {
		w.partial = true
	}
	entries := w.entries
	w.mu.Unlock()
	w.s.counts.entries.Store(int64(entries))
}

// compare gives the new file node k, in directory dir, the hash of old,
// the entry of the file its path had (when file), when their stat fields
// are the same and old's was not racy; otherwise k is to be read (or,
// over the per-file limit, skipped), and compare reports that it is.
func (w *snapWalker) compare(dir string, k *node, old snapEntry, file bool) (read bool) {
	k.e.racy = k.e.mtime >= w.racyBefore || k.e.ctime >= w.racyBefore
	switch {
	case file && reuse(k.e, old) && (!w.verify || old.sum == "" || w.s.store.Has(old.sum, old.size)):
		k.e.sum, k.e.skip = old.sum, old.skip
	case k.e.size > w.maxBlob:
		k.e.skip = skipLarge
	default:
		w.mu.Lock()
		w.work = append(w.work, hashJob{rel: joinRel(dir, k.name), n: k})
		w.mu.Unlock()
		read = true
	}
	if k.e.skip != skipLarge {
		w.kept.Add(k.e.size)
	}
	return read
}

// compareAll compares the directories walked before the snapshot head
// was read with the head's (compareDir), on walkWorkers goroutines, and
// returns what the walk gathered for the commit (commitAcc.enter) of
// every entry but the files to read.
func (w *snapWalker) compareAll() *commitAcc {
	var next atomic.Int64
	var wg sync.WaitGroup
	for i := range walkWorkers {
		wg.Go(func() {
			for j := next.Add(1) - 1; j < int64(len(w.unseeded)); j = next.Add(1) - 1 {
				w.compareDir(w.unseeded[j], &w.accs[i])
			}
		})
	}
	wg.Wait()
	a := &w.accs[0]
	rest := make([]*commitAcc, 0, len(w.accs)-1)
	for i := 1; i < len(w.accs); i++ {
		rest = append(rest, &w.accs[i])
	}
	a.merge(rest...)
	return a
}

// compareDir compares the files of directory d, just walked (its
// entries listed, the directories among them not yet read), with their
// entries in the snapshot head, and notes in a what d and its entries
// change (headIndex.noteDir) but the files to read, which the commit
// notes once read.
func (w *snapWalker) compareDir(d snapDir, a *commitAcc) {
	w.head.noteDir(d.rel, d.n, a, func(k *node, o snapEntry, had bool) bool {
		return k.kind == nodeFile && w.compare(d.rel, k, o, had && !o.dir)
	})
}

// reuse reports whether the file entry k may keep the hash of old, the
// entry of the file its path had (or its reason for not keeping it):
// same stat, not racy, and hashed (or skipped as too large or holding a
// secret, which its content decided).
func reuse(k, old snapEntry) bool {
	if old.racy || !old.sameStat(k) {
		return false
	}
	return old.sum != "" || old.skip == skipLarge || old.skip == skipSecret
}

// fileOf returns the entry of node n when it is a file.
func fileOf(n *node) (snapEntry, bool) {
	if n == nil || n.kind != nodeFile {
		return snapEntry{}, false
	}
	return n.e, true
}
