package changes

import (
	"io/fs"
	"slices"
)

// State is one state of a path: absent, or content (by hash) and mode.
type State struct {
	Exists bool
	SHA256 string
	// Mode holds the permission bits; zero when unknown (an editor
	// buffer), which matches any mode.
	Mode fs.FileMode
	// Size is the content's length in bytes.
	Size int64
	// Unstored reports that the bytes are not in the store, so the state
	// cannot be restored.
	Unstored bool
	// Dir marks a directory (no content).
	Dir bool
}

// StateOf returns the state an image describes (nil = absent).
func StateOf(img *Image) State {
	if img == nil {
		return State{}
	}
	return State{Exists: true, SHA256: img.SHA256, Mode: img.Mode, Size: img.Size, Unstored: img.Unstored, Dir: img.Dir}
}

// Same reports whether s and o are the same state: both absent, or the
// same content with the same mode (an unknown mode matches any).
func (s State) Same(o State) bool {
	if s.Exists != o.Exists {
		return false
	}
	if !s.Exists {
		return true
	}
	if s.Dir || o.Dir {
		return s.Dir == o.Dir && s.Mode == o.Mode
	}
	if s.SHA256 == "" || o.SHA256 == "" {
		// Content not hashed (a file over a snapshot's limit): never
		// known to be equal.
		return false
	}
	return s.SHA256 == o.SHA256 && (s.Mode == 0 || o.Mode == 0 || s.Mode == o.Mode)
}

// Step is the changes one ledger entry recorded, in order.
type Step struct {
	Records []Record
	// Rewind marks records written before their effect whose outcome is
	// not known: a rewind's plan (recorded before any file is touched), or
	// the intended changes of a call whose result a crash lost. Some of
	// their paths may still be in their prior state, which is then
	// expected too.
	Rewind bool
}

// Restore is one path of a rewind plan: the state it must be brought to,
// and the states octet's ledger expects it to be in now (any other
// current state is a change octet did not make: a conflict).
type Restore struct {
	Path     string
	Target   State
	Expected []State
	// Between reports that the path was changed by someone other than
	// octet after the shared prefix, between two of octet's changes (or
	// before its first one there): restoring it discards that change too.
	Between bool
}

// Expects reports whether cur is one of the expected states.
func (r Restore) Expects(cur State) bool {
	return slices.ContainsFunc(r.Expected, cur.Same)
}

// Unverified reports whether an expected state of r is a file whose
// content octet did not hash (over a snapshot's limit, or holding a
// secret): whether the path changed since octet's change cannot be told.
func (r Restore) Unverified() bool {
	return slices.ContainsFunc(r.Expected, func(s State) bool { return s.Exists && !s.Dir && s.SHA256 == "" })
}

