package tools

import (
	"context"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/octet-agent/octet/internal/fsroot"
)

// This file brings the tree up to date from the change feed: each path
// the feed names (and each the feed cannot watch) is examined again —
// lstat'ed in its parent, compared with the tree — and a path that is a
// new or replaced directory is walked. Everything is decided by what the
// path holds now, so the order of events, a path named twice or a watch
// whose path moved since only cost an extra examination.

// feedMaxPending bounds the (watch, name) pairs a feed holds between
// drains; past it the feed is lost and the next snapshot walks. (A
// variable for tests.)
var feedMaxPending = 1 << 17

// maxFeeds bounds the feeds a process keeps (each of feedInstances
// inotify instances on Linux: 16 in all): the kernel's limit on
// instances is per user (fs.inotify.max_user_instances, 128 by default)
// and shared with every other program the user runs. A process has a
// feed per workspace it checkpoints; past the bound, the snapshots of a
// further workspace walk it.
const maxFeeds = 8

// feeds counts the feeds open in this process.
var feeds atomic.Int32

// feedReads turns the feed's reading goroutine on (tests turn it off to
// let the kernel's queue overflow).
var feedReads = true

// fedUpdate returns what changed according to the feed, or errNeedWalk.
func (s *snapshotter) fedUpdate(ctx context.Context, root *fsroot.Root, now time.Time) (*update, error) {
	events, lost := s.feed.drain()
	if lost != "" {
		s.loseFeed(lost)
		return nil, errNeedWalk
	}
	for wd, names := range events {
		for n := s.wds[wd]; n != nil; n = n.sameWD {
			if n.parent == nil {
				if _, self := names[""]; self {
					s.loseFeed("the workspace directory itself changed")
					return nil, errNeedWalk
				}
			}
			rel := n.rel()
			for name := range names {
				switch {
				case name == "":
					s.pending[rel] = struct{}{}
				case n.kind == nodeDir:
					s.pending[joinRel(rel, name)] = struct{}{}
				}
			}
		}
	}
	for rel := range s.recheck {
		s.pending[rel] = struct{}{}
	}
	paths := make([]string, 0, len(s.pending))
	for p := range s.pending {
		paths = append(paths, p)
	}
	slices.Sort(paths) // a directory before its entries
	u := &update{dirs: map[string]*os.File{}}
	w := &snapWalker{s: s, root: root, feed: s.feed, racyBefore: now.Add(-s.racy).UnixNano(), maxBlob: s.store.MaxBlobBytes()}
	replaced := map[string]bool{}
	var walks []snapDir
	for _, rel := range paths {
		if ctx.Err() != nil {
			u.close()
			return nil, ctx.Err()
		}
		if underAny(rel, replaced) {
			continue
		}
		r, ok, err := s.examine(u, w, root, rel, false)
		if err != nil {
			u.close()
			return nil, err
		}
		if !ok {
			continue
		}
		u.repls = append(u.repls, r)
		if r.old != nil && r.old.kind == nodeDir || r.new != nil && r.new.kind == nodeDir {
			replaced[r.rel] = true
		}
		if r.new != nil && r.new.kind == nodeDir {
			walks = append(walks, snapDir{n: r.new, rel: r.rel, parts: strings.Split(r.rel, "/"), old: r.old})
		}
	}
	if err := w.walk(ctx, walks); err != nil {
		u.close()
		return nil, err
	}
	if w.feedLost != "" {
		u.close()
		s.loseFeed(w.feedLost)
		return nil, errNeedWalk
	}
	u.work = append(u.work, w.work...)
	entries := s.entries
	for _, r := range u.repls {
		entries += countEntries(r.new) - countEntries(r.old)
	}

	if entries > s.maxEntries {
		u.close()
		s.loseFeed("the workspace is over the entry bound")
		return nil, errNeedWalk
	}
	return u, nil
}

// countEntries returns the checkpointed entries below n (n included).
func countEntries(n *node) int {
	if n == nil {
		return 0
	}
	count := 0
	n.each(".", func(_ string, k *node) {
		if k.entry() && k.parent != nil {
			count++
		}
	})
	return count
}

