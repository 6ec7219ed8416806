package tools

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/octet-agent/octet/internal/fsroot"
)

//go:embed write.md
var writeDescription string

var writeSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the workspace root."},
    "content": {"type": "string", "description": "The complete new file content."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`)

// WriteTool is the built-in write tool: create or replace a whole file
// through fsroot's compare-before-commit write, creating missing parent
// directories with the same no-follow walk.
type WriteTool struct{ fileChanger }

var (
	_ Tool      = (*WriteTool)(nil)
	_ Previewer = (*WriteTool)(nil)
)

// NewWrite constructs the write tool.
func NewWrite(cfg Config) (*WriteTool, error) {
	fc, err := newFileChanger(cfg)
	if err != nil {
		return nil, err
	}
	return &WriteTool{fc}, nil
}

type writeArgs struct {
	Path    *string `json:"path"`
	Content *string `json:"content"`
}

func (t *WriteTool) parse(raw json.RawMessage) (writeArgs, error) {
	var a writeArgs
	if err := decodeBuiltinArgs(raw, &a); err != nil {
		return a, err
	}
	switch {
	case a.Path == nil:
		return a, errors.New("missing required argument path")
	case a.Content == nil:
		return a, errors.New("missing required argument content")
	case len(*a.Content) > MaxFileBytes:
		return a, fmt.Errorf("content is larger than the %d MiB file limit", MaxFileBytes>>20)
	}
	return a, t.cfg.pathArg(*a.Path)
}

// Name returns "write".
func (t *WriteTool) Name() string { return "write" }

// Description returns the embedded write.md.
func (t *WriteTool) Description() string { return writeDescription }

// Schema returns the write argument schema.
func (t *WriteTool) Schema() json.RawMessage { return writeSchema }

// Classify returns WorkspaceMutation, or HostMutation for every call when
// external paths are allowed.
func (t *WriteTool) Classify(args json.RawMessage) (Effect, error) {
	if _, err := t.parse(args); err != nil {
		return Unknown, err
	}
	return t.cfg.mutationEffect(), nil
}

// current reads the target's present content: the open editor document
// (doc non-nil) when the write goes through the editor, else the file;
// exists is false when it is absent (a missing parent directory counts as
// absent).
func (t *WriteTool) current(tg *target) (data []byte, exists bool, doc *Document, err error) {
	data, doc, err = t.cfg.readForChange(tg)
	if fsroot.IsNotExist(err) {
		return nil, false, nil, nil
	}
	return data, err == nil, doc, err
}

// stateOfCurrent is the fileState of what current returned.
func stateOfCurrent(old []byte, exists bool, doc *Document) fileState {
	switch {
	case doc != nil:
		return editorState(*doc)
	case exists:
		return fileState{prior: fsroot.PriorOf(old), readable: true}
	}
	return fileState{prior: fsroot.Absent, readable: true}
}

// Execute writes the file. When an approval preview was shown for this
// exact call, the file must still hold what that diff was computed
// against (absent stays absent), up to the final compare-before-commit;
// otherwise nothing is written.
func (t *WriteTool) Execute(ctx context.Context, inv Invocation) (Result, error) {
	shown, bound := t.shown.take(inv.CallID, inv.Arguments)
	a, err := t.parse(inv.Arguments)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	tg, err := t.cfg.open(*a.Path)
	if err != nil {
		return errorResult(fileErrorText(*a.Path, err)), nil
	}
	defer tg.close()
	old, exists, doc, err := t.current(tg)
	if err != nil {
		return errorResult(fileErrorText(tg.display, err)), nil
	}
	cur := stateOfCurrent(old, exists, doc)
	if bound && shown.changedFrom(cur) {
		return errorResult(errChangedSinceShown), nil
	}
	if exists && t.cfg.Files.stale(inv.Principal, tg.key, old) {
		return errorResult(errChangedSinceRead), nil
	}
	content := []byte(*a.Content)
	watch := t.cfg.watchDiagnostics()
	recs, refusal, err := t.apply(ctx, inv, fileChange{tg: tg, doc: doc, old: old, existed: exists, updated: content,
		prior: cur.prior, opts: fsroot.WriteOptions{CreateParents: true}, watch: watch}, shown, bound)
	if err != nil {
		return Result{}, err
	}
	if refusal != "" {
		return errorResult(refusal), nil
	}
	verb := "Created"
	if exists {
		verb = "Replaced"
	}
	return Result{
		Text:    fmt.Sprintf("%s %s (%d bytes).", verb, tg.display, len(content)) + watch.note(ctx),
		Details: map[string]any{"path": tg.display, "bytes": len(content), "created": !exists},
		Changes: recs,
	}, nil
}

// Preview shows the diff between the current content (empty when absent)
// and the new content, without writing. Called for an approval (the
// broker puts the call id in ctx), it remembers the file state the diff
// was computed against, so Execute of the same call writes exactly over
// that state or refuses.
func (t *WriteTool) Preview(ctx context.Context, args json.RawMessage) (Preview, error) {
	a, err := t.parse(args)
	if err != nil {
		return Preview{}, err
	}
	title := "write " + shownPath(*a.Path)
	callID := previewCallID(ctx)
	tg, err := t.cfg.open(*a.Path)
	if err != nil {
		t.shown.remember(callID, args, stateOf(nil, err))
		return Preview{Title: title, Detail: fileErrorText(*a.Path, err)}, nil
	}
	defer tg.close()
	old, exists, doc, err := t.current(tg)
	if err != nil {
		t.shown.remember(callID, args, fileState{})
		return Preview{Title: title, Detail: fileErrorText(tg.display, err)}, nil
	}
	t.shown.remember(callID, args, stateOfCurrent(old, exists, doc))
	detail := fmt.Sprintf("create %s (%d bytes)", shownPath(tg.display), len(*a.Content))
	if !exists && doc == nil {
		detail += creatingText(tg, newDirs(tg, map[string]bool{}))
	}
	if exists {
		detail = fmt.Sprintf("replace %s (%d -> %d bytes)", shownPath(tg.display), len(old), len(*a.Content))
	}
	if diffTooLarge(string(old), *a.Content) {
		return Preview{}, fmt.Errorf("write %s: %w", tg.display, ErrPreviewTooLarge)
	}
	return previewBinding(Preview{Title: title, Detail: detail, Diff: unifiedDiff(tg.display, string(old), *a.Content)}, tg, doc), nil
}
