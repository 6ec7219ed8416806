package tools

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/octet-agent/octet/internal/images"
)

//go:embed view_image.md
var viewImageDescription string

var viewImageSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Image file path relative to the workspace root."}
  },
  "required": ["path"],
  "additionalProperties": false
}`)

// Image is an image a tool result gives the model.
type Image struct {
	MimeType string
	Data     []byte
}

// ViewImageTool is view_image: the model looks at an image file of the
// workspace (a read), which its result carries. Offer it only to a
// model that takes image input.
type ViewImageTool struct{ cfg Config }

var _ Tool = (*ViewImageTool)(nil)

// NewViewImage constructs the view_image tool.
func NewViewImage(cfg Config) (*ViewImageTool, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	return &ViewImageTool{cfg: cfg}, nil
}

func (t *ViewImageTool) parse(raw json.RawMessage) (string, error) {
	var a struct {
		Path *string `json:"path"`
	}
	if err := decodeBuiltinArgs(raw, &a); err != nil {
		return "", err
	}
	if a.Path == nil {
		return "", errors.New("missing required argument path")
	}
	return *a.Path, t.cfg.pathArg(*a.Path)
}

// Name returns "view_image".
func (t *ViewImageTool) Name() string { return "view_image" }

// Description returns the embedded view_image.md.
func (t *ViewImageTool) Description() string { return viewImageDescription }

// Schema returns the view_image argument schema.
func (t *ViewImageTool) Schema() json.RawMessage { return viewImageSchema }

// Concurrency reports Parallel: a read.
func (t *ViewImageTool) Concurrency() Concurrency { return Parallel }

// ReplaySafety reports ReplaySafe: reading again is harmless.
func (t *ViewImageTool) ReplaySafety() ReplaySafety { return ReplaySafe }

// Classify returns WorkspaceRead, or HostRead for every call when
// external paths are allowed (as read does).
func (t *ViewImageTool) Classify(args json.RawMessage) (Effect, error) {
	if _, err := t.parse(args); err != nil {
		return Unknown, err
	}
	return t.cfg.readEffect(), nil
}

// Execute reads the image (no links followed, at most 20 MiB) and
// returns it with a line naming it.
func (t *ViewImageTool) Execute(ctx context.Context, inv Invocation) (Result, error) {
	path, err := t.parse(inv.Arguments)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	tg, err := t.cfg.open(path)
	if err != nil {
		return errorResult(fileErrorText(path, err)), nil
	}
	defer tg.close()
	data, _, err := tg.root.ReadFile(tg.rel, images.MaxBytes)
	if err != nil {
		return errorResult(fileErrorText(tg.display, err)), nil
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	mime, err := images.Check(data, "")
	if err != nil {
		return errorResult(fmt.Sprintf("%s: %v", tg.display, err)), nil
	}
	return Result{
		Text:    fmt.Sprintf("%s: %s, %d bytes (the image follows)", tg.display, mime, len(data)),
		Details: map[string]any{"path": tg.display, "bytes": len(data), "mimeType": mime},
		Images:  []Image{{MimeType: mime, Data: data}},
	}, nil
}