// PlanRewind returns, sorted by path, the paths a rewind from the active
// branch's state to the target entry's state must restore. active and
// target are the steps of the two branches from the root (the active one
// to its head, the target one to the entry rewound to); their first
// common steps are shared. Only paths changed after the shared prefix,
// on either branch, are planned: the target state of a path is its state
// after its last change on the target branch (or before its first change
// anywhere, when the target branch never changed it) — but, when only the
// active branch changed it after the shared prefix, its state before the
// first of those changes, which keeps a change someone else made before
// it —, the expected state
// its state after its last change on the active branch (and, when that
// change is a rewind's, which may have been cut short, its state before
// it, or its absence for a rewind replacing a file with a directory or
// the reverse).
func PlanRewind(active, target []Step, common int) []Restore {
	touched := map[string]bool{}
	for _, steps := range [][]Step{active[common:], target[common:]} {
		for _, st := range steps {
			for _, rec := range st.Records {
				touched[rec.Path] = true
			}
		}
	}
	paths := make([]string, 0, len(touched))
	for p := range touched {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	out := make([]Restore, 0, len(paths))
	for _, p := range paths {
		first := firstState(active, target, p)
		r := Restore{Path: p, Target: first}
		if t, _, ok := lastIn(target, p); ok {
			r.Target = t
		}
		from := common // where a change not octet's is looked for
		if _, _, ok := lastIn(target[common:], p); !ok {
			if before, at, ok := beforeFirst(active, common, p); ok {
				// Octet's state at the entry, or a change someone else
				// made since, before octet changed the path again: kept.
				r.Target, from = before, at+1
			}
		}
		if cur, st, ok := lastIn(active, p); ok {
			r.Expected = append(r.Expected, cur)
			if st.rewind {
				r.Expected = append(r.Expected, st.before)
				if st.before.Exists && cur.Exists && st.before.Dir != cur.Dir {
					// Replacing a file with a directory (or the reverse)
					// removes one before making the other.
					r.Expected = append(r.Expected, State{})
				}
			}
		} else {
			r.Expected = append(r.Expected, first)
		}
		r.Between = changedBetween(active, from, p)
		out = append(out, r)
	}
	return out
}

// beforeFirst returns the state of p before its first change in
// active[common:], and that change's step, when it is known (hashed)
// and not a rewind's (perhaps cut short).
func beforeFirst(active []Step, common int, p string) (State, int, bool) {
	for i := common; i < len(active); i++ {
		for _, rec := range active[i].Records {
			if rec.Path != p {
				continue
			}
			before := StateOf(rec.Before)
			return before, i, !active[i].Rewind && known(before)
		}
	}
	return State{}, 0, false
}

// changedBetween reports whether p's state before one of its changes in
// active[from:] is not the state octet's previous change of it left:
// someone else changed it in between. A rewind's step (perhaps cut
// short) and a state octet did not hash (over a limit) tell nothing.
func changedBetween(active []Step, from int, p string) bool {
	var prev *State // the state octet's last change left; nil: unknown
	for i, st := range active {
		for _, rec := range st.Records {
			if rec.Path != p {
				continue
			}
			before, after := StateOf(rec.Before), StateOf(rec.After)
			if i >= from && prev != nil && !st.Rewind && known(*prev) && known(before) && !prev.Same(before) {
				return true
			}
			prev = &after
			if st.Rewind {
				prev = nil
			}
		}
	}
	return false
}

// known reports whether s can be compared: absent, a directory, or a
// file whose content octet hashed.
func known(s State) bool { return !s.Exists || s.Dir || s.SHA256 != "" }

// firstState returns the state of p before octet first changed it: the
// prior state of its first change on the active branch, else on the
// target one.
func firstState(active, target []Step, p string) State {
	for _, steps := range [][]Step{active, target} {
		for _, st := range steps {
			for _, rec := range st.Records {
				if rec.Path == p {
					return StateOf(rec.Before)
				}
			}
		}
	}
	return State{}
}

// lastChange is the last change of a path on a branch.
type lastChange struct {
	before State
	rewind bool
}

// lastIn returns the state of p after its last change in steps.
func lastIn(steps []Step, p string) (State, lastChange, bool) {
	for i := len(steps) - 1; i >= 0; i-- {
		recs := steps[i].Records
		for j := len(recs) - 1; j >= 0; j-- {
			if recs[j].Path == p {
				return StateOf(recs[j].After), lastChange{before: StateOf(recs[j].Before), rewind: steps[i].Rewind}, true
			}
		}
	}
	return State{}, lastChange{}, false
}

// Preview returns the wire form of the change of path from before to
// after (nil = absent) without keeping any image: what a dry run shows.
func (r *Recorder) Preview(path string, before, after *File) Change {
	c := Change{Path: path, Kind: kindOf(before != nil, after != nil)}
	c.Diff, c.DiffOmitted = r.render(path, fileSide(before), fileSide(after))
	return c
}

// Content returns the bytes of state s, read back from the store (nil for
// an absent state).
func (r *Recorder) Content(s State) ([]byte, error) {
	if !s.Exists {
		return nil, nil
	}
	return r.load(&Image{SHA256: s.SHA256, Size: s.Size, Mode: s.Mode, Unstored: s.Unstored})
}
