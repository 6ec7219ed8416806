package tools

import (
	"runtime/debug"
	"sync"
)

// A first walk builds two large structures that live until it ends —
// the new tree and the snapshot head's index, about 45 MB at 100,000
// files — and little garbage besides. The garbage collector, paced on
// the heap it last found live, would run three or four times while they
// grow, marking them again each time (~10% of the walk at 100,000
// files). While a first walk runs, the pacing is relaxed (relaxGC): the
// heap may grow to 5× what was live, not 2×, so it is marked about once;
// what the walk keeps is the same, and a GOMEMLIMIT still holds.

// relaxedGCPercent is the GC percentage while a first walk runs.
const relaxedGCPercent = 400

var gcRelax struct {
	mu    sync.Mutex
	walks int // first walks under way
	old   int // the percentage before the first of them
}

// relaxGC relaxes the garbage collector's pacing until the returned
// function is called, unless it is off or already as relaxed.
func relaxGC() (restore func()) {
	gcRelax.mu.Lock()
	defer gcRelax.mu.Unlock()
	if gcRelax.walks == 0 {
		gcRelax.old = debug.SetGCPercent(relaxedGCPercent)
		if gcRelax.old < 0 || gcRelax.old >= relaxedGCPercent {
			debug.SetGCPercent(gcRelax.old) // off, or set higher by GOGC
		}
	}
	gcRelax.walks++
	return func() {
		gcRelax.mu.Lock()
		defer gcRelax.mu.Unlock()
		if gcRelax.walks--; gcRelax.walks == 0 {
			debug.SetGCPercent(gcRelax.old)
		}
	}
}
