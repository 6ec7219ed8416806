// Package changes records what octet's tools change in a workspace: one
// [Record] per changed file (its path, kind, bounded unified diff and the
// content hashes of its images before and after), and a private,
// content-addressed [Store] of those images under $OCTET_HOME, so a run's
// cumulative diff can be computed exactly across several edits of one file
// and across processes, and a rewind ([PlanRewind]) can restore what
// octet changed.
//
// A file-changing tool calls [Recorder.Stage] with the file's state before
// and after the change (bytes, or absent) before it performs the effect:
// Stage keeps both images durably (written and synced) and returns the
// Record the tool attaches to its result once the effect succeeded. Any path
// that changes a file — a direct write, or an edit routed through the
// editor — calls the same function. The package imports only the standard
// library and go-udiff; tools, agent and server import it, it imports none
// of them.
package changes

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strings"

	"github.com/aymanbagabas/go-udiff"
	"github.com/octet-agent/octet/internal/pathtext"
)

// Kind says what a change did to its path.
type Kind string

// The kinds of change, as the editor protocol names them.
const (
	Add    Kind = "add"    // the path did not exist before
	Modify Kind = "modify" // the path existed before and after
	Delete Kind = "delete" // the path does not exist after
)

// DefaultMaxDiffBytes bounds the unified diff of one change (and of one
// path of a cumulative diff): the same 256 KiB an approval prompt may
// show, so a change that could be approved is shown whole afterwards too.
// A larger diff is replaced by a one-line summary (Change.DiffOmitted),
// never cut inside a hunk.
const DefaultMaxDiffBytes = 256 << 10

// Change is the wire form of one changed path: tool_finished's and
// octet/session/diff's `changes` elements.
type Change struct {
	// Path is workspace-relative (slash-separated), or absolute for a file
	// outside the workspace.
	Path string `json:"path"`
	Kind Kind   `json:"kind"`
	// Diff is the unified diff (labels a/Path and b/Path, quoted when Path
	// does not print as itself on one line, /dev/null for an
	// absent side), or, with DiffOmitted, one summary line saying why the
	// diff is not shown.
	Diff string `json:"diff"`
	// DiffOmitted reports that Diff is a summary line, not a diff: the
	// diff was over the bound, the file is binary, or its images were not
	// kept.
	DiffOmitted bool `json:"diffOmitted,omitempty"`
	// Note says what of this change octet could not keep (an image over
	// the store's per-file limit); empty when everything was kept.
	Note string `json:"note,omitempty"`
}

