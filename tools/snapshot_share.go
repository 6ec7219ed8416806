package tools

import (
	"path/filepath"
	"sync"
)

// The snapshotters of this process, one per workspace and change store:
// every bash tool (one per session) of a workspace shares its tree and
// its change feed, so a process watches a workspace once, whatever
// number of sessions it has open.
var shared struct {
	mu    sync.Mutex
	byKey map[string]*snapshotter
}

// prewarmSnapshots makes a new shared snapshotter take its first
// snapshot at once (benchmarks of the first call turn it off).
var prewarmSnapshots = true

// sharedSnapshotter returns the snapshotter of cfg's workspace and change
// store, made on first use (nil when cfg keeps none); release it with
// releaseSnapshotter. Each user's redactor is added to it.
func sharedSnapshotter(cfg Config) *snapshotter {
	s := newSnapshotter(cfg)
	if s == nil {
		return nil
	}
	key := filepath.Clean(cfg.Root) + "\x00" + cfg.Changes.Store.Dir()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if have := shared.byKey[key]; have != nil {
		have.addRedactor(cfg.Redactor)
		have.users++
		return have
	}
	if shared.byKey == nil {
		shared.byKey = map[string]*snapshotter{}
	}
	s.users = 1
	shared.byKey[key] = s
	if prewarmSnapshots {
		s.prewarm()
	}
	return s
}

// releaseSnapshotter gives back a snapshotter sharedSnapshotter
// returned; the last user's release closes it.
func releaseSnapshotter(s *snapshotter) {
	if s == nil {
		return
	}
	shared.mu.Lock()
	s.users--
	last := s.users == 0
	if last {
		for k, v := range shared.byKey {
			if v == s {
				delete(shared.byKey, k)
			}
		}
	}
	shared.mu.Unlock()
	if last {
		s.close()
	}
}
