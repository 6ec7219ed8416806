package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/octet-agent/octet/internal/fsroot"
)

// Documents is the editor's view of the workspace: the text of the
// documents open in the editor (its buffers, unsaved changes included)
// and a way to change them that leaves the buffer, its undo history and
// its dirty state to the editor. The server implements it over LSP
// document sync and workspace/applyEdit; the tools only see this
// interface (they never import the server). Paths are absolute and clean.
// Implementations must be safe for concurrent use.
type Documents interface {
	// Document returns the open document at path; ok is false when no
	// open document is tracked there (closed, outside the workspace, or
	// over the overlay's bounds), and the tools then use the disk.
	Document(path string) (doc Document, ok bool)
	// AppliesEdits reports whether the editor applies edits itself. When
	// it does not, edit and write keep writing the disk (and compute
	// their change against the disk).
	AppliesEdits() bool
	// Apply asks the editor to change the document at path from
	// base.Text, as of base.Version, to updated. It returns once the
	// editor has applied the change, or an error whose text the model
	// sees (the document changed since base, the editor refused, or it
	// did not answer in time): never a write behind the editor's buffer.
	Apply(ctx context.Context, path string, base Document, updated []byte) error
}

// Document is one open editor document as of one version.
type Document struct {
	// Text is the document's full content. It must not be modified.
	Text []byte
	// Version is the editor's document version (LSP
	// VersionedTextDocumentIdentifier.version) Text belongs to.
	Version int32
	// Untracked means the document is open in the editor but beyond the
	// overlay's bounds, so its text is unknown (Text is nil). read and
	// search use the file; edit and write refuse it when the editor
	// applies edits, since a disk write would go behind its buffer.
	Untracked bool
}

// errUntracked is the model-visible refusal of a change to an open
// document whose text octet does not track.
var errUntracked = errors.New("open in the editor, but too large (or one of too many open documents) for octet to track; ask the user to save and close it, then try again")

// editorSource is the details value ("source") of a result read from an
// open editor document.
const editorSource = "editor"

// openDocument returns the editor's document for tg when one is open.
// read and search see it whether or not the editor applies edits.
func (c *Config) openDocument(tg *target) (Document, bool) {
	if c.Documents == nil || !overlayable(tg) {
		return Document{}, false
	}
	return c.Documents.Document(tg.key)
}

// overlayable reports whether the editor may stand for tg's file: only a
// regular file, or one not on disk yet, as the no-follow resolver sees
// it. An editor reads by path and follows links, so a workspace link
// (notes.txt -> ~/.ssh/id_rsa) must take the disk path, which refuses it.
func overlayable(tg *target) bool { return overlayableAt(tg.root, tg.rel, false) }

// overlayableAt is overlayable for rel beneath root. For a change (edit)
// the file must also have one link: the editor writes through the path,
// into every other name of the file, where the disk path replaces it.
func overlayableAt(root *fsroot.Root, rel string, edit bool) bool {
	kind, links, err := root.Inspect(rel)
	if err != nil {
		return fsroot.IsNotExist(err)
	}
	return kind == fsroot.KindRegular && (!edit || links <= 1)
}

// editorEditTarget is the routing decision of edit and write: a target
// open in an editor that applies edits is changed through the editor
// (Documents.Apply), computed against its buffer; any other target keeps
// the descriptor-relative disk path.
func (c *Config) editorEditTarget(tg *target) (Document, bool) {
	if c.Documents == nil || !c.Documents.AppliesEdits() || !overlayableAt(tg.root, tg.rel, true) {
		return Document{}, false
	}
	return c.Documents.Document(tg.key)
}

// applyInEditor hands an edit or write of an open document to the
// editor. The result text is model-visible on failure.
func (c *Config) applyInEditor(ctx context.Context, tg *target, base Document, updated []byte) error {
	if err := c.Documents.Apply(ctx, tg.key, base, updated); err != nil {
		return fmt.Errorf("%s is open in the editor and the change was not applied: %w", tg.display, err)
	}
	return nil
}

// editorDetail is the approval detail line of a change computed against
// an open editor document: the version it applies to.
func editorDetail(doc Document) string {
	return fmt.Sprintf("applies to the editor's open buffer at version %d (unsaved changes included); the editor applies it, so undo reverts it", doc.Version)
}

