package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aymanbagabas/go-udiff"
	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/octet-agent/octet/internal/fsroot"
	"github.com/octet-agent/octet/tools"
)

// Bounds of the document overlay.
const (
	// MaxDocumentBytes is the largest document the overlay keeps: the
	// tools' file limit. A larger document is not overlaid (the tools
	// see its file, and refuse it as too large).
	MaxDocumentBytes = fsroot.MaxFileBytes
	// MaxOpenDocuments bounds the documents one server overlays. A
	// document opened beyond it is not overlaid (the log says so): the
	// tools see its file, and edits of it go to disk as for a closed file.
	MaxOpenDocuments = 2000
	// MaxOverlayBytes bounds the text all overlaid documents hold
	// together; a document that would exceed it is not overlaid.
	MaxOverlayBytes = 512 << 20
	// maxUntracked bounds the paths remembered as open but not overlaid
	// (edits of them are refused rather than written behind the buffer).
	maxUntracked = 4 * MaxOpenDocuments
)

// positionEncoding is how LSP positions count characters within a line.
type positionEncoding string

const (
	encUTF16 positionEncoding = "utf-16" // the LSP default
	encUTF8  positionEncoding = "utf-8"
)

// documents is the server's overlay of the documents the editor has open
// (textDocument/didOpen … didClose): their text and version, per
// workspace root. Sessions whose workspace lies in one root share its
// overlay. It is safe for concurrent use.
type documents struct {
	srv *Server

	mu        sync.Mutex
	roots     []string // workspace roots, longest first
	enc       positionEncoding
	applyEdit bool // the client applies workspace/applyEdit with documentChanges
	// saveDocuments: the client answers octet/saveDocuments
	// (experimental.octet.saveDocuments).
	saveDocuments bool
	// forwardsDiagnostics: the client sends octet/diagnostics
	// (experimental.octet.diagnostics); diags are the latest per file,
	// stamped from diagStamp, and diagChanged is closed and replaced
	// whenever they change (diagnostics.go).
	forwardsDiagnostics bool
	diags               map[string]*fileDiagnostics
	diagStamp           uint64
	diagChanged         chan struct{}
	overlays            map[string]*overlay
	// docs and untracked hold every root's documents (by absolute path),
	// so nested roots see the same documents; each overlay shows those
	// within its root.
	docs      map[string]*document
	untracked map[string]bool
	count     int   // overlaid documents, all roots
	bytes     int64 // their text
	nUntrack  int   // documents open but not overlaid, all roots
	// changed is closed and replaced whenever a document changes, for
	// Apply to wait for the editor's didChange.
	changed chan struct{}
}

// document is one open document.
type document struct {
	uri     string
	version int32
	text    []byte // replaced, never modified in place
	// unsaved: the text may differ from the file (opened, or changed
	// since the last didSave); cleared by didSave, or when it was found
	// equal to the file (buffers.go).
	unsaved bool
	// agent: octet changed it through workspace/applyEdit since it was
	// last saved.
	agent bool
}

func newDocuments(s *Server) *documents {
	return &documents{srv: s, enc: encUTF16, overlays: map[string]*overlay{}, changed: make(chan struct{}),
		docs: map[string]*document{}, untracked: map[string]bool{},
		diags: map[string]*fileDiagnostics{}, diagChanged: make(chan struct{})}
}

// overlay is the open documents of one workspace root; it implements
// tools.Documents for the sessions in that root.
type overlay struct {
	d    *documents
	root string
	// docs and untracked are d's (guarded by d.mu); the overlay's methods
	// show only the paths within root.
	docs      map[string]*document
	untracked map[string]bool
}

var _ tools.Documents = (*overlay)(nil)

// docClientCaps is what initialize said about documents.
type docClientCaps struct {
	encodings       []string
	applyEdit       bool
	documentChanges bool
	// octetApprovals: the client takes octet's approvals itself
	// (experimental.octet.confirmEffect).
	octetApprovals bool
	// saveDocuments and diagnostics: experimental.octet.saveDocuments
	// and experimental.octet.diagnostics.
	saveDocuments, diagnostics bool
}

