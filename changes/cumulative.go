package changes

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// DetailsKey is the key under which a tool result's details in the session
// ledger hold its []Record.
const DetailsKey = "changes"

// IntentKey marks details whose changes were recorded as intended before
// the effect, by a call whose result was lost (crash recovery): each path
// may be in its state before or after the change.
const IntentKey = "intended"

// CannotUndoKey is the key under which a checkpointed call's details hold
// what a rewind of it cannot take back ([]string).
const CannotUndoKey = "cannotUndo"

// DefaultMaxTotalDiffBytes bounds the diffs of one cumulative answer
// (octet/session/diff): once the paths so far carry this much, the diffs of
// the rest are replaced by summary lines.
const DefaultMaxTotalDiffBytes = 8 << 20

// FromDetails returns the records a tool result's details hold under
// DetailsKey: the []Record a tool produced (in this process) or its JSON
// decoding (a reopened ledger). Details without changes give nil; a value
// that does not decode is an error.
func FromDetails(details map[string]any) ([]Record, error) {
	v, ok := details[DetailsKey]
	if !ok || v == nil {
		return nil, nil
	}
	if recs, ok := v.([]Record); ok {
		return recs, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("decode recorded changes: %w", err)
	}
	var recs []Record
	if err := json.Unmarshal(raw, &recs); err != nil {
		return nil, fmt.Errorf("decode recorded changes: %w", err)
	}
	return recs, nil
}

// Cumulative folds the records of one run, in the order their changes were
// made, into one change per path (sorted by path): from the path's state
// before its first change to its state after its last. A path whose net
// state did not change (restored, or created and deleted) is left out. A
// path changed once keeps its recorded diff; a path changed more often
// gets the diff of the stored images, or a summary line when an image is
// not in the store. The diffs of all paths together are bounded by
// DefaultMaxTotalDiffBytes.
func (r *Recorder) Cumulative(recs []Record) []Change {
	type span struct {
		first, last Record
		n           int
	}
	byPath := map[string]*span{}
	var paths []string
	for _, rec := range recs {
		sp := byPath[rec.Path]
		if sp == nil {
			sp = &span{first: rec}
			byPath[rec.Path] = sp
			paths = append(paths, rec.Path)
		}
		sp.last = rec
		sp.n++
	}
	slices.Sort(paths)
	out := make([]Change, 0, len(paths))
	total := 0
	for _, p := range paths {
		sp := byPath[p]
		var c Change
		if sp.n == 1 {
			c = sp.first.Change
		} else {
			var same bool
			c, same = r.fold(p, sp.first.Before, sp.last.After)
			if same {
				continue
			}
		}
		if !c.DiffOmitted && total+len(c.Diff) > DefaultMaxTotalDiffBytes {
			c.Diff = fmt.Sprintf("diff of %s omitted: this answer's diffs reached the %d-byte bound", p, DefaultMaxTotalDiffBytes)
			c.DiffOmitted = true
		}
		total += len(c.Diff)
		out = append(out, c)
	}
	return out
}

// fold returns the change of path from image before to image after (nil
// = absent), or same when the two states are equal.
func (r *Recorder) fold(path string, before, after *Image) (c Change, same bool) {
	switch {
	case before == nil && after == nil:
		return Change{}, true
	case before != nil && after != nil && before.SHA256 != "" && before.SHA256 == after.SHA256 && before.Mode == after.Mode && before.Dir == after.Dir:
		return Change{}, true
	}
	c = Change{Path: path, Kind: kindOf(before != nil, after != nil)}
	if isDir(before) || isDir(after) {
		c.Diff, c.DiffOmitted = dirSummary(path, before, after), true
		return c, false
	}
	old, errOld := r.load(before)
	updated, errNew := r.load(after)
	if err := errors.Join(errOld, errNew); err != nil {
		c.Diff = fmt.Sprintf("cumulative diff of %s unavailable: %v", path, err)
		c.DiffOmitted = true
		return c, false
	}
	c.Diff, c.DiffOmitted = r.render(path, imageSide(before, old), imageSide(after, updated))
	return c, false
}

// load reads an image's bytes from the store (nil for an absent side).
func (r *Recorder) load(img *Image) ([]byte, error) {
	switch {
	case img == nil:
		return nil, nil
	case img.Unstored:
		return nil, fmt.Errorf("an image (%d bytes) was not kept by the change store", img.Size)
	case r == nil || r.Store == nil:
		return nil, errors.New("no change store is configured")
	}
	return r.Store.Get(img.SHA256)
}
