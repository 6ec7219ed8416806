package changes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func img(sum string, mode fs.FileMode) *Image {
	return &Image{SHA256: sum, Size: 1, Mode: mode}
}

func rec(path string, before, after *Image) Record {
	return Record{Change: Change{Path: path}, Before: before, After: after}
}

// TestPlanRewind covers the planning rules: only paths changed after the
// shared prefix; the target is the state after the last change on the
// target branch, else before the first change; a rewind's prior state is
// expected too; a path created after the entry is planned absent.
func TestPlanRewind(t *testing.T) {
	a1, a2, a3 := img("a1", 0o644), img("a2", 0o644), img("a3", 0o755)
	b1 := img("b1", 0o600)
	shared := Step{Records: []Record{rec("a", nil, a1), rec("old", nil, b1)}}
	later := Step{Records: []Record{rec("a", a1, a2), rec("new", nil, b1)}}
	again := Step{Records: []Record{rec("a", a2, a3)}}
	got := PlanRewind([]Step{shared, later, again}, []Step{shared}, 1)
	want := []Restore{
		{Path: "a", Target: StateOf(a1), Expected: []State{StateOf(a3)}},
		{Path: "new", Target: State{}, Expected: []State{StateOf(b1)}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plan\n got %+v\nwant %+v", got, want)
	}

	// The rewind itself, as the last step: its prior state is expected.
	rw := Step{Rewind: true, Records: []Record{rec("a", a3, a1), rec("new", b1, nil)}}
	got = PlanRewind([]Step{shared, later, again, rw}, []Step{shared, later, again}, 3)
	want = []Restore{
		{Path: "a", Target: StateOf(a3), Expected: []State{StateOf(a1), StateOf(a3)}},
		{Path: "new", Target: StateOf(b1), Expected: []State{{}, StateOf(b1)}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plan of a rewind's rewind\n got %+v\nwant %+v", got, want)
	}

	// A target on another branch: paths only it changed are planned from
	// their state before its first change.
	other := Step{Records: []Record{rec("side", nil, a2)}}
	got = PlanRewind([]Step{shared}, []Step{shared, other}, 1)
	want = []Restore{{Path: "side", Target: StateOf(a2), Expected: []State{{}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plan to another branch\n got %+v\nwant %+v", got, want)
	}
}

// TestStateSame: an unknown mode (an editor buffer) matches any mode.
func TestStateSame(t *testing.T) {
	x := State{Exists: true, SHA256: "x", Mode: 0o644}
	for _, tc := range []struct {
		o    State
		same bool
	}{
		{State{Exists: true, SHA256: "x", Mode: 0o644}, true},
		{State{Exists: true, SHA256: "x"}, true},
		{State{Exists: true, SHA256: "x", Mode: 0o755}, false},
		{State{Exists: true, SHA256: "y", Mode: 0o644}, false},
		{State{}, false},
	} {
		if got := x.Same(tc.o); got != tc.same {
			t.Errorf("%+v.Same(%+v) = %v", x, tc.o, got)
		}
	}
	if !(State{}).Same(State{}) {
		t.Error("two absent states differ")
	}
}

// TestStoreCapExpiresLeastRecentlyUsed: past the cap, the least recently
// written or reused blobs are removed down to 90% of it, never the one
// just written; a missing blob is then reported as possibly expired.
func TestStoreCapExpiresLeastRecentlyUsed(t *testing.T) {
	s, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	s.SetMaxBytes(100)
	base := time.Now().Add(-time.Hour)
	var sums []string
	put := func(i int) string {
		t.Helper()
		sum, _, err := s.Put([]byte(fmt.Sprintf("blob %02d %s", i, strings.Repeat("x", 22)))) // 30 bytes
		if err != nil {
			t.Fatal(err)
		}
		at := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(s.blobPath(sum), at, at); err != nil {
			t.Fatal(err)
		}
		return sum
	}
	for i := range 3 {
		sums = append(sums, put(i))
	}
	if _, err := s.Get(sums[0]); err != nil {
		t.Fatalf("under the cap: %v", err)
	}
	sums = append(sums, put(3)) // 120 bytes: blob 0 expires
	if _, err := s.Get(sums[0]); !errors.Is(err, ErrNotStored) || !strings.Contains(err.Error(), "it may have expired") {
		t.Errorf("expired blob: %v", err)
	}
	for _, sum := range sums[1:] {
		if _, err := s.Get(sum); err != nil {
			t.Errorf("kept blob: %v", err)
		}
	}
	// Reusing blob 1 makes it recent: blob 2 expires next.
	if _, _, err := s.Put([]byte(fmt.Sprintf("blob %02d %s", 1, strings.Repeat("x", 22)))); err != nil {
		t.Fatal(err)
	}
	put(10)
	if _, err := s.Get(sums[2]); !errors.Is(err, ErrNotStored) {
		t.Errorf("least recently used blob kept: %v", err)
	}
	if _, err := s.Get(sums[1]); err != nil {
		t.Errorf("reused blob expired: %v", err)
	}
}

// TestPlanRewindTypeChange: a rewind that replaces a file with a
// directory (or the reverse) removes one before making the other; killed
// in between, it leaves the path absent, which a later rewind (to the
// same entry, or to the rewind's parent) expects too: it completes or
// undoes the rewind without a conflict.
func TestPlanRewindTypeChange(t *testing.T) {
	file, dir := img("f", 0o644), &Image{Dir: true, Mode: 0o755}
	cmd := Step{Records: []Record{rec("p", file, dir)}}
	rw := Step{Rewind: true, Records: []Record{rec("p", dir, file)}}
	got := PlanRewind([]Step{cmd, rw}, []Step{cmd}, 1)
	if len(got) != 1 || !got[0].Expects(State{}) || !got[0].Expects(StateOf(file)) || !got[0].Expects(StateOf(dir)) {
		t.Errorf("plan back to the command: %+v (want the file, the directory and absence expected)", got)
	}
	// An ordinary rewind of a file's content does not expect absence.
	a1, a2 := img("a1", 0o644), img("a2", 0o644)
	got = PlanRewind([]Step{{Records: []Record{rec("a", a1, a2)}}, {Rewind: true, Records: []Record{rec("a", a2, a1)}}}, []Step{{Records: []Record{rec("a", a1, a2)}}}, 1)
	if len(got) != 1 || got[0].Expects(State{}) {
		t.Errorf("plan of a content rewind: %+v (absence must not be expected)", got)
	}
}

// TestPlanRewindBetween: a path whose state before one of octet's changes
// after the first one past the shared prefix is not the one octet's
// previous change left (the user changed it in between) is marked:
// rewinding it would discard that change too. Before the first one, such
// a change is the target (kept). Rewind steps (cut short, perhaps) and
// states octet did not hash mark nothing.
func TestPlanRewindBetween(t *testing.T) {
	a1, u, a2 := img("a1", 0o644), img("u", 0o644), img("a2", 0o644)
	first := Step{Records: []Record{rec("a", nil, a1)}}
	second := Step{Records: []Record{rec("a", u, a2)}}
	got := PlanRewind([]Step{first, second}, nil, 0)
	if len(got) != 1 || !got[0].Between {
		t.Errorf("rewind past both: %+v, want a marked as changed in between", got)
	}
	// Rewinding only the second change restores the state before it: the
	// user's change is kept, nothing is marked.
	got = PlanRewind([]Step{first, second}, []Step{first}, 1)
	if len(got) != 1 || got[0].Between || got[0].Target != StateOf(u) {
		t.Errorf("rewind of the second change: %+v, want its prior state u as the target", got)
	}
	same := Step{Records: []Record{rec("a", a1, a2)}}
	if got := PlanRewind([]Step{first, same}, nil, 0); len(got) != 1 || got[0].Between {
		t.Errorf("octet's changes only: %+v", got)
	}
	rw := Step{Rewind: true, Records: []Record{rec("a", u, a2)}}
	if got := PlanRewind([]Step{first, rw}, nil, 0); len(got) != 1 || got[0].Between {
		t.Errorf("after a rewind step: %+v", got)
	}
	unhashed := Step{Records: []Record{rec("a", &Image{Size: 9, Unstored: true}, a2)}}
	if got := PlanRewind([]Step{first, unhashed}, nil, 0); len(got) != 1 || got[0].Between {
		t.Errorf("an unhashed state: %+v", got)
	}
}
