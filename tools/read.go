package tools

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

//go:embed read.md
var readDescription string

var readSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path relative to the workspace root."},
    "offset": {"type": "integer", "minimum": 0, "description": "1-based line number to start from."},
    "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to return."}
  },
  "required": ["path"],
  "additionalProperties": false
}`)

// ReadTool is the built-in read tool: numbered lines of one regular file,
// resolved without following links and bounded by the model-visible limit.
// It records what the model saw so edit and write can detect staleness.
type ReadTool struct {
	cfg Config
}

var _ Tool = (*ReadTool)(nil)

// NewRead constructs the read tool.
func NewRead(cfg Config) (*ReadTool, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	return &ReadTool{cfg: cfg}, nil
}

type readArgs struct {
	Path   *string `json:"path"`
	Offset *int    `json:"offset"`
	Limit  *int    `json:"limit"`
}

func (t *ReadTool) parse(raw json.RawMessage) (readArgs, error) {
	var a readArgs
	if err := decodeBuiltinArgs(raw, &a); err != nil {
		return a, err
	}
	if a.Path == nil {
		return a, errors.New("missing required argument path")
	}
	if a.Offset != nil && *a.Offset < 0 {
		return a, errors.New("offset must be a line number >= 1")
	}
	if a.Limit != nil && *a.Limit < 1 {
		return a, errors.New("limit must be >= 1")
	}
	return a, t.cfg.pathArg(*a.Path)
}

// Name returns "read".
func (t *ReadTool) Name() string { return "read" }

// Description returns the embedded read.md.
func (t *ReadTool) Description() string { return readDescription }

// Schema returns the read argument schema.
func (t *ReadTool) Schema() json.RawMessage { return readSchema }

// Concurrency reports Parallel: reads may overlap other reads.
func (t *ReadTool) Concurrency() Concurrency { return Parallel }

// ReplaySafety reports ReplaySafe: re-reading after a crash is harmless.
func (t *ReadTool) ReplaySafety() ReplaySafety { return ReplaySafe }

// Classify returns WorkspaceRead, or HostRead for every call when external
// paths are allowed.
func (t *ReadTool) Classify(args json.RawMessage) (Effect, error) {
	if _, err := t.parse(args); err != nil {
		return Unknown, err
	}
	return t.cfg.readEffect(), nil
}

// Execute reads the file and formats the requested lines.
func (t *ReadTool) Execute(ctx context.Context, inv Invocation) (Result, error) {
	a, err := t.parse(inv.Arguments)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	tg, err := t.cfg.open(*a.Path)
	if err != nil {
		return errorResult(fileErrorText(*a.Path, err)), nil
	}
	defer tg.close()
	data, doc, err := t.cfg.readForRead(tg)
	if err != nil {
		return errorResult(fileErrorText(tg.display, err)), nil
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	t.cfg.Files.record(inv.Principal, tg.key, data)
	details := map[string]any{"path": tg.display, "bytes": len(data)}
	if doc != nil {
		details["source"], details["version"] = editorSource, doc.Version
	}
	if isBinary(data) {
		details["binary"] = true
		return Result{Text: fmt.Sprintf("%s is a binary file (%d bytes); not shown", tg.display, len(data)), Details: details}, nil
	}
	if len(data) == 0 {
		return Result{Text: fmt.Sprintf("%s is empty", tg.display), Details: details}, nil
	}
	offset, limit := 1, DefaultReadLines
	if a.Offset != nil && *a.Offset > 0 {
		offset = *a.Offset
	}
	if a.Limit != nil {
		limit = *a.Limit
	}
	text, res, err := formatLines(data, offset, limit, t.cfg.MaxOutputBytes)
	if err != nil {
		return errorResult(fmt.Sprintf("%s: %v", tg.display, err)), nil
	}
	details["lines"], details["start_line"], details["end_line"] = res.total, res.start, res.end
	if res.truncated {
		details["truncated"] = true
	}
	return Result{Text: text, Details: details}, nil
}

type lineRange struct {
	start, end, total int
	truncated         bool
}

// formatLines renders lines [offset, offset+limit) of data as "%6d\t%s"
// within maxBytes, with a continuation note when anything was left out.
func formatLines(data []byte, offset, limit, maxBytes int) (string, lineRange, error) {
	total := bytes.Count(data, []byte{'\n'})
	if data[len(data)-1] != '\n' {
		total++
	}
	if offset > total {
		return "", lineRange{}, fmt.Errorf("offset %d is beyond the end of the file (%d lines)", offset, total)
	}
	const noteRoom = 160
	var b strings.Builder
	rest := data
	for range offset - 1 {
		i := bytes.IndexByte(rest, '\n')
		rest = rest[i+1:]
	}
	r := lineRange{start: offset, end: offset - 1, total: total}
	var num [24]byte
	for n := offset; n < offset+limit && len(rest) > 0; n++ {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		cut := false
		if len(line) > MaxLineBytes {
			line, cut = line[:MaxLineBytes], true
			for len(line) > 0 && !utf8.RuneStart(line[len(line)-1]) {
				line = line[:len(line)-1]
			}
		}
		s := strconv.AppendInt(num[:0], int64(n), 10)
		need := max(6, len(s)) + 1 + len(line) + 1 + 24
		if b.Len()+need > maxBytes-noteRoom && n > offset {
			r.truncated = true
			break
		}
		for range 6 - len(s) {
			b.WriteByte(' ')
		}
		b.Write(s)
		b.WriteByte('\t')
		b.WriteString(strings.ToValidUTF8(string(line), "\uFFFD"))
		if cut {
			b.WriteString(" … [line truncated]")
		}
		b.WriteByte('\n')
		r.end = n
	}
	if r.end < total {
		fmt.Fprintf(&b, "\n[showing lines %d-%d of %d; use offset=%d to read more]", r.start, r.end, total, r.end+1)
		r.truncated = r.truncated || r.end-r.start+1 < limit
	}
	out, cut := clipUTF8(b.String(), maxBytes)
	r.truncated = r.truncated || cut
	return out, r, nil
}
