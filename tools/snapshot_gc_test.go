package tools

import (
	"runtime/debug"
	"testing"
)

// gcPercent returns the garbage collector's percentage.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestRelaxGC: first walks relax the collector's pacing while any of
// them runs, and put it back after the last; a collector turned off, or
// set more relaxed, is left as it is.
func TestRelaxGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	a := relaxGC()
	b := relaxGC()
	if p := gcPercent(); p != relaxedGCPercent {
		t.Errorf("while two walks run: %d", p)
	}
	a()
	if p := gcPercent(); p != relaxedGCPercent {
		t.Errorf("while one walk runs: %d", p)
	}
	b()
	if p := gcPercent(); p != 100 {
		t.Errorf("after the walks: %d, want 100", p)
	}
	for _, set := range []int{-1, 1000} {
		debug.SetGCPercent(set)
		restore := relaxGC()
		if p := gcPercent(); p != set {
			t.Errorf("GOGC %d: %d while a walk runs", set, p)
		}
		restore()
		if p := gcPercent(); p != set {
			t.Errorf("GOGC %d: %d after", set, p)
		}
	}
}
