package tools

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"strings"

	"github.com/aymanbagabas/go-udiff"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/internal/fsroot"
)

//go:embed apply_patch.md
var applyPatchDescription string

var applyPatchSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "input": {"type": "string", "description": "The whole patch, from *** Begin Patch to *** End Patch."}
  },
  "required": ["input"],
  "additionalProperties": false
}`)

// ApplyPatchTool is the built-in apply_patch tool: one patch in the
// format Codex-family models are trained on (see patch.go) that adds,
// updates, deletes and moves several files as one effect. It is planned
// whole before anything is written (every hunk applied in memory, every
// file checked against what the model last read), asks one approval that
// shows every file's whole diff, and commits file by file through the
// same paths as edit and write (the editor's buffer for an open
// document, fsroot's compare-before-commit write otherwise), restoring
// the files it already changed when a later one fails.
type ApplyPatchTool struct {
	cfg   Config
	shown *shownStates[map[string]fileState]
}

var (
	_ Tool      = (*ApplyPatchTool)(nil)
	_ Previewer = (*ApplyPatchTool)(nil)
)

// NewApplyPatch constructs the apply_patch tool.
func NewApplyPatch(cfg Config) (*ApplyPatchTool, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	return &ApplyPatchTool{cfg: cfg, shown: newShownStates[map[string]fileState]()}, nil
}

// Name returns "apply_patch".
func (t *ApplyPatchTool) Name() string { return "apply_patch" }

// Description returns the embedded apply_patch.md.
func (t *ApplyPatchTool) Description() string { return applyPatchDescription }

// Schema returns the apply_patch argument schema.
func (t *ApplyPatchTool) Schema() json.RawMessage { return applyPatchSchema }

// Concurrency reports Sequential: mutations are barriers.
func (t *ApplyPatchTool) Concurrency() Concurrency { return Sequential }

// ReplaySafety reports ReplayUnsafe: an interrupted patch is indeterminate.
func (t *ApplyPatchTool) ReplaySafety() ReplaySafety { return ReplayUnsafe }

// parse decodes the arguments and parses the patch; every path it names
// must be one the file tools accept.
func (t *ApplyPatchTool) parse(raw json.RawMessage) ([]patchFile, error) {
	var a struct {
		Input *string `json:"input"`
	}
	if err := decodeBuiltinArgs(raw, &a); err != nil {
		return nil, err
	}
	if a.Input == nil {
		return nil, errors.New("missing required argument input")
	}
	files, err := parsePatch(*a.Input)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		for _, p := range []string{f.path, f.moveTo} {
			if p == "" {
				continue
			}
			if err := t.cfg.pathArg(p); err != nil {
				return nil, patchErrorf(f.line, "%v", err)
			}
		}
	}
	return files, nil
}

// Classify returns WorkspaceMutation, or HostMutation for every call when
// external paths are allowed (as edit and write do).
func (t *ApplyPatchTool) Classify(args json.RawMessage) (Effect, error) {
	if _, err := t.parse(args); err != nil {
		return Unknown, err
	}
	return t.cfg.mutationEffect(), nil
}

// patchChange is one file section of a patch, planned: what its target
// holds now and what it will hold.
type patchChange struct {
	f  *patchFile
	tg *target
	// dest is a move's destination (nil otherwise).
	dest *target
	// doc is the open editor document an update goes through (nil: the
	// disk); for a deletion or a move it is the buffer that must equal
	// the disk.
	doc *Document
	// old is the current content (nil for an added file), updated the
	// new content (nil for a deletion).
	old, updated []byte
	// disk is what a removal compares the file with before unlinking.
	disk fsroot.Prior
	mode fs.FileMode
}

// patchPlan is a whole patch, planned.
type patchPlan struct {
	changes []patchChange
	// states are what each target held, by absolute path, for binding an
	// approval's diff to the state it was computed against.
	states map[string]fileState
	// binding names the editor documents the diff was computed against.
	binding []string
	// principal is the agent making the call (FileTracker).
	principal string
}

func (pl *patchPlan) close() {
	for _, c := range pl.changes {
		if c.tg != nil {
			c.tg.close()
		}
		if c.dest != nil {
			c.dest.close()
		}
	}
}

// plan reads every target and computes every file's new content for
// principal (the agent making the call). A non-empty refusal is the
// model-visible reason the patch cannot be applied; nothing may be
// written then.
func (t *ApplyPatchTool) plan(files []patchFile, principal string) (pl *patchPlan, refusal string) {
	pl = &patchPlan{states: map[string]fileState{}, principal: principal}
	for i := range files {
		c, why := t.planFile(&files[i], pl)
		pl.changes = append(pl.changes, c)
		if why != "" {
			return pl, why
		}
	}
	return pl, ""
}

// planFile plans one section, recording the states it read in pl.
func (t *ApplyPatchTool) planFile(f *patchFile, pl *patchPlan) (c patchChange, refusal string) {
	c.f = f
	tg, err := t.cfg.open(f.path)
	if err != nil {
		return c, fileErrorText(f.path, err)
	}
	c.tg = tg
	data, doc, err := t.cfg.readForChange(tg)
	pl.record(tg, data, doc, err)
	if f.op == opAdd {
		switch {
		case err == nil:
			return c, fmt.Sprintf("%s already exists: update it with *** Update File (read it first), or delete it in an earlier call", tg.display)
		case !fsroot.IsNotExist(err):
			return c, fileErrorText(tg.display, err)
		}
		c.updated, c.mode = []byte(f.content), newFileMode
		return c, sizeRefusal(tg.display, c.updated)
	}
	if err != nil {
		if fsroot.IsNotExist(err) && f.op == opUpdate {
			return c, fmt.Sprintf("%s: no such file; create it with *** Add File", tg.display)
		}
		return c, fileErrorText(tg.display, err)
	}
	if t.cfg.Files.stale(pl.principal, tg.key, data) {
		return c, tg.display + ": " + errChangedSinceRead
	}
	c.old, c.doc, c.mode = data, doc, tg.mode()
	c.disk = fsroot.PriorOf(data)
	if f.op == opDelete || f.moveTo != "" {
		if why := t.sameOnDisk(&c); why != "" {
			return c, why
		}
	}
	if f.op == opDelete {
		return c, ""
	}
	updated, err := applyHunks(tg.display, string(data), f.hunks)
	if err != nil {
		return c, err.Error()
	}
	c.updated = []byte(updated)
	if f.moveTo != "" {
		return c, t.planMove(&c, pl)
	}
	return c, sizeRefusal(tg.display, c.updated)
}

// sameOnDisk refuses removing a file whose open editor buffer differs
// from the disk: octet removes the file, never the buffer, so unsaved
// text would be left behind with nothing to save it to.
func (t *ApplyPatchTool) sameOnDisk(c *patchChange) string {
	if c.doc == nil {
		return ""
	}
	disk, _, err := c.tg.root.ReadFile(c.tg.rel, MaxFileBytes)
	if err != nil {
		return fileErrorText(c.tg.display, err)
	}
	if !bytes.Equal(disk, c.doc.Text) {
		return fmt.Sprintf("%s has unsaved changes in the editor: ask the user to save or revert it, then try again", c.tg.display)
	}
	c.disk, c.doc = fsroot.PriorOf(disk), nil
	return ""
}

// planMove opens a move's destination, which must not exist.
func (t *ApplyPatchTool) planMove(c *patchChange, pl *patchPlan) string {
	dest, err := t.cfg.open(c.f.moveTo)
	if err != nil {
		return fileErrorText(c.f.moveTo, err)
	}
	c.dest = dest
	data, doc, err := t.cfg.readForChange(dest)
	pl.record(dest, data, doc, err)
	switch {
	case err == nil:
		return fmt.Sprintf("cannot move %s to %s: %s already exists (delete it in an earlier call, or update it instead)", c.tg.display, dest.display, dest.display)
	case !fsroot.IsNotExist(err):
		return fileErrorText(dest.display, err)
	}
	return sizeRefusal(dest.display, c.updated)
}

// record keeps what reading tg found, for the approval binding.
func (pl *patchPlan) record(tg *target, data []byte, doc *Document, err error) {
	st := stateOf(data, err)
	if doc != nil {
		st = editorState(*doc)
		pl.binding = append(pl.binding, editorBinding(tg, *doc))
	}
	pl.states[tg.key] = st
}

func sizeRefusal(display string, data []byte) string {
	if len(data) > MaxFileBytes {
		return fmt.Sprintf("the patched %s would exceed the %d MiB file limit", display, MaxFileBytes>>20)
	}
	return ""
}

// changedFromShown reports whether any target's state differs from what
// the approval's diff was computed against.
func changedFromShown(shown, cur map[string]fileState) bool {
	if len(shown) != len(cur) {
		return true
	}
	for k, st := range cur {
		s, ok := shown[k]
		if !ok || s.changedFrom(st) {
			return true
		}
	}
	return false
}

// Preview shows every file's whole diff (and a line per file saying what
// happens to it), without writing. Called for an approval, it remembers
// the state of every target, so Execute of the same call applies exactly
// this patch or nothing.
func (t *ApplyPatchTool) Preview(ctx context.Context, args json.RawMessage) (Preview, error) {
	files, err := t.parse(args)
	if err != nil {
		return Preview{}, err
	}
	pl, refusal := t.plan(files, previewPrincipal(ctx))
	defer pl.close()
	t.shown.remember(previewCallID(ctx), args, maps.Clone(pl.states))
	title := patchTitle(files)
	if refusal != "" {
		return Preview{Title: title, Detail: refusal}, nil
	}
	var detail []string
	var diff strings.Builder
	claimed := map[string]bool{} // the directories an earlier change creates
	for _, c := range pl.changes {
		detail = append(detail, c.summary(claimed))
		diff.WriteString(c.diff())
		if diff.Len() > MaxPreviewDiff {
			return Preview{}, fmt.Errorf("apply_patch: %w", ErrPreviewTooLarge)
		}
	}
	return Preview{Title: title, Detail: strings.Join(detail, "\n"), Diff: diff.String(), Binding: strings.Join(pl.binding, "\n")}, nil
}

// patchTitle is the approval's one-line title: the files, when they fit.
func patchTitle(files []patchFile) string {
	if len(files) == 1 {
		return "apply_patch: " + files[0].op.String() + " " + shownPath(files[0].path)
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = shownPath(f.path)
	}
	title := fmt.Sprintf("apply_patch: %d files (%s)", len(files), strings.Join(names, ", "))
	if len(title) > MaxPreviewTitle/2 {
		title = fmt.Sprintf("apply_patch: %d files", len(files))
	}
	return title
}

// summary is the change's line in the approval's detail, with the
// directories it creates that no change before it (claimed) creates.
func (c *patchChange) summary(claimed map[string]bool) string {
	name := shownPath(c.tg.display)
	switch {
	case c.f.op == opAdd:
		return fmt.Sprintf("add %s (%d bytes)", name, len(c.updated)) + c.creating(c.tg, claimed)
	case c.f.op == opDelete:
		return fmt.Sprintf("delete %s (%d bytes)", name, len(c.old))
	case c.dest != nil && bytes.Equal(c.old, c.updated):
		return fmt.Sprintf("move %s to %s (content unchanged)", name, shownPath(c.dest.display)) + c.creating(c.dest, claimed)
	case c.dest != nil:
		return fmt.Sprintf("move %s to %s and change it (%d -> %d bytes)", name, shownPath(c.dest.display), len(c.old), len(c.updated)) + c.creating(c.dest, claimed)
	}
	s := fmt.Sprintf("update %s (%d -> %d bytes)", name, len(c.old), len(c.updated))
	if c.doc != nil {
		s += "; " + editorDetail(*c.doc)
	}
	return s
}

// creating is what the summary says of the directories writing tg, the
// file c adds or moves to, creates (none through an editor buffer).
func (c *patchChange) creating(tg *target, claimed map[string]bool) string {
	if c.doc != nil && tg == c.tg {
		return ""
	}
	return creatingText(tg, newDirs(tg, claimed))
}

// diff is the change's whole unified diff.
func (c *patchChange) diff() string {
	from, to := c.tg.display, c.tg.display
	switch {
	case c.f.op == opAdd:
		from = ""
	case c.f.op == opDelete:
		to = ""
	case c.dest != nil:
		to = c.dest.display
	}
	return udiff.Unified(diffLabel("a/", from), diffLabel("b/", to), string(c.old), string(c.updated))
}

// Execute applies the patch. When an approval preview was shown for this
// exact call, every target must still hold what that diff was computed
// against; otherwise nothing is written. A file that fails to commit
// restores the files the patch already changed.
func (t *ApplyPatchTool) Execute(ctx context.Context, inv Invocation) (Result, error) {
	shown, bound := t.shown.take(inv.CallID, inv.Arguments)
	files, err := t.parse(inv.Arguments)
	if err != nil {
		return errorResult(err.Error() + "; nothing was written"), nil
	}
	pl, refusal := t.plan(files, inv.Principal)
	defer pl.close()
	if bound && changedFromShown(shown, pl.states) {
		return errorResult(errChangedSinceShown), nil
	}
	if refusal != "" {
		return errorResult(refusal + "; nothing was written (the patch applies whole or not at all)"), nil
	}
	watch := t.cfg.watchDiagnostics()
	steps, recs, err := t.steps(pl, bound, watch)
	if err != nil {
		return errorResult(stageErrorText(err)), nil
	}
	if msg := t.cfg.recordIntent(inv, recs); msg != "" {
		return errorResult(msg), nil
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if res, failed := runSteps(ctx, steps); failed {
		return res, nil
	}
	for _, c := range pl.changes {
		switch {
		case c.dest != nil:
			t.cfg.Files.record(inv.Principal, c.dest.key, c.updated)
		case c.updated != nil:
			t.cfg.Files.record(inv.Principal, c.tg.key, c.updated)
		}
	}
	return Result{Text: patchSummary(pl) + watch.note(ctx), Details: map[string]any{"files": patchDetails(pl)}, Changes: recs}, nil
}

// patchStep is one commit of a patch and how to take it back.
type patchStep struct {
	do, undo func(ctx context.Context) string // "" on success, else why not
	recs     []changes.Record
	display  string
}

// steps stages every change's images and returns the commits in patch
// order (a move is two: write the destination, remove the source).
func (t *ApplyPatchTool) steps(pl *patchPlan, bound bool, watch *diagWatch) ([]patchStep, []changes.Record, error) {
	var steps []patchStep
	var all []changes.Record
	claimed := map[string]bool{} // the directories an earlier step creates
	// stage keeps one change's images; a file created on disk is preceded
	// by the directories writing it creates.
	stage := func(tg *target, doc *Document, before, after *changes.File) ([]changes.Record, []string, error) {
		recs, err := t.cfg.stageFile(tg.display, before, after)
		var dirs []string
		if err == nil && before == nil && after != nil && doc == nil {
			dirs = newDirs(tg, claimed)
			recs = append(t.cfg.dirRecords(tg, dirs), recs...)
		}
		all = append(all, recs...)
		return recs, dirs, err
	}
	for i := range pl.changes {
		c := &pl.changes[i]
		var before, after *changes.File
		if c.old != nil {
			before = &changes.File{Data: c.old, Mode: c.mode}
		}
		if c.updated != nil {
			after = &changes.File{Data: c.updated, Mode: c.mode}
		}
		switch {
		case c.dest != nil:
			recs, dirs, err := stage(c.dest, nil, nil, after)
			if err != nil {
				t.cfg.Changes.Release(all...)
				return nil, nil, err
			}
			steps = append(steps, t.writeStep(c.dest, nil, nil, c.updated, c.mode, bound, recs, dirs, watch))
			if recs, _, err = stage(c.tg, nil, before, nil); err != nil {
				t.cfg.Changes.Release(all...)
				return nil, nil, err
			}
			steps = append(steps, t.removeStep(c, bound, recs))
		default:
			recs, dirs, err := stage(c.tg, c.doc, before, after)
			if err != nil {
				t.cfg.Changes.Release(all...)
				return nil, nil, err
			}
			if c.f.op == opDelete {
				steps = append(steps, t.removeStep(c, bound, recs))
			} else {
				steps = append(steps, t.writeStep(c.tg, c.doc, c.old, c.updated, c.mode, bound, recs, dirs, watch))
			}
		}
	}
	return steps, all, nil
}

// writeStep writes updated over old (nil: absent) at tg, through the
// editor when doc is set (followed by watch); its undo writes old back
// (or removes the file, and the directories created, parents first, that
// writing it created) if the file still holds what the step wrote.
func (t *ApplyPatchTool) writeStep(tg *target, doc *Document, old, updated []byte, mode fs.FileMode, bound bool, recs []changes.Record, created []string, watch *diagWatch) patchStep {
	prior := fsroot.Absent
	opts := fsroot.WriteOptions{CreateParents: old == nil, Mode: mode}
	if old != nil {
		prior, opts.Mode = fsroot.PriorOf(old), 0 // an update keeps the file's mode
	}
	return patchStep{
		display: tg.display, recs: recs,
		do: func(ctx context.Context) string {
			return t.cfg.commitWatched(ctx, watch, tg, doc, updated, prior, opts, bound)
		},
		undo: func(ctx context.Context) string {
			if doc != nil {
				now, ok := t.cfg.Documents.Document(tg.key)
				if !ok || !bytes.Equal(now.Text, updated) {
					return "its editor buffer changed since"
				}
				return t.cfg.commitChange(ctx, tg, &now, old, fsroot.PriorOf(updated), fsroot.WriteOptions{}, false)
			}
			if old == nil {
				if err := tg.root.Remove(tg.rel, fsroot.PriorOf(updated)); err != nil {
					return fileErrorText(tg.display, err)
				}
				removeDirs(tg, created)
				return ""
			}
			return t.cfg.commitChange(ctx, tg, nil, old, fsroot.PriorOf(updated), fsroot.WriteOptions{}, false)
		},
	}
}

// removeStep removes c's file (as it was on disk when planned); its undo
// writes it back with its mode.
func (t *ApplyPatchTool) removeStep(c *patchChange, bound bool, recs []changes.Record) patchStep {
	tg, old, disk, mode := c.tg, c.old, c.disk, c.mode
	return patchStep{
		display: tg.display, recs: recs,
		do: func(context.Context) string {
			if err := tg.root.Remove(tg.rel, disk); err != nil {
				return commitErrorText(tg.display, err, bound)
			}
			return ""
		},
		undo: func(ctx context.Context) string {
			return t.cfg.commitChange(ctx, tg, nil, old, fsroot.Absent, fsroot.WriteOptions{CreateParents: true, Mode: mode}, false)
		},
	}
}

// runSteps commits steps in order. When one fails it takes back the ones
// before it, newest first, and returns the failure: nothing changed, or
// (when a file could not be restored) which files keep the patch's
// change, with their records so a rewind can still take them back.
func runSteps(ctx context.Context, steps []patchStep) (Result, bool) {
	for i, s := range steps {
		msg := s.do(ctx)
		if msg == "" {
			continue
		}
		var kept []changes.Record
		var notes []string
		undoCtx := context.WithoutCancel(ctx)
		for j := i - 1; j >= 0; j-- {
			if why := steps[j].undo(undoCtx); why != "" {
				kept = append(kept, steps[j].recs...)
				notes = append(notes, fmt.Sprintf("%s (%s)", steps[j].display, why))
			}
		}
		if len(notes) == 0 {
			text := msg + "; nothing was written (the patch applies whole or not at all)"
			if i > 0 {
				text = msg + "; the files the patch had already changed were restored, so nothing is changed"
			}
			return errorResult(text), true
		}
		res := errorResult(fmt.Sprintf("%s; the patch stopped there, and octet could not restore %s: they keep the patch's change (a rewind of this call takes it back)", msg, strings.Join(notes, ", ")))
		res.Changes = kept
		return res, true
	}
	return Result{}, false
}

// patchSummary is the model-visible result of an applied patch.
func patchSummary(pl *patchPlan) string {
	var parts []string
	for _, c := range pl.changes {
		switch {
		case c.f.op == opAdd:
			parts = append(parts, "added "+c.tg.display)
		case c.f.op == opDelete:
			parts = append(parts, "deleted "+c.tg.display)
		case c.dest != nil:
			parts = append(parts, "moved "+c.tg.display+" to "+c.dest.display)
		default:
			parts = append(parts, "updated "+c.tg.display)
		}
	}
	return "Applied the patch: " + strings.Join(parts, ", ") + "."
}

// patchDetails are the result's details: each file and what happened.
func patchDetails(pl *patchPlan) []map[string]any {
	out := make([]map[string]any, 0, len(pl.changes))
	for _, c := range pl.changes {
		d := map[string]any{"path": c.tg.display, "change": c.f.op.String()}
		if c.dest != nil {
			d["change"], d["to"] = "move", c.dest.display
		}
		out = append(out, d)
	}
	return out
}
