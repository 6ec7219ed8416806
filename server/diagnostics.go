package server

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/tools"
)

// The editor's diagnostics for the agent: a client that advertises
// experimental.octet.diagnostics sends octet/diagnostics {uri,
// diagnostics: [LSP Diagnostic]} for its open and changed documents
// (debounced; an empty array clears). The server keeps the latest per
// file, bounded; the overlay hands them to the tools
// (tools.EditorDiagnostics): the diagnostics tool, and the note after an
// edit of an open document.

// Bounds of the kept diagnostics.
const (
	// maxDiagnosticFiles bounds the files whose diagnostics are kept.
	maxDiagnosticFiles = MaxOpenDocuments
	// maxFileDiagnostics bounds the diagnostics kept per file.
	maxFileDiagnostics = 500
	// maxDiagnosticMessage bounds one message; maxDiagnosticTag its
	// source and its code.
	maxDiagnosticMessage = 500
	maxDiagnosticTag     = 100
)

var _ tools.EditorDiagnostics = (*overlay)(nil)

// fileDiagnostics are the latest diagnostics of one file.
type fileDiagnostics struct {
	list  []tools.Diagnostic
	stamp uint64
}

// lspDiagnostic is the part of an LSP Diagnostic octet keeps.
type lspDiagnostic struct {
	Range struct {
		Start lspPosition `json:"start"`
	} `json:"range"`
	Severity int             `json:"severity"`
	Code     json.RawMessage `json:"code"`
	Source   string          `json:"source"`
	Message  string          `json:"message"`
}

// diagnosticsParams are the params of octet/diagnostics.
type diagnosticsParams struct {
	URI         string          `json:"uri"`
	Diagnostics []lspDiagnostic `json:"diagnostics"`
}

// severities are LSP's DiagnosticSeverity values in words; a missing one
// is an error, as VS Code takes it.
var severities = map[int]string{0: "error", 1: "error", 2: "warning", 3: "info", 4: "hint"}

// diagnostics records one octet/diagnostics notification.
func (d *documents) diagnostics(p diagnosticsParams) (why string) {
	path := uriToPath(p.URI)
	if path == "" {
		return "not a file:// URI of an absolute path"
	}
	list := make([]tools.Diagnostic, 0, min(len(p.Diagnostics), maxFileDiagnostics))
	for _, ld := range p.Diagnostics[:min(len(p.Diagnostics), maxFileDiagnostics)] {
		list = append(list, tools.Diagnostic{
			Path: path, Line: max(ld.Range.Start.Line, 0) + 1, Col: max(ld.Range.Start.Character, 0) + 1,
			Severity: cmp.Or(severities[ld.Severity], "error"),
			Source:   oneLine(ld.Source, maxDiagnosticTag),
			Code:     oneLine(codeText(ld.Code), maxDiagnosticTag),
			Message:  oneLine(ld.Message, maxDiagnosticMessage),
		})
	}
	slices.SortStableFunc(list, func(a, b tools.Diagnostic) int { return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col)) })
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, _, why := d.locate(p.URI); why != "" {
		return why
	}
	if d.diags[path] == nil && len(d.diags) >= maxDiagnosticFiles && !d.dropClearLocked() {
		return "diagnostics are kept for too many files"
	}
	d.diagStamp++
	d.diags[path] = &fileDiagnostics{list: list, stamp: d.diagStamp}
	close(d.diagChanged)
	d.diagChanged = make(chan struct{})
	return ""
}

// dropClearLocked forgets one file without diagnostics, to make room; it
// reports whether there was one. The caller holds d.mu.
func (d *documents) dropClearLocked() bool {
	for p, fd := range d.diags {
		if len(fd.list) == 0 {
			delete(d.diags, p)
			return true
		}
	}
	return false
}

// codeText is an LSP diagnostic code (a number or a string) as text.
func codeText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// oneLine is s as one line of valid UTF-8, cut after n bytes: client
// text that reaches the model.
func oneLine(s string, n int) string {
	return host.Clip(strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " "), n)
}

// ForwardsDiagnostics implements tools.EditorDiagnostics.
func (o *overlay) ForwardsDiagnostics() bool {
	o.d.mu.Lock()
	defer o.d.mu.Unlock()
	return o.d.forwardsDiagnostics
}

// Diagnostics implements tools.EditorDiagnostics.
func (o *overlay) Diagnostics(path string) (diags []tools.Diagnostic, reported []string) {
	o.d.mu.Lock()
	defer o.d.mu.Unlock()
	for p, fd := range o.d.diags {
		if within(path, p) && within(o.root, p) {
			reported = append(reported, p)
			diags = append(diags, fd.list...)
		}
	}
	slices.Sort(reported)
	slices.SortStableFunc(diags, func(a, b tools.Diagnostic) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	return diags, reported
}

// DiagnosticsStamp implements tools.EditorDiagnostics.
func (o *overlay) DiagnosticsStamp(path string) uint64 {
	o.d.mu.Lock()
	defer o.d.mu.Unlock()
	if fd := o.d.diags[path]; fd != nil {
		return fd.stamp
	}
	return 0
}

// AwaitDiagnostics implements tools.EditorDiagnostics.
func (o *overlay) AwaitDiagnostics(ctx context.Context, path string, stamp uint64) bool {
	for {
		o.d.mu.Lock()
		fd, ch := o.d.diags[path], o.d.diagChanged
		o.d.mu.Unlock()
		if fd != nil && fd.stamp > stamp {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}
