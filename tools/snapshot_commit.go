package tools

import (
	"slices"
	"strings"
)

// This file is a snapshot's commit: the update applied to the tree, and
// what changed gathered from it.

// commit applies u to the tree and returns what changed, by path: every
// new subtree in place of the old one, its watches bound, the old
// subtree's released, the categories, counts and pins kept.
func (s *snapshotter) commit(u *update) []pathChange {
	if u.feed != nil {
		if u.feed != s.feed { // a new instance: the old one's watches went with it
			clear(s.wds)
			s.feed = u.feed
		}
		s.stale = ""
		u.feed = nil
	}
	a := &commitAcc{}
	for _, r := range u.repls {
		if r.new != nil && r.new.kind == nodeMissing {
			r.new = nil // vanished before it could be read
		}
		if r.parent == nil && r.old == nil { // a walk with no tree before it
			s.enterWalked(u, a)
		} else {
			s.diffNode(r.rel, r.old, r.new, a)
		}
		switch {
		case r.parent == nil:
			s.tree = r.new
		case r.new == nil:
			delete(r.parent.kids, r.name)
		default:
			r.new.parent = r.parent
			r.parent.kids[r.name] = r.new
		}
	}
	for _, n := range a.bind {
		s.bind(n)
	}
	for _, t := range a.track {
		s.track(t.rel, t.o, t.n)
	}
	s.entries += a.entries
	s.kept += a.kept
	if s.feed != nil {
		for _, wd := range a.unwatch {
			if s.wds[wd] == nil {
				s.feed.unwatch(wd)
			}
		}
	}
	// The tree's images are held while it names them; a prior image
	// while the snapshot whose delta names it is remembered.
	s.hold(a.pins, 1)
	clear(s.pending)
	slices.SortFunc(a.delta, func(x, y pathChange) int { return strings.Compare(x.path, y.path) })
	return a.delta
}

// enterWalked is diffNode's work for the tree of a walk with no tree
// before it, compared with the snapshot head (u.head) on the
// walk's workers (u.pre: every entry but the files read; gathered again
// here when the budget or the entry bound changed the tree since): what
// is left is the files read, now that they are.
func (s *snapshotter) enterWalked(u *update, a *commitAcc) {
	if u.pre == nil {
		u.pre = &commitAcc{}
		read := make(map[*node]bool, len(u.work))
		for _, j := range u.work {
			read[j.n] = true
		}
		top := u.repls[0].new
		top.each(".", func(rel string, n *node) {
			if n.kind == nodeDir {
				u.head.noteDir(rel, n, u.pre, func(k *node, _ snapEntry, _ bool) bool { return read[k] })
			}
		})
	}
	a.merge(u.pre)
	for _, j := range u.work {
		n := j.n
		if n.parent.kids[n.name] != n { // vanished before it could be read
			n = nil
		}
		o, had := u.head.find(j.rel)
		a.enter(j.rel, o, had, n)
		if had && o.dir {
			u.head.removeBelow(j.rel, a)
		}
	}
}

// commitAcc is what a commit gathers. Watches and categories are the
// snapshotter's: a commitAcc gathers them (bind, track) for the commit
// to apply, so that one can be filled on a walk's workers.
type commitAcc struct {
	delta   []pathChange
	pins    []string // images to hold
	unwatch []int32
	bind    []*node     // nodes to record under their watch
	track   []trackMove // paths to move between categories
	entries int         // entries added less entries removed
	kept    int64       // likewise, bytes of files within the per-file limit
}

// trackMove is one path moved from node o to node n in the categories.
type trackMove struct {
	rel  string
	o, n *node
}

// merge adds bs to a, which takes their slices over (they are not used
// after): each of a's slices grows once, or is one of theirs (a first
// walk's gathers hold an entry or more a file: copying them again took
// ~1 ms at 10,000 files, after the walk).
func (a *commitAcc) merge(bs ...*commitAcc) {
	a.delta = joined(a.delta, bs, func(b *commitAcc) []pathChange { return b.delta })
	a.pins = joined(a.pins, bs, func(b *commitAcc) []string { return b.pins })
	a.unwatch = joined(a.unwatch, bs, func(b *commitAcc) []int32 { return b.unwatch })
	a.bind = joined(a.bind, bs, func(b *commitAcc) []*node { return b.bind })
	a.track = joined(a.track, bs, func(b *commitAcc) []trackMove { return b.track })
	for _, b := range bs {
		a.entries += b.entries
		a.kept += b.kept
	}
}

// joined returns a followed by of(b) for each of bs: a itself when they
// are all empty, the only one that is not when a is empty, else a new
// slice holding them all.
func joined[T any](a []T, bs []*commitAcc, of func(*commitAcc) []T) []T {
	parts := [][]T{a}
	for _, b := range bs {
		if s := of(b); len(s) > 0 {
			parts = append(parts, s)
		}
	}
	switch {
	case len(parts) == 1:
		return a
	case len(parts) == 2 && len(a) == 0:
		return parts[1]
	}
	return slices.Concat(parts...)
}

// diffNode compares the node at path rel ("": not made yet), o before
// (nil: none) and n after, and everything below them: it records the
// changes, releases o's watches, and gathers n's, the counts, categories
// and pins in a. Paths are made only for what changed, or is not kept.
func (s *snapshotter) diffNode(rel string, o, n *node, a *commitAcc) {
	if o != nil && s.unbind(o) {
		a.unwatch = append(a.unwatch, o.wd)
	}
	a.note(rel, o, n)
	var okids, nkids map[string]*node
	if o != nil && o.kind == nodeDir {
		okids = o.kids
	}
	if n != nil && n.kind == nodeDir {
		nkids = n.kids
	}
	for k, nk := range nkids {
		s.diffNode("", okids[k], nk, a)
	}
	for k, ok := range okids {
		if _, still := nkids[k]; !still {
			s.diffNode("", ok, nil, a)
		}
	}
}