// underAny reports whether rel is below one of the paths in dirs.
func underAny(rel string, dirs map[string]bool) bool {
	for p := path.Dir(rel); p != "."; p = path.Dir(p) {
		if dirs[p] {
			return true
		}
	}
	return false
}

// examine looks at what path rel holds now and returns the replacement
// of its node, if anything changed (with reread, a directory is read
// again whatever changed). A .gitignore that changed replaces its
// directory's whole subtree (its rules changed); the root's, the tree
// (errNeedWalk).
func (s *snapshotter) examine(u *update, w *snapWalker, root *fsroot.Root, rel string, reread bool) (repl, bool, error) {
	dirRel, name := path.Split(rel)
	dirRel = strings.TrimSuffix(dirRel, "/")
	if dirRel == "" {
		dirRel = "."
	}
	parent := lookup(s.tree, dirRel)
	if parent == nil || parent.kind != nodeDir || parent.kids == nil {
		return repl{}, false, nil // its directory's own change is examined
	}
	if name == ".gitignore" {
		if parent.parent == nil {
			s.loseFeed("the workspace's .gitignore changed")
			return repl{}, false, errNeedWalk
		}
		// The directory's rules changed: read it again.
		return s.examine(u, w, root, dirRel, true)
	}
	old := parent.kids[name]
	dir, err := u.openDir(root, dirRel)
	if err != nil {
		return repl{}, false, nil // gone or replaced: its parent's event says so
	}
	parts := append(parent.parts(), name)
	k := s.classify(w, dir, parent, name, parts)
	switch {
	case k == nil && old == nil:
		return repl{}, false, nil
	case k != nil && old != nil && k.kind == nodeSpecial && old.kind == nodeSpecial:
		return repl{}, false, nil
	case k != nil && old != nil && k.kind == nodeDir && old.kind == nodeDir &&
		k.e.ino == old.e.ino && k.e.mode == old.e.mode && !old.unwatched && !reread:
		// The same directory: its entries have events of their own.
		return repl{}, false, nil
	case k != nil && old != nil && k.kind == nodeFile && old.kind == nodeFile &&
		!old.unwatched && !old.e.racy && k.e.sameStat(old.e) && k.wd == old.wd:
		return repl{}, false, nil // an event that changed nothing checkpointed
	}
	if k != nil && k.kind == nodeFile {
		o, file := fileOf(old)
		w.compare(dirRel, k, o, file)
	}
	if k != nil && k.kind == nodeDir {
		k.inh = parent.ign.child(parts, name)
	}
	return repl{parent: parent, name: name, rel: rel, old: old, new: k}, true, nil
}

// classify returns the new node of name in parent (open as dir), or nil
// when it is absent or not checkpointed (.git, ignored). A file is
// watched before it is stat'ed; a directory is watched when the walk
// reads it.
func (s *snapshotter) classify(w *snapWalker, dir *os.File, parent *node, name string, parts []string) *node {
	for range 3 {
		isDir, special, ok := typeAt(dir, name)
		switch {
		case !ok:
			return nil
		case special:
			return newNode(name, parent, nodeSpecial)
		case isDir && name == ".git":
			return nil
		case parent.ign != nil && parent.ign.Match(parts, isDir):
			return nil
		}
		k := w.entry(dir, nil, parent, name, isDir, nil, new(node))
		if k != nil && (k.kind == nodeDir) != isDir {
			continue // replaced between the two stats: look again
		}
		return k
	}
	return nil
}

// openDir opens the directory rel of the workspace (no symbolic links
// followed), once per update.
func (u *update) openDir(root *fsroot.Root, rel string) (*os.File, error) {
	if d, ok := u.dirs[rel]; ok {
		return d, nil
	}
	d, err := root.OpenDir(rel)
	if err != nil {
		return nil, err
	}
	u.dirs[rel] = d
	return d, nil
}