func parseDocCaps(raw []byte) docClientCaps {
	caps := lookup(raw, "capabilities")
	var c docClientCaps
	_ = json.Unmarshal(lookup(caps, "general", "positionEncodings"), &c.encodings)
	c.applyEdit = lookupBool(caps, "workspace", "applyEdit")
	c.documentChanges = lookupBool(caps, "workspace", "workspaceEdit", "documentChanges")
	c.octetApprovals = lookupBool(caps, "experimental", "octet", "confirmEffect")
	c.saveDocuments = lookupBool(caps, "experimental", "octet", "saveDocuments")
	c.diagnostics = lookupBool(caps, "experimental", "octet", "diagnostics")
	// Resource operations exist only in documentChanges, so a client
	// that offers them takes documentChanges (Neovim says only this).
	var ops []string
	if json.Unmarshal(lookup(caps, "workspace", "workspaceEdit", "resourceOperations"), &ops) == nil && len(ops) > 0 {
		c.documentChanges = true
	}
	return c
}

// configure records the workspace roots and the client's document
// capabilities at initialize, and returns the position encoding the
// server picked (utf-8 when the client offers it, else utf-16).
func (d *documents) configure(raw []byte, p initializeParams) positionEncoding {
	c := parseDocCaps(raw)
	var roots []string
	for _, u := range append(slices.Clone(p.Folders), p.RootURI) {
		if path := uriToPath(u); path != "" && !slices.Contains(roots, path) {
			roots = append(roots, path)
		}
	}
	if len(roots) == 0 && filepath.IsAbs(p.RootPath) {
		roots = append(roots, filepath.Clean(p.RootPath))
	}
	// Longest first: a document belongs to the innermost root.
	slices.SortFunc(roots, func(a, b string) int { return len(b) - len(a) })
	d.mu.Lock()
	defer d.mu.Unlock()
	d.roots = roots
	// One person, one question: the approval octet asked admitted the
	// edit, so it goes through workspace/applyEdit only to a client that
	// applies it without asking again. A stock client may put its own
	// question first (eglot's "Proceed?") while the request waits for a
	// machine's answer; a client that takes octet's approvals itself
	// (the octet plugins) does not. Every other client keeps the disk
	// path, which refuses to write behind a buffer with unsaved changes.
	d.applyEdit = c.applyEdit && c.documentChanges && c.octetApprovals
	d.saveDocuments = c.saveDocuments
	d.forwardsDiagnostics = c.diagnostics
	if slices.Contains(c.encodings, string(encUTF8)) {
		d.enc = encUTF8
	}
	return d.enc
}

// forWorkspace returns the overlay the tools of a session working in
// dir see: that of the workspace root containing dir, or nil when dir is
// in no root (the tools then use the disk only).
func (d *documents) forWorkspace(dir string) tools.Documents {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.roots {
		if within(r, dir) {
			return d.overlayLocked(r)
		}
	}
	return nil
}