// Image identifies one state of a file by content.
type Image struct {
	// SHA256 is the hex SHA-256 of the file's bytes: its name in the Store.
	SHA256 string `json:"sha256"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// Mode holds the permission bits and the set-user-ID, set-group-ID
	// and sticky bits, numbered as the kernel numbers them (ModeBits);
	// zero when unknown (an editor buffer).
	Mode fs.FileMode `json:"mode,omitempty"`
	// Unstored reports that the bytes are not in the Store (over its
	// per-file limit, or no store was configured).
	Unstored bool `json:"unstored,omitempty"`
	// Dir marks a directory (a bash call's mkdir or rm -r): no content,
	// SHA256 and Size are empty.
	Dir bool `json:"dir,omitempty"`
}

// ModeBits are the bits of a mode octet records and restores: the
// permission bits and, as the kernel numbers them (0o4000, 0o2000,
// 0o1000: bits Go's fs.FileMode leaves unused), set-user-ID, set-group-ID
// and sticky, so that a command's chmod u+s is a change a rewind takes
// back. Printed in octal they read as chmod(1) takes them.
const ModeBits fs.FileMode = 0o7777

// Record is one change as the session ledger keeps it (a tool result's
// details under [DetailsKey]): the wire form plus the images on either
// side; a nil Before or After means the path was absent.
type Record struct {
	Change
	Before *Image `json:"before,omitempty"`
	After  *Image `json:"after,omitempty"`
}

// File is one state of a file handed to [Recorder.Stage]; a nil *File
// means the path is absent.
type File struct {
	Data []byte
	Mode fs.FileMode // ModeBits; zero when unknown
}

// Recorder stages file changes: it keeps the images in Store and renders
// bounded, redacted diffs. The zero value (or a nil *Recorder) keeps no
// images and renders diffs up to DefaultMaxDiffBytes.
type Recorder struct {
	// Store keeps the images; nil keeps none (cumulative diffs of a path
	// changed more than once are then unavailable).
	Store *Store
	// Redact, when set, replaces secret values in rendered diffs.
	Redact func(string) string
	// MaxDiffBytes bounds one diff (DefaultMaxDiffBytes when zero).
	MaxDiffBytes int
}

// Stage records the change of path from before to after (nil = absent).
// It writes and syncs both images to the store first, so call it before
// performing the effect and attach the Record only when the effect
// succeeded. ok is false when nothing changes (same bytes and mode, or
// absent on both sides). An error means an image could not be kept; the
// caller should then not perform the effect.
//
// The images stay pinned (in this process they do not expire, whatever
// else is written) until Release: until then no intent or checkpoint
// names them. Release once the intent naming them is durable, the
// checkpoint is committed, or the change is abandoned.
func (r *Recorder) Stage(path string, before, after *File) (rec Record, ok bool, err error) {
	if before == nil && after == nil {
		return Record{}, false, nil
	}
	if before != nil && after != nil && before.Mode == after.Mode && bytes.Equal(before.Data, after.Data) {
		return Record{}, false, nil
	}
	rec.Path = path
	rec.Kind = kindOf(before != nil, after != nil)
	if rec.Before, err = r.keep(before); err != nil {
		return Record{}, false, fmt.Errorf("keep the prior content of %s: %w", path, err)
	}
	r.pin(rec.Before) // writing the new content must not expire it
	if rec.After, err = r.keep(after); err != nil {
		r.unpin(rec.Before)
		return Record{}, false, fmt.Errorf("keep the new content of %s: %w", path, err)
	}
	r.pin(rec.After)
	rec.Diff, rec.DiffOmitted = r.render(path, fileSide(before), fileSide(after))
	rec.Note = r.unstoredNote(rec.Before, rec.After)
	return rec, true, nil
}

// Describe returns the record of path changing from image before to
// image after (nil = absent), both already kept in the store (or marked
// Unstored), given their bytes (nil for a directory, an absent side, or
// an image that was not kept): what a bash call's snapshots found.
func (r *Recorder) Describe(path string, before, after *Image, old, updated []byte) Record {
	rec := Record{Change: Change{Path: path, Kind: kindOf(before != nil, after != nil)}, Before: before, After: after}
	switch {
	case isDir(before) || isDir(after):
		rec.Diff, rec.DiffOmitted = dirSummary(path, before, after), true
	case (before != nil && before.Unstored) || (after != nil && after.Unstored):
		rec.Diff = fmt.Sprintf("diff of %s omitted: its content was not kept (%s → %s)", pathtext.Quote(path), imageSize(before), imageSize(after))
		rec.DiffOmitted = true
	default:
		rec.Diff, rec.DiffOmitted = r.render(path, imageSide(before, old), imageSide(after, updated))
	}
	rec.Note = r.unstoredNote(rec.Before, rec.After)
	return rec
}

func isDir(img *Image) bool { return img != nil && img.Dir }

// dirSummary is the summary line of a change that involves a directory.
func dirSummary(path string, before, after *Image) string {
	switch {
	case before == nil:
		return fmt.Sprintf("directory %s created (mode %04o)", pathtext.Quote(path), after.Mode)
	case after == nil:
		return fmt.Sprintf("directory %s removed", pathtext.Quote(path))
	case before.Dir && after.Dir:
		return fmt.Sprintf("mode of directory %s changed: %04o → %04o", pathtext.Quote(path), before.Mode, after.Mode)
	case before.Dir:
		return fmt.Sprintf("directory %s replaced by a file (%d bytes)", pathtext.Quote(path), after.Size)
	}
	return fmt.Sprintf("file %s (%d bytes) replaced by a directory", pathtext.Quote(path), before.Size)
}

func imageSize(img *Image) string {
	if img == nil {
		return "absent"
	}
	return fmt.Sprintf("%d bytes", img.Size)
}

// Release unpins the images Stage kept for recs (see Stage).
func (r *Recorder) Release(recs ...Record) {
	for _, rec := range recs {
		r.unpin(rec.Before)
		r.unpin(rec.After)
	}
}

// pin and unpin hold one stored image in r's store.
func (r *Recorder) pin(img *Image) {
	if r != nil && r.Store != nil && img != nil && !img.Unstored && !img.Dir {
		r.Store.Pin([]string{img.SHA256})
	}
}

func (r *Recorder) unpin(img *Image) {
	if r != nil && r.Store != nil && img != nil && !img.Unstored && !img.Dir {
		r.Store.Unpin([]string{img.SHA256})
	}
}

// keep stores f's bytes and describes them; nil stays nil.
func (r *Recorder) keep(f *File) (*Image, error) {
	if f == nil {
		return nil, nil
	}
	sum := sha256.Sum256(f.Data)
	img := &Image{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(f.Data)), Mode: f.Mode & ModeBits}
	var store *Store
	if r != nil {
		store = r.Store
	}
	if store == nil {
		img.Unstored = true
		return img, nil
	}
	stored, err := store.put(img.SHA256, f.Data)
	if err != nil {
		return nil, err
	}
	img.Unstored = !stored
	return img, nil
}

// unstoredNote says which images over the store's limit were not kept.
func (r *Recorder) unstoredNote(before, after *Image) string {
	if r == nil || r.Store == nil {
		return ""
	}
	var which []string
	if before != nil && before.Unstored && !before.Dir {
		which = append(which, fmt.Sprintf("prior content (%d bytes)", before.Size))
	}
	if after != nil && after.Unstored && !after.Dir {
		which = append(which, fmt.Sprintf("new content (%d bytes)", after.Size))
	}
	if len(which) == 0 {
		return ""
	}
	return fmt.Sprintf("the %s is over the change store's %d-byte per-file limit and was not kept: a cumulative diff (or rewind) that needs it is unavailable",
		strings.Join(which, " and "), r.Store.MaxBlobBytes())
}

// maxDiff returns the diff bound.
func (r *Recorder) maxDiff() int {
	if r == nil || r.MaxDiffBytes <= 0 {
		return DefaultMaxDiffBytes
	}
	return r.MaxDiffBytes
}

// side is one side of a change as render shows it: the bytes, whether
// the path exists, and its mode (zero when unknown or absent).
type side struct {
	data    []byte
	present bool
	mode    fs.FileMode
}

// fileSide is the side f describes (nil: absent).
func fileSide(f *File) side {
	if f == nil {
		return side{}
	}
	return side{data: f.Data, present: true, mode: f.Mode & ModeBits}
}

// imageSide is the side of image img (nil: absent) with bytes data.
func imageSide(img *Image, data []byte) side {
	if img == nil {
		return side{}
	}
	return side{data: data, present: true, mode: img.Mode}
}

// render returns the bounded, redacted unified diff of a → b, or a
// summary line and true when it cannot be shown whole.
func (r *Recorder) render(path string, a, b side) (string, bool) {
	old, updated, hadOld, hasNew := a.data, b.data, a.present, b.present
	limit := r.maxDiff()
	sizes := fmt.Sprintf("%s → %s", sizeText(old, hadOld), sizeText(updated, hasNew))
	if isBinary(old) || isBinary(updated) {
		return fmt.Sprintf("binary file %s changed (%s); no text diff", pathtext.Quote(path), sizes), true
	}
	if len(updated)-len(old) > limit || len(old)-len(updated) > limit {
		// Every added or removed byte is in the diff: over the bound
		// whatever its shape, so spare computing it.
		return fmt.Sprintf("diff of %s omitted: larger than the %d-byte bound (%s)", pathtext.Quote(path), limit, sizes), true
	}
	from, to := pathtext.Label("a/", path), pathtext.Label("b/", path)
	if !hadOld {
		from = "/dev/null"
	}
	if !hasNew {
		to = "/dev/null"
	}
	d := unified(from, to, string(old), string(updated))
	if r != nil && r.Redact != nil {
		d = r.Redact(d)
	}
	if len(d) > limit {
		added, removed := countLines(d)
		return fmt.Sprintf("diff of %s omitted: %d bytes, over the %d-byte bound (+%d -%d lines; %s)", pathtext.Quote(path), len(d), limit, added, removed, sizes), true
	}
	if d == "" {
		// Only the mode changed.
		if a.mode != 0 && b.mode != 0 {
			return fmt.Sprintf("mode of %s changed: %04o → %04o; content unchanged", pathtext.Quote(path), a.mode, b.mode), true
		}
		return fmt.Sprintf("mode of %s changed; content unchanged", pathtext.Quote(path)), true
	}
	return d, false
}

// countLines counts the added and removed lines of a unified diff.
func countLines(d string) (added, removed int) {
	for i, line := range strings.Split(d, "\n") {
		if i < 2 || line == "" { // the ---/+++ header
			continue
		}
		switch line[0] {
		case '+':
			added++
		case '-':
			removed++
		}
	}
	return added, removed
}

func sizeText(data []byte, exists bool) string {
	if !exists {
		return "absent"
	}
	return fmt.Sprintf("%d bytes", len(data))
}

func kindOf(before, after bool) Kind {
	switch {
	case !before:
		return Add
	case !after:
		return Delete
	}
	return Modify
}

// isBinary reports whether data looks binary: a NUL byte in its first
// 8 KiB, the heuristic git uses.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8<<10)], 0) >= 0
}

// unified is udiff.Unified made cheap for the common case of a small
// change in a large file: the lines the two sides share at the start and
// at the end are not diffed (their edits would be empty anyway), only
// the middle, whose edits are then rendered against the whole old text
// (so hunk line numbers and context are exactly udiff.Unified's).
func unified(from, to, old, updated string) string {
	p := 0
	for p < len(old) && p < len(updated) && old[p] == updated[p] {
		p++
	}
	p = strings.LastIndexByte(old[:p], '\n') + 1 // back to a line start
	s := 0
	for s < len(old)-p && s < len(updated)-p && old[len(old)-1-s] == updated[len(updated)-1-s] {
		s++
	}
	for s > 0 && !(lineStart(old, len(old)-s, p) && lineStart(updated, len(updated)-s, p)) {
		s--
	}
	edits := udiff.Lines(old[p:len(old)-s], updated[p:len(updated)-s])
	for i := range edits {
		edits[i].Start += p
		edits[i].End += p
	}
	d, err := udiff.ToUnified(from, to, old, edits, udiff.DefaultContextLines)
	if err != nil {
		// Cannot happen (the edits are consistent); never show less.
		return udiff.Unified(from, to, old, updated)
	}
	return d
}

// lineStart reports whether offset i of text begins a line (or is the
// end of the shared prefix, which does).
func lineStart(text string, i, prefix int) bool {
	return i == prefix || text[i-1] == '\n'
}
