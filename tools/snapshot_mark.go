package tools

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"time"

	"github.com/octet-agent/octet/internal/fsroot"
)

// This file adds the file watches a walk leaves out. A walk — the first
// snapshot of a process, or one after the feed was lost — watches every
// directory, which reports every change made through a path in the
// workspace, and every file with more than one link; a file's own watch,
// which also reports a write through a hard link made outside the
// workspace later, is added afterwards by the marker: in the background,
// while no bash call runs, a chunk at a time between snapshots, so the
// first bash call of a process does not wait for a watch per file. Each
// file is stat'ed again once watched and compared with the tree, so a
// change made before its watch is examined by the next snapshot. A
// snapshot before a command finishes the marking first once a command
// has run since the walk: a before-image is never older than a change
// that reached the file through a hard link made outside the workspace
// after the walk. Until the marking ends, such a change is recorded by
// the snapshot after the marker reached its file (the command's, or the
// next call's).

// markChunk is how many files the marker watches before it lets a
// snapshot waiting for the tree have it.
const markChunk = 256

// markIdlePoll is how often a marker waiting for a bash call to end
// looks again.
const markIdlePoll = 5 * time.Millisecond

// markerRuns turns the marker's goroutine on (tests turn it off to see
// what a snapshot before a command finishes itself).
var markerRuns = true

// markerRun is one run of the marker's goroutine.
type markerRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// setMarks makes dirs the directories whose files are left to the
// marker — replacing those an earlier walk left (its tree is gone) — and
// starts the marker. The caller holds mu and the snapshot slot.
func (s *snapshotter) setMarks(dirs []string) {
	s.marks, s.since = dirs, 0
	if len(dirs) == 0 || s.feed == nil || s.marker != nil || !markerRuns {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &markerRun{cancel: cancel, done: make(chan struct{})}
	s.marker = m
	go s.runMarker(ctx, m)
}

// runMarker marks the files left to it, markChunk at a time, each chunk
// under the snapshot slot (a snapshot waiting for it goes first) and mu.
func (s *snapshotter) runMarker(ctx context.Context, m *markerRun) {
	defer close(m.done)
	t := newWatchThread(0)
	for more := true; more; {
		// Not while a bash call runs: its command and snapshots have the
		// CPU (in an editor the files are marked during the model's
		// turn).
		for s.calls.Load() > 0 {
			select {
			case <-time.After(markIdlePoll):
			case <-ctx.Done():
				return
			}
		}
		select {
		case s.takes <- struct{}{}:
		case <-ctx.Done():
			return
		}
		s.mu.Lock()
		if more = s.markSome(ctx, t, markChunk); !more && s.marker == m {
			s.marker = nil
		}
		s.mu.Unlock()
		<-s.takes
	}
}

// stopMarker stops the marker and waits for it to end.
func (s *snapshotter) stopMarker() {
	s.mu.Lock()
	m := s.marker
	s.marker = nil
	s.mu.Unlock()
	if m != nil {
		m.cancel()
		<-m.done
	}
}

// markSome watches the files of the directories left to the marker until
// about budget files are watched, and reports whether any are left. The
// caller holds mu and the snapshot slot; t is the marker's thread (it
// stops early for a snapshot waiting), or nil for a snapshot marking.
func (s *snapshotter) markSome(ctx context.Context, t *watchThread, budget int) bool {
	if len(s.marks) == 0 {
		return false
	}
	if s.feed == nil || s.tree == nil {
		s.marks = nil
		return false
	}
	root, err := fsroot.Open(s.root)
	if err != nil {
		return false // the next snapshot says why
	}
	defer root.Close()
	for budget > 0 && len(s.marks) > 0 && s.feed != nil {
		if ctx.Err() != nil || s.waiting.Load() > 0 && t != nil {
			return ctx.Err() == nil // a snapshot waits: it goes first
		}
		rel := s.marks[len(s.marks)-1]
		s.marks = s.marks[:len(s.marks)-1]
		n := s.markDir(root, t, rel)
		budget -= n
		s.counts.entries.Add(int64(n)) // a snapshot marking says how far it is
	}
	if s.feed == nil {
		s.marks = nil
	}
	return len(s.marks) > 0
}

// markDir watches the files of directory rel that have no watch and
// returns how many it tried. A file whose stat is no longer the tree's
// (or that is gone) is examined by the next snapshot; one that cannot
// be watched (no permission) is examined by every snapshot; at the watch
// limit the feed is given up (snapshots walk).
func (s *snapshotter) markDir(root *fsroot.Root, t *watchThread, rel string) int {
	n := lookup(s.tree, rel)
	if n == nil || n.kind != nodeDir || n.kids == nil || n.wd < 0 {
		return 0 // replaced or unwatched: a snapshot reads it again, watching its files
	}
	dir, err := root.OpenDir(rel)
	if err != nil {
		return 0 // gone: its parent's watch says so
	}
	defer dir.Close()
	if st, ok := fstatEntry(dir); !ok || st.ino != n.e.ino {
		return 0 // replaced since: its parent's watch says so
	}
	t.enter(int(dir.Fd()))
	defer t.leave()
	tried := 0
	for name, k := range n.kids {
		if k.kind != nodeFile || k.wd >= 0 || k.unwatched {
			continue
		}
		if t != nil && s.waiting.Load() > 0 {
			s.marks = append(s.marks, rel) // the rest after the snapshot waiting
			return tried
		}
		tried++
		p := joinRel(rel, name)
		wd, err := s.feed.watchFile(t, int(dir.Fd()), name)
		switch {
		case errors.Is(err, errWatchLimit):
			s.giveUpFeed(err.Error())
			return tried
		case err != nil:
			if !errors.Is(err, fs.ErrNotExist) {
				k.unwatched = true
				s.recheck[p] = struct{}{}
			}
			s.pending[p] = struct{}{}
			continue
		}
		k.wd = wd
		s.bind(k)
		if st, _, ok := statAt(dir, dir.Name(), name); !ok || !st.sameStat(k.e) {
			s.pending[p] = struct{}{} // changed before its watch
		}
	}
	return tried
}

// giveUpFeed closes the feed for why (the watch limit, or whatever a
// walk found it cannot vouch for): snapshots walk, and one tries a feed
// again after feedRetry.
func (s *snapshotter) giveUpFeed(why string) {
	s.dropFeed()
	s.feedOff, s.retry = why, time.Now().Add(feedRetry)
	slog.Info("checkpoint: no change feed; every bash call walks the workspace", "workspace", s.root, "why", why)
}