// openIn returns the paths of the documents open in the editor within
// dir (overlaid or not), sorted.
func (d *documents) openIn(dir string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for p := range d.docs {
		if within(dir, p) {
			out = append(out, p)
		}
	}
	for p := range d.untracked {
		if within(dir, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// editorFor is the runtime's AgentSpec.Editor for a session working in
// dir: the client's name and the documents open within dir.
func (s *Server) editorFor(dir string) func() (string, []string) {
	return func() (string, []string) {
		s.mu.Lock()
		client := s.client
		s.mu.Unlock()
		return client, s.docs.openIn(dir)
	}
}

func (d *documents) overlayLocked(root string) *overlay {
	o := d.overlays[root]
	if o == nil {
		o = &overlay{d: d, root: root, docs: d.docs, untracked: d.untracked}
		d.overlays[root] = o
	}
	return o
}

// within reports whether path is root or beneath it.
func within(root, path string) bool {
	return path == root || strings.HasPrefix(path, root+string(filepath.Separator)) || root == "/"
}

// locate maps a document URI to its overlay and path: file:// URIs of
// absolute paths inside a workspace root only. why says what is wrong
// otherwise.
func (d *documents) locate(uri string) (o *overlay, path, why string) {
	path = uriToPath(uri)
	if path == "" {
		return nil, "", "not a file:// URI of an absolute path"
	}
	for _, r := range d.roots {
		if within(r, path) {
			return d.overlayLocked(r), path, ""
		}
	}
	return nil, "", "outside the workspace roots"
}

// textDocumentItem and the other types below are the parts of the LSP
// document-sync notifications the overlay uses.
type textDocumentItem struct {
	URI     string `json:"uri"`
	Version int32  `json:"version"`
	Text    string `json:"text"`
}

type versionedID struct {
	URI     string `json:"uri"`
	Version int32  `json:"version"`
}

type lspPosition struct {
	Line      int `json:"line"`
	Character int `json:"character"`
}

type lspRange struct {
	Start lspPosition `json:"start"`
	End   lspPosition `json:"end"`
}

type contentChange struct {
	Range *lspRange `json:"range"`
	Text  string    `json:"text"`
}

// handleDocument handles the textDocument/* sync notifications and
// octet/diagnostics, and reports whether method was one. Problems are logged, never returned.
func (s *Server) handleDocument(method string, raw jsonrpc2.RawMessage) bool {
	var err error
	switch method {
	case "textDocument/didOpen":
		var p struct{ TextDocument textDocumentItem }
		if err = decodeParams(raw, &p); err == nil {
			s.docs.open(p.TextDocument)
		}
	case "textDocument/didChange":
		var p struct {
			TextDocument   versionedID
			ContentChanges []contentChange
		}
		if err = decodeParams(raw, &p); err == nil {
			s.docs.change(p.TextDocument, p.ContentChanges)
		}
	case "textDocument/didClose":
		var p struct{ TextDocument versionedID }
		if err = decodeParams(raw, &p); err == nil {
			s.docs.close(p.TextDocument.URI)
		}
	case "textDocument/didSave":
		var p struct{ TextDocument versionedID }
		if err = decodeParams(raw, &p); err == nil {
			s.docs.saved(p.TextDocument.URI)
		}
	case "octet/diagnostics":
		var p diagnosticsParams
		if err = decodeParams(raw, &p); err == nil {
			if why := s.docs.diagnostics(p); why != "" {
				s.log.Debug("diagnostics not kept: "+why, "uri", p.URI)
			}
		}
	default:
		return false
	}
	if err != nil {
		s.log.Warn("bad document notification", "method", method, "error", err)
	}
	return true
}

func (d *documents) logger() *slog.Logger { return d.srv.log }

// open overlays a newly opened document. The log is written after the
// lock is released (it may go to the client).
func (d *documents) open(item textDocumentItem) {
	if msg, level := d.openLocked(item); msg != "" {
		d.logger().Log(context.Background(), level, msg, "uri", item.URI)
	}
}

// openLocked is open; it returns what to log.
func (d *documents) openLocked(item textDocumentItem) (string, slog.Level) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, path, why := d.locate(item.URI)
	if o == nil {
		return "document not overlaid: " + why, slog.LevelInfo
	}
	d.dropLocked(o, path)
	if why := d.admitLocked(len(item.Text)); why != "" {
		d.untrackLocked(o, path)
		return "document not overlaid: " + why + "; octet's tools read the file on disk and refuse to edit it", slog.LevelWarn
	}
	o.docs[path] = &document{uri: item.URI, version: item.Version, text: []byte(item.Text), unsaved: true}
	d.count++
	d.bytes += int64(len(item.Text))
	d.changedLocked()
	return "", 0
}

// admitLocked says why a document of n bytes cannot be overlaid ("" when
// it can). The caller holds d.mu.
func (d *documents) admitLocked(n int) string {
	switch {
	case n > MaxDocumentBytes:
		return fmt.Sprintf("larger than the %d MiB file limit", MaxDocumentBytes>>20)
	case d.count >= MaxOpenDocuments:
		return fmt.Sprintf("%d documents are already open (the overlay's bound)", MaxOpenDocuments)
	case d.bytes+int64(n) > MaxOverlayBytes:
		return fmt.Sprintf("the open documents already hold close to %d MiB (the overlay's bound)", MaxOverlayBytes>>20)
	}
	return ""
}

// untrackLocked remembers path as open but not overlaid (within
// maxUntracked). The caller holds d.mu.
func (d *documents) untrackLocked(o *overlay, path string) {
	if !o.untracked[path] && d.nUntrack < maxUntracked {
		o.untracked[path] = true
		d.nUntrack++
	}
}

// dropLocked removes a document, tracked or not. The caller holds d.mu.
func (d *documents) dropLocked(o *overlay, path string) {
	if o.untracked[path] {
		delete(o.untracked, path)
		d.nUntrack--
	}
	if doc := o.docs[path]; doc != nil {
		delete(o.docs, path)
		d.count--
		d.bytes -= int64(len(doc.text))
		d.changedLocked()
	}
}

func (d *documents) changedLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// change applies a didChange: full or incremental changes, in order.
func (d *documents) change(id versionedID, changes []contentChange) {
	if msg, level := d.changeLocked(id, changes); msg != "" {
		d.logger().Log(context.Background(), level, msg, "uri", id.URI)
	}
}

// changeLocked is change; it returns what to log.
func (d *documents) changeLocked(id versionedID, changes []contentChange) (string, slog.Level) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, path, _ := d.locate(id.URI)
	if o == nil || o.docs[path] == nil {
		return "change of a document that is not overlaid", slog.LevelDebug
	}
	doc := o.docs[path]
	text := doc.text
	for _, c := range changes {
		text = applyChange(text, c, d.enc)
	}
	if len(text) > MaxDocumentBytes || d.bytes+int64(len(text)-len(doc.text)) > MaxOverlayBytes {
		d.dropLocked(o, path)
		d.untrackLocked(o, path)
		return "document no longer overlaid: it grew past the overlay's bounds; octet's tools read the file on disk and refuse to edit it", slog.LevelWarn
	}
	d.bytes += int64(len(text) - len(doc.text))
	o.docs[path] = &document{uri: doc.uri, version: id.Version, text: text, unsaved: true, agent: doc.agent}
	d.changedLocked()
	return "", 0
}

// close drops a closed document.
func (d *documents) close(uri string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o, path, _ := d.locate(uri); o != nil {
		d.dropLocked(o, path)
	}
}

// applyChange returns text with one content change applied (a new
// slice; text is not modified).
func applyChange(text []byte, c contentChange, enc positionEncoding) []byte {
	if c.Range == nil {
		return []byte(c.Text)
	}
	start := offsetOf(text, c.Range.Start, enc)
	end := max(start, offsetOf(text, c.Range.End, enc))
	out := make([]byte, 0, len(text)-(end-start)+len(c.Text))
	out = append(out, text[:start]...)
	out = append(out, c.Text...)
	return append(out, text[end:]...)
}

// offsetOf converts an LSP position into a byte offset of text. A line
// past the end is the end of text; a character past the end of its line
// is the line's end (LSP); one inside a UTF-16 surrogate pair rounds up
// to the character's end.
func offsetOf(text []byte, pos lspPosition, enc positionEncoding) int {
	off := 0
	for range max(pos.Line, 0) {
		i := bytes.IndexByte(text[off:], '\n')
		if i < 0 {
			return len(text)
		}
		off += i + 1
	}
	lineEnd := len(text)
	if i := bytes.IndexByte(text[off:], '\n'); i >= 0 {
		lineEnd = off + i
		if lineEnd > off && text[lineEnd-1] == '\r' {
			lineEnd--
		}
	}
	line := text[off:lineEnd]
	if enc == encUTF8 {
		return off + min(max(pos.Character, 0), len(line))
	}
	units := 0
	for i, r := range string(line) {
		if units >= pos.Character {
			return off + i
		}
		units++
		if r >= 0x10000 {
			units++
		}
	}
	return lineEnd
}

// positionOf converts a byte offset of text into an LSP position.
func positionOf(text []byte, off int, enc positionEncoding) lspPosition {
	off = min(max(off, 0), len(text))
	before := text[:off]
	line := bytes.Count(before, []byte{'\n'})
	start := bytes.LastIndexByte(before, '\n') + 1
	seg := before[start:]
	if enc == encUTF8 {
		return lspPosition{Line: line, Character: len(seg)}
	}
	units := 0
	for _, r := range string(seg) {
		units++
		if r >= 0x10000 {
			units++
		}
	}
	return lspPosition{Line: line, Character: units}
}

// Document implements tools.Documents.
func (o *overlay) Document(path string) (tools.Document, bool) {
	o.d.mu.Lock()
	defer o.d.mu.Unlock()
	if !within(o.root, path) {
		return tools.Document{}, false
	}
	doc := o.docs[path]
	if doc == nil {
		return tools.Document{Untracked: o.untracked[path]}, o.untracked[path]
	}
	return tools.Document{Text: doc.text, Version: doc.version}, true
}

// AppliesEdits implements tools.Documents.
func (o *overlay) AppliesEdits() bool {
	o.d.mu.Lock()
	defer o.d.mu.Unlock()
	return o.d.applyEdit
}

// Errors of Apply; their text reaches the model.
var (
	errDocumentChanged = errors.New("the document changed in the editor since the change was computed; read it again")
	errDocumentClosed  = errors.New("the document was closed in the editor; read it again")
)

// textEdit and workspaceEdit are the LSP shapes of workspace/applyEdit.
type textEdit struct {
	Range   lspRange `json:"range"`
	NewText string   `json:"newText"`
}

type textDocumentEdit struct {
	TextDocument versionedID `json:"textDocument"`
	Edits        []textEdit  `json:"edits"`
}

type applyEditParams struct {
	Label string `json:"label"`
	Edit  struct {
		DocumentChanges []textDocumentEdit `json:"documentChanges"`
	} `json:"edit"`
}

// Apply implements tools.Documents: it sends workspace/applyEdit with the
// document version base was read at, and waits (bounded) until the
// editor's didChange shows the change.
func (o *overlay) Apply(ctx context.Context, path string, base tools.Document, updated []byte) error {
	o.d.mu.Lock()
	doc := o.docs[path]
	enc := o.d.enc
	o.d.mu.Unlock()
	switch {
	case doc == nil || !within(o.root, path):
		return errDocumentClosed
	case doc.version != base.Version || !bytes.Equal(doc.text, base.Text):
		return errDocumentChanged
	}
	var p applyEditParams
	p.Label = "octet: " + filepath.Base(path)
	p.Edit.DocumentChanges = []textDocumentEdit{{
		TextDocument: versionedID{URI: doc.uri, Version: doc.version},
		Edits:        textEdits(base.Text, updated, enc),
	}}
	timeout := o.d.srv.opts.RequestTimeout
	raw, err := o.d.srv.call(ctx, timeout, "workspace/applyEdit", p)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("cancelled while the editor was applying it: %w; read the file again", context.Cause(ctx))
		}
		return fmt.Errorf("the editor did not confirm it (%v, within %v); read the file again", err, timeout)
	}
	var res struct {
		Applied       bool   `json:"applied"`
		FailureReason string `json:"failureReason"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("the editor's answer %.200s is not an ApplyWorkspaceEditResult; read the file again", raw)
	}
	if !res.Applied {
		reason := res.FailureReason
		if reason == "" {
			reason = "no reason given"
		}
		return fmt.Errorf("the editor refused it (%s); read the file again", reason)
	}
	if err := o.awaitChange(ctx, path, base, timeout); err != nil {
		return err
	}
	o.d.agentChanged(path)
	return nil
}

// awaitChange waits until the document's version moves past base (the
// editor's didChange of the applied edit). Some editors answer applied
// for a version they silently skip, so a document still holding base's
// text is an error.
func (o *overlay) awaitChange(ctx context.Context, path string, base tools.Document, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		o.d.mu.Lock()
		doc, ch := o.docs[path], o.d.changed
		o.d.mu.Unlock()
		switch {
		case doc == nil:
			return errDocumentClosed
		case doc.version != base.Version && !bytes.Equal(doc.text, base.Text):
			return nil
		case doc.version != base.Version:
			return errors.New("the editor reported it applied but the document is unchanged; read the file again")
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("cancelled while waiting for the editor's change: %w", context.Cause(ctx))
		case <-t.C:
			return fmt.Errorf("the editor said it applied it but sent no didChange within %v; read the file again", timeout)
		}
	}
}

// textEdits returns the line-granular edits that turn old into updated,
// with ranges in enc (all relative to old, as LSP wants).
func textEdits(old, updated []byte, enc positionEncoding) []textEdit {
	edits := udiff.Lines(string(old), string(updated))
	out := make([]textEdit, 0, len(edits))
	for _, e := range edits {
		out = append(out, textEdit{
			Range:   lspRange{Start: positionOf(old, e.Start, enc), End: positionOf(old, e.End, enc)},
			NewText: e.New,
		})
	}
	return out
}

// documentStats reports the overlay's size (for tests and benchmarks).
func (d *documents) stats() (count int, bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count, d.bytes
}

// documentSyncOptions is the server's textDocumentSync capability:
// incremental changes, open/close and save notifications.
func documentSyncOptions() *protocol.TextDocumentSyncOptions {
	yes, incremental := true, protocol.TextDocumentSyncKindIncremental
	return &protocol.TextDocumentSyncOptions{OpenClose: &yes, Change: &incremental, Save: protocol.Boolean(true)}
}
