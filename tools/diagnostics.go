package tools

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

//go:embed diagnostics.md
var diagnosticsDescription string

var diagnosticsSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "A file or directory, relative to the workspace root (default: the whole workspace)."}
  },
  "additionalProperties": false
}`)

// Diagnostic is one problem the editor's language servers report in a
// file (an LSP Diagnostic, as octet shows it).
type Diagnostic struct {
	// Path is the file's absolute path.
	Path string
	// Line and Col are 1-based (Col counts the position encoding's
	// units: UTF-16 code units unless UTF-8 was negotiated).
	Line, Col int
	// Severity is error, warning, info or hint.
	Severity string
	// Source (the reporting tool), Code and Message are as reported,
	// Message on one line and bounded.
	Source, Code, Message string
}

// EditorDiagnostics is implemented by a Documents whose editor forwards
// its diagnostics (octet/diagnostics). Paths are absolute and clean.
type EditorDiagnostics interface {
	// ForwardsDiagnostics reports whether the editor forwards them at
	// all: the diagnostics tool is offered only then.
	ForwardsDiagnostics() bool
	// Diagnostics returns the latest diagnostics of the file at path, or
	// of every file beneath it for a directory, sorted by path and
	// position; reported lists the files the editor has sent
	// diagnostics for (an empty list included).
	Diagnostics(path string) (diags []Diagnostic, reported []string)
	// DiagnosticsStamp returns the stamp of the file's latest
	// diagnostics: 0 when the editor has sent none for it, larger for
	// later ones.
	DiagnosticsStamp(path string) uint64
	// AwaitDiagnostics waits until diagnostics of the file later than
	// stamp arrive, and reports whether they did before ctx ended.
	AwaitDiagnostics(ctx context.Context, path string, stamp uint64) bool
}

// editorDiagnostics returns c's documents as EditorDiagnostics when the
// editor forwards its diagnostics.
func (c *Config) editorDiagnostics() EditorDiagnostics {
	ed, ok := c.Documents.(EditorDiagnostics)
	if !ok || !ed.ForwardsDiagnostics() {
		return nil
	}
	return ed
}

// Bounds of what diagnostics show.
const (
	// maxDiagnosticsShown bounds the diagnostics one result lists.
	maxDiagnosticsShown = 200
	// maxChangedShown bounds the appeared (and the gone) diagnostics an
	// edit's note lists.
	maxChangedShown = 20
	// DiagnosticsWait bounds how long an edit of an open document waits
	// for the editor's diagnostics of the changed text.
	DiagnosticsWait = 1500 * time.Millisecond
)

// DiagnosticsTool is the diagnostics tool: the problems the editor's
// language servers report, for a file, a directory or the workspace. It
// is built only for an editor that forwards them.
type DiagnosticsTool struct {
	cfg  Config
	diag EditorDiagnostics
}

var _ Tool = (*DiagnosticsTool)(nil)

// NewDiagnostics constructs the diagnostics tool, or returns nil when
// cfg's documents do not forward the editor's diagnostics.
func NewDiagnostics(cfg Config) (*DiagnosticsTool, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	ed := cfg.editorDiagnostics()
	if ed == nil {
		return nil, nil
	}
	return &DiagnosticsTool{cfg: cfg, diag: ed}, nil
}

type diagnosticsArgs struct {
	Path *string `json:"path"`
}

func (t *DiagnosticsTool) parse(raw json.RawMessage) (diagnosticsArgs, error) {
	var a diagnosticsArgs
	if err := decodeBuiltinArgs(raw, &a); err != nil {
		return a, err
	}
	if a.Path != nil && *a.Path != "" && *a.Path != "." {
		return a, t.cfg.pathArg(*a.Path)
	}
	return a, nil
}

// Name returns "diagnostics".
func (t *DiagnosticsTool) Name() string { return "diagnostics" }

// Description returns the embedded diagnostics.md.
func (t *DiagnosticsTool) Description() string { return diagnosticsDescription }

// Schema returns the diagnostics argument schema.
func (t *DiagnosticsTool) Schema() json.RawMessage { return diagnosticsSchema }

// Concurrency reports Parallel: it only reads what the editor reported.
func (t *DiagnosticsTool) Concurrency() Concurrency { return Parallel }

// ReplaySafety reports ReplaySafe.
func (t *DiagnosticsTool) ReplaySafety() ReplaySafety { return ReplaySafe }

// Classify returns WorkspaceRead, or HostRead when external paths are
// allowed (as read does).
func (t *DiagnosticsTool) Classify(args json.RawMessage) (Effect, error) {
	if _, err := t.parse(args); err != nil {
		return Unknown, err
	}
	return t.cfg.readEffect(), nil
}

// Execute lists the diagnostics under the path.
func (t *DiagnosticsTool) Execute(_ context.Context, inv Invocation) (Result, error) {
	a, err := t.parse(inv.Arguments)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	abs, display := t.cfg.Root, "the workspace"
	if a.Path != nil && *a.Path != "" && *a.Path != "." {
		abs = filepath.Join(t.cfg.Root, *a.Path)
		if filepath.IsAbs(*a.Path) {
			abs = filepath.Clean(*a.Path)
		}
		display = t.cfg.displayPath(abs)
	}
	diags, reported := t.diag.Diagnostics(abs)
	if len(reported) == 0 {
		return Result{Text: fmt.Sprintf("The editor has reported no diagnostics for %s: only documents open in the editor, with a language server, have them.", display),
			Details: map[string]any{"count": 0}}, nil
	}
	var b strings.Builder
	files := map[string]bool{}
	for _, d := range diags {
		files[d.Path] = true
	}
	if len(diags) == 0 {
		fmt.Fprintf(&b, "No problems in %s (%s reported by the editor).", display, plural(len(reported), "file"))
	} else {
		fmt.Fprintf(&b, "%s in %s (%s reported by the editor, as its language servers last reported them):\n",
			plural(len(diags), "problem"), plural(len(files), "file"), plural(len(reported), "file"))
		for _, d := range diags[:min(len(diags), maxDiagnosticsShown)] {
			b.WriteString(t.cfg.diagnosticLine(d))
			b.WriteByte('\n')
		}
		if more := len(diags) - maxDiagnosticsShown; more > 0 {
			fmt.Fprintf(&b, "… and %d more; pass a path to narrow.\n", more)
		}
	}
	return Result{Text: strings.TrimSuffix(b.String(), "\n"), Details: map[string]any{"count": len(diags), "files": len(files)}}, nil
}

// displayPath names an absolute path as results do: workspace-relative
// within the root.
func (c *Config) displayPath(abs string) string {
	if rel, ok := strings.CutPrefix(abs, c.Root+string(filepath.Separator)); ok {
		return rel
	}
	return abs
}

// diagnosticLine renders one diagnostic: path:line:col: severity: message
// [source code].
func (c *Config) diagnosticLine(d Diagnostic) string {
	s := fmt.Sprintf("%s:%d:%d: %s: %s", c.displayPath(d.Path), d.Line, d.Col, d.Severity, d.Message)
	if tag := strings.TrimSpace(d.Source + " " + d.Code); tag != "" {
		s += " [" + tag + "]"
	}
	return s
}

// diagnosticKey identifies a diagnostic across an edit, which moves lines:
// its file, severity, source, code and message.
func diagnosticKey(d Diagnostic) string {
	return strings.Join([]string{d.Path, d.Severity, d.Source, d.Code, d.Message}, "\x00")
}

// diagWatch follows the editor's diagnostics of the documents one call
// changes through the editor, to say afterwards which appeared and which
// went away. A nil *diagWatch does nothing.
type diagWatch struct {
	c      *Config
	ed     EditorDiagnostics
	files  []string                // the changed documents the editor reports diagnostics for
	before map[string][]Diagnostic // their diagnostics before the change
	stamps map[string]uint64       // their stamps once the change was applied
}

// watchDiagnostics returns a watch for a call of c (nil when the editor
// forwards no diagnostics).
func (c *Config) watchDiagnostics() *diagWatch {
	ed := c.editorDiagnostics()
	if ed == nil {
		return nil
	}
	return &diagWatch{c: c, ed: ed, before: map[string][]Diagnostic{}, stamps: map[string]uint64{}}
}

// changing records the diagnostics of path before a change through the
// editor. A file the editor never reported diagnostics for (no language
// server) is not waited for.
func (w *diagWatch) changing(path string) {
	if w == nil || w.ed.DiagnosticsStamp(path) == 0 || slices.Contains(w.files, path) {
		return
	}
	w.files = append(w.files, path)
	w.before[path], _ = w.ed.Diagnostics(path)
}

// applied records that the change of path is in the editor (its didChange
// arrived): diagnostics later than now are of the changed text.
func (w *diagWatch) applied(path string) {
	if w == nil || !slices.Contains(w.files, path) {
		return
	}
	w.stamps[path] = w.ed.DiagnosticsStamp(path)
}

// note waits (at most DiagnosticsWait in all) for the editor's
// diagnostics of every changed file and says what appeared and what went
// away ("" when there is nothing to say).
func (w *diagWatch) note(ctx context.Context) string {
	if w == nil || len(w.stamps) == 0 {
		return ""
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, DiagnosticsWait)
	defer cancel()
	var appeared, gone []Diagnostic
	var late []string
	for _, f := range w.files {
		stamp, ok := w.stamps[f]
		if !ok {
			continue
		}
		if !w.ed.AwaitDiagnostics(ctx, f, stamp) {
			late = append(late, w.c.displayPath(f))
			continue
		}
		after, _ := w.ed.Diagnostics(f)
		a, g := diffDiagnostics(w.before[f], after)
		appeared, gone = append(appeared, a...), append(gone, g...)
	}
	if errors.Is(context.Cause(ctx), context.Canceled) && len(late) > 0 {
		return "" // the call was cancelled: nothing worth saying
	}
	var b strings.Builder
	if len(w.stamps) > len(late) {
		fmt.Fprintf(&b, "\n\nThe editor's diagnostics after this change (%.1f s later): ", time.Since(start).Seconds())
		switch {
		case len(appeared) == 0 && len(gone) == 0:
			b.WriteString("none appeared, none went away.")
		default:
			fmt.Fprintf(&b, "%d appeared, %d went away.", len(appeared), len(gone))
		}
		w.list(&b, "appeared", appeared)
		w.list(&b, "went away", gone)
	}
	if len(late) > 0 {
		fmt.Fprintf(&b, "\n\nThe editor sent no diagnostics for %s within %.1f s of the change (its language server may still be working); call diagnostics to see them later.",
			strings.Join(late, ", "), DiagnosticsWait.Seconds())
	}
	return b.String()
}

// list writes what's diagnostics, bounded.
func (w *diagWatch) list(b *strings.Builder, what string, ds []Diagnostic) {
	for i, d := range ds {
		if i == maxChangedShown {
			fmt.Fprintf(b, "\n  … and %d more", len(ds)-i)
			break
		}
		fmt.Fprintf(b, "\n  %s: %s", what, w.c.diagnosticLine(d))
	}
}

// diffDiagnostics returns the diagnostics of after that before did not
// have, and those of before that after does not (as multisets of
// diagnosticKey: an edit moves lines, not problems).
func diffDiagnostics(before, after []Diagnostic) (appeared, gone []Diagnostic) {
	count := map[string]int{}
	for _, d := range before {
		count[diagnosticKey(d)]++
	}
	for _, d := range after {
		k := diagnosticKey(d)
		if count[k] > 0 {
			count[k]--
			continue
		}
		appeared = append(appeared, d)
	}
	for _, d := range slices.Backward(before) {
		k := diagnosticKey(d)
		if count[k] > 0 {
			count[k]--
			gone = append(gone, d)
		}
	}
	slices.Reverse(gone)
	return appeared, gone
}
