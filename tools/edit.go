package tools

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aymanbagabas/go-udiff"

	"github.com/octet-agent/octet/internal/fsroot"
	"github.com/octet-agent/octet/internal/pathtext"
)

//go:embed edit.md
var editDescription string

var editSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the workspace root."},
    "old_text": {"type": "string", "minLength": 1, "description": "Exact text to replace."},
    "new_text": {"type": "string", "description": "Replacement text."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of exactly one."}
  },
  "required": ["path", "old_text", "new_text"],
  "additionalProperties": false
}`)

// EditTool is the built-in edit tool: an exact, unique (unless replace_all)
// text replacement committed through fsroot's compare-before-commit write.
// It refuses when the file changed since the model last read it.
type EditTool struct{ fileChanger }

var (
	_ Tool      = (*EditTool)(nil)
	_ Previewer = (*EditTool)(nil)
)

// NewEdit constructs the edit tool.
func NewEdit(cfg Config) (*EditTool, error) {
	fc, err := newFileChanger(cfg)
	if err != nil {
		return nil, err
	}
	return &EditTool{fc}, nil
}

type editArgs struct {
	Path       *string `json:"path"`
	OldText    *string `json:"old_text"`
	NewText    *string `json:"new_text"`
	ReplaceAll bool    `json:"replace_all"`
}

func (t *EditTool) parse(raw json.RawMessage) (editArgs, error) {
	var a editArgs
	if err := decodeBuiltinArgs(raw, &a); err != nil {
		return a, err
	}
	switch {
	case a.Path == nil:
		return a, errors.New("missing required argument path")
	case a.OldText == nil:
		return a, errors.New("missing required argument old_text")
	case a.NewText == nil:
		return a, errors.New("missing required argument new_text")
	case *a.OldText == "":
		return a, errors.New("old_text must not be empty")
	}
	return a, t.cfg.pathArg(*a.Path)
}

// Name returns "edit".
func (t *EditTool) Name() string { return "edit" }

// Description returns the embedded edit.md.
func (t *EditTool) Description() string { return editDescription }

// Schema returns the edit argument schema.
func (t *EditTool) Schema() json.RawMessage { return editSchema }

// Classify returns WorkspaceMutation, or HostMutation for every call when
// external paths are allowed.
func (t *EditTool) Classify(args json.RawMessage) (Effect, error) {
	if _, err := t.parse(args); err != nil {
		return Unknown, err
	}
	return t.cfg.mutationEffect(), nil
}

// plan is a computed edit: the content it applies to and the result.
type editPlan struct {
	tg      *target
	doc     *Document // the open editor document the edit applies to, if any
	old     []byte
	state   fileState // what the target held when planned
	updated string
	count   int
}

// plan reads the target and computes the replacement for principal (the
// agent making the call, whose reads the staleness check compares with). A
// non-empty refusal is the model-visible reason the edit cannot be made.
func (t *EditTool) plan(a editArgs, principal string) (p editPlan, refusal string) {
	tg, err := t.cfg.open(*a.Path)
	if err != nil {
		p.state = stateOf(nil, err)
		return p, fileErrorText(*a.Path, err)
	}
	p.tg = tg
	old, doc, err := t.cfg.readForChange(tg)
	p.state = stateOf(old, err)
	if doc != nil {
		p.doc, p.state = doc, editorState(*doc)
	}
	if err != nil {
		return p, fileErrorText(tg.display, err)
	}
	p.old = old
	if t.cfg.Files.stale(principal, tg.key, old) {
		return p, errChangedSinceRead
	}
	content := string(old)
	oldText, newText := *a.OldText, *a.NewText
	p.count = strings.Count(content, oldText)
	if p.count == 0 && strings.Contains(content, "\r\n") && !strings.Contains(oldText, "\r") {
		// A CRLF file edited with LF text: match and replace in CRLF.
		crlf := strings.NewReplacer("\r\n", "\r\n", "\n", "\r\n")
		oldText, newText = crlf.Replace(oldText), crlf.Replace(newText)
		p.count = strings.Count(content, oldText)
	}
	switch {
	case p.count == 0:
		return p, fmt.Sprintf("old_text not found in %s; read the file and copy the text exactly (without line-number prefixes)", tg.display)
	case p.count > 1 && !a.ReplaceAll:
		return p, fmt.Sprintf("old_text matches %d times in %s; include more surrounding lines to make it unique, or set replace_all", p.count, tg.display)
	}
	if a.ReplaceAll {
		p.updated = strings.ReplaceAll(content, oldText, newText)
	} else {
		p.updated = strings.Replace(content, oldText, newText, 1)
	}
	if len(p.updated) > MaxFileBytes {
		return p, fmt.Sprintf("the edited %s would exceed the %d MiB file limit", tg.display, MaxFileBytes>>20)
	}
	return p, ""
}

// Execute applies the edit. When an approval preview was shown for this
// exact call, the file must still hold what that diff was computed
// against, up to the final compare-before-commit; otherwise nothing is
// written.
func (t *EditTool) Execute(ctx context.Context, inv Invocation) (Result, error) {
	shown, bound := t.shown.take(inv.CallID, inv.Arguments)
	a, err := t.parse(inv.Arguments)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	p, refusal := t.plan(a, inv.Principal)
	if p.tg != nil {
		defer p.tg.close()
	}
	if bound && shown.changedFrom(p.state) {
		return errorResult(errChangedSinceShown), nil
	}
	if refusal != "" {
		return errorResult(refusal), nil
	}
	watch := t.cfg.watchDiagnostics()
	recs, refusal, err := t.apply(ctx, inv, fileChange{tg: p.tg, doc: p.doc, old: p.old, existed: true, updated: []byte(p.updated),
		prior: fsroot.PriorOf(p.old), watch: watch}, shown, bound)
	if err != nil {
		return Result{}, err
	}
	if refusal != "" {
		return errorResult(refusal), nil
	}
	return Result{
		Text:    fmt.Sprintf("Edited %s (%s).", p.tg.display, plural(p.count, "replacement")) + watch.note(ctx),
		Details: map[string]any{"path": p.tg.display, "replacements": p.count},
		Changes: recs,
	}, nil
}

// Preview shows the unified diff the edit would apply, without applying
// it, titled with the number of occurrences a replace_all edit replaces
// when it is more than one. Called for an approval (the broker puts the call id in ctx), it
// remembers the file state the diff was computed against, so Execute of
// the same call applies exactly this diff or refuses.
func (t *EditTool) Preview(ctx context.Context, args json.RawMessage) (Preview, error) {
	a, err := t.parse(args)
	if err != nil {
		return Preview{}, err
	}
	p, refusal := t.plan(a, previewPrincipal(ctx))
	if p.tg != nil {
		defer p.tg.close()
	}
	t.shown.remember(previewCallID(ctx), args, p.state)
	title := "edit " + shownPath(*a.Path)
	if refusal != "" {
		return Preview{Title: title, Detail: refusal}, nil
	}
	if a.ReplaceAll && p.count > 1 {
		// A one-line old_text can change the whole file: the title says so.
		title += " (replace all: " + plural(p.count, "occurrence") + ")"
	}
	if diffTooLarge(string(p.old), p.updated) {
		return Preview{}, fmt.Errorf("edit %s: %w", *a.Path, ErrPreviewTooLarge)
	}
	return previewBinding(Preview{Title: title, Diff: unifiedDiff(p.tg.display, string(p.old), p.updated)}, p.tg, p.doc), nil
}

// unifiedDiff renders old → new as a whole unified diff: the broker, not
// the tool, decides whether it is small enough to show (an approval never
// shows a cut diff). A name a header line could not hold as it is is
// quoted (shownPath): a newline in it cannot fake diff lines.
func unifiedDiff(name, old, updated string) string {
	return udiff.Unified(diffLabel("a/", name), diffLabel("b/", name), old, updated)
}

// diffLabel is name as a diff header line names it, after prefix ("a/",
// "b/"): quoted when it must be (pathtext.Label), and /dev/null for an
// absent side ("").
func diffLabel(prefix, name string) string {
	if name == "" {
		return "/dev/null"
	}
	return pathtext.Label(prefix, name)
}

// diffTooLarge reports that the diff of old → updated cannot fit an
// approval prompt whatever its shape: every added byte appears in it, so
// growth beyond MaxPreviewDiff alone is enough. It spares computing a
// diff of tens of megabytes only to refuse it.
func diffTooLarge(old, updated string) bool {
	return len(updated)-len(old) > MaxPreviewDiff || len(old)-len(updated) > MaxPreviewDiff
}