// editorBinding is what, besides the call's arguments, an approval of a
// change of an open document covers: the document version its diff was
// computed against. The broker folds it into the approval digest.
func editorBinding(tg *target, doc Document) string {
	return fmt.Sprintf("editor-document %q version %d", tg.key, doc.Version)
}

// editorState is the fileState of an open editor document.
func editorState(doc Document) fileState {
	return fileState{prior: fsroot.PriorOf(doc.Text), readable: true}
}

// readForChange reads what an edit changes: the open editor document
// when the change goes through the editor (doc is then non-nil), else the
// file.
func (c *Config) readForChange(tg *target) (data []byte, doc *Document, err error) {
	if d, ok := c.editorEditTarget(tg); ok {
		if d.Untracked {
			return nil, nil, errUntracked
		}
		return d.Text, &d, nil
	}
	data, _, err = tg.root.ReadFile(tg.rel, MaxFileBytes)
	if (err == nil || fsroot.IsNotExist(err)) && c.unsavedBehind(tg, data, err == nil) {
		return nil, nil, errUnsavedInEditor
	}
	return data, nil, err
}

// errUnsavedInEditor refuses a disk change of a file whose editor buffer
// holds unsaved changes, for an editor octet does not change through
// (Documents.AppliesEdits false): the write would go behind the buffer,
// and saving it would then undo the change or lose the user's text.
var errUnsavedInEditor = errors.New("it is open in the editor with unsaved changes, and octet does not change this editor's buffers: ask the user to save (or revert) it, then read it again")

// unsavedBehind reports whether tg is open in an editor that does not
// apply octet's edits with text other than the disk's (data, or no file
// when !exists).
func (c *Config) unsavedBehind(tg *target, data []byte, exists bool) bool {
	if c.Documents == nil || c.Documents.AppliesEdits() || !overlayable(tg) {
		return false
	}
	d, ok := c.Documents.Document(tg.key)
	return ok && !d.Untracked && (!exists || !bytes.Equal(d.Text, data))
}

// readForRead reads what read and search show: an open editor document's
// text (doc non-nil) or the file.
func (c *Config) readForRead(tg *target) (data []byte, doc *Document, err error) {
	if d, ok := c.openDocument(tg); ok && !d.Untracked {
		return d.Text, &d, nil
	}
	data, _, err = tg.root.ReadFile(tg.rel, MaxFileBytes)
	return data, nil, err
}

// commitChange commits updated to tg: through the editor when doc is an
// open document (see editorEditTarget), else with fsroot's
// compare-before-commit write against prior. It returns the model-visible
// failure text, or "".
func (c *Config) commitChange(ctx context.Context, tg *target, doc *Document, updated []byte, prior fsroot.Prior, opts fsroot.WriteOptions, bound bool) string {
	if doc != nil {
		if err := c.applyInEditor(ctx, tg, *doc, updated); err != nil {
			return err.Error()
		}
		return ""
	}
	if err := tg.root.WriteFile(tg.rel, updated, prior, opts); err != nil {
		return commitErrorText(tg.display, err, bound)
	}
	return ""
}

// commitWatched is commitChange followed by the call's diagnostics watch
// w (nil: none): a change through the editor is noted before it is made
// and once the editor has applied it.
func (c *Config) commitWatched(ctx context.Context, w *diagWatch, tg *target, doc *Document, updated []byte, prior fsroot.Prior, opts fsroot.WriteOptions, bound bool) string {
	if doc != nil {
		w.changing(tg.key)
	}
	msg := c.commitChange(ctx, tg, doc, updated, prior, opts, bound)
	if msg == "" && doc != nil {
		w.applied(tg.key)
	}
	return msg
}

// previewBinding adds the editor version to an approval preview of a
// change computed against doc (nil: a disk change, left as it is).
func previewBinding(pv Preview, tg *target, doc *Document) Preview {
	if doc == nil {
		return pv
	}
	if pv.Detail != "" {
		pv.Detail += "\n"
	}
	pv.Detail += editorDetail(*doc)
	pv.Binding = editorBinding(tg, *doc)
	return pv
}