// note gathers in a what node n in place of node o at path rel ("": not
// made yet) changes, not what is below them (diffNode's work for one
// node but the watch it releases).
func (a *commitAcc) note(rel string, o, n *node) {
	a.gather(n)
	if o != nil && o.parent != nil {
		a.entries -= entryCount(o)
		a.kept -= keptSize(o)
	}
	if tracked(o) || tracked(n) {
		rel = pathOf(rel, o, n)
		a.track = append(a.track, trackMove{rel, o, n})
	}
	old, had := entryOf(o)
	if c, ok := entryChange(old, had, n); ok {
		c.path = pathOf(rel, o, n)
		a.delta = append(a.delta, c)
		if c.has && c.new.sum != "" {
			a.pins = append(a.pins, c.new.sum)
		}
	}
}

// enter gathers in a what node n (nil: none), entering the tree at path
// rel ("": not made yet; set when n is nil) from a walk with no tree
// before it, changes from what the snapshot head had there (old, when
// had), not what is below them. It changes nothing but a: a walk's
// workers enter the nodes they compare.
func (a *commitAcc) enter(rel string, old snapEntry, had bool, n *node) {
	a.gather(n)
	if n != nil && n.kind == nodeFile && n.e.sum != "" {
		a.pins = append(a.pins, n.e.sum) // enters the tree now
	}
	if tracked(n) {
		rel = pathOf(rel, nil, n)
		a.track = append(a.track, trackMove{rel, nil, n})
	}
	if c, ok := entryChange(old, had, n); ok {
		c.path = pathOf(rel, nil, n)
		a.delta = append(a.delta, c)
		if c.hadOld && c.old.sum != "" {
			a.pins = append(a.pins, c.old.sum) // the history's, like a live one's
		}
	}
}

// gather gathers in a node n's watch and counts (nil: none).
func (a *commitAcc) gather(n *node) {
	if n == nil {
		return
	}
	if n.wd >= 0 {
		a.bind = append(a.bind, n)
	}
	if n.parent != nil {
		a.entries += entryCount(n)
		a.kept += keptSize(n)
	}
}

// pathOf returns rel, or when it is "" the path of n (of o when n is
// nil).
func pathOf(rel string, o, n *node) string {
	switch {
	case rel != "":
		return rel
	case n != nil:
		return n.rel()
	}
	return o.rel()
}

// entryCount is 1 for a checkpointed entry, 0 otherwise.
func entryCount(n *node) int {
	if n.entry() {
		return 1
	}
	return 0
}

// keptSize is the size of a file within the per-file limit (what the
// budget counts), 0 for anything else.
func keptSize(n *node) int64 {
	if n.kind == nodeFile && n.e.skip != skipLarge {
		return n.e.size
	}
	return 0
}

// tracked reports whether n is in a category or examined every time.
func tracked(n *node) bool {
	return n != nil && n.parent != nil && (n.kind == nodeSpecial || n.kind == nodeFailed || n.unwatched || n.kind == nodeFile && n.e.skip != skipNone)
}

// track moves path rel from node o (nil: none) to node n in the
// categories and in the set of paths examined on every snapshot.
func (s *snapshotter) track(rel string, o, n *node) {
	s.cats.move(rel, o, n)
	if o != nil && o.parent != nil && (o.unwatched || o.kind == nodeFailed) {
		delete(s.recheck, rel)
	}
	if n != nil && n.parent != nil && (n.unwatched || n.kind == nodeFailed) {
		s.recheck[rel] = struct{}{}
	}
}

// entryOf returns node o's checkpointed entry, and whether it has one.
func entryOf(o *node) (snapEntry, bool) {
	if o == nil || !o.entry() || o.parent == nil {
		return snapEntry{}, false
	}
	return o.e, true
}

// entryChange returns the change from entry old (when had) to node n
// (nil: none), its path not set, and whether there is one: any field of
// a checkpointed entry.
func entryChange(old snapEntry, had bool, n *node) (pathChange, bool) {
	c := pathChange{old: old, hadOld: had}
	if !had {
		c.old = snapEntry{}
	}
	if n != nil && n.entry() && n.parent != nil {
		c.new, c.has = n.e, true
	}
	if c.hadOld != c.has {
		return c, true
	}
	return c, c.has && (!c.old.sameStat(c.new) || c.old.sum != c.new.sum || c.old.skip != c.new.skip || c.old.racy != c.new.racy)
}

// bind records n under its watch.
func (s *snapshotter) bind(n *node) {
	if n.wd < 0 || s.feed == nil {
		return
	}
	n.sameWD = s.wds[n.wd]
	s.wds[n.wd] = n
}

// unbind removes n from its watch and reports whether no node is left
// on it (the watch can go).
func (s *snapshotter) unbind(n *node) bool {
	if n.wd < 0 {
		return false
	}
	head := s.wds[n.wd]
	if head == nil {
		return false
	}
	if head == n {
		head = n.sameWD
	} else {
		for p := head; p.sameWD != nil; p = p.sameWD {
			if p.sameWD == n {
				p.sameWD = n.sameWD
				break
			}
		}
	}
	n.sameWD = nil
	if head == nil {
		delete(s.wds, n.wd)
		return true
	}
	s.wds[n.wd] = head
	return false
}
