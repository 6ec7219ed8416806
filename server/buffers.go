package server

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"

	"github.com/octet-agent/octet/tools"
)

// Buffers and commands agree: octet's edits of open documents go to the
// editor's buffers (workspace/applyEdit) and stay unsaved, while a
// command (bash) reads the files on disk. The overlay remembers which
// documents may differ from their files (opened or changed since their
// last didSave) and which octet changed; before a call that reads the
// disk, the broker has the overlay ask the editor to save octet's edits
// (octet/saveDocuments, for a client that advertises
// experimental.octet.saveDocuments) and names the files that still
// differ (tools.BufferGuard).

var _ tools.EditorBuffers = (*overlay)(nil)

// saveDocumentsParams are the params of octet/saveDocuments.
type saveDocumentsParams struct {
	URIs   []string `json:"uris"`
	Reason string   `json:"reason"`
}

// saved records a didSave: the document's text is its file's.
func (d *documents) saved(uri string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o, path, _ := d.locate(uri); o != nil {
		if doc := o.docs[path]; doc != nil {
			doc.unsaved, doc.agent = false, false
		}
	}
}

// agentChanged records that octet changed the document at path through
// the editor.
func (d *documents) agentChanged(path string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if doc := d.docs[path]; doc != nil {
		doc.agent = true
	}
}

// savedAs records that the document at path, still at version, was found
// equal to its file.
func (d *documents) savedAs(path string, version int32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if doc := d.docs[path]; doc != nil && doc.version == version {
		doc.unsaved, doc.agent = false, false
	}
}

// bufferState is a snapshot of one open document for the checks below.
type bufferState struct {
	path, uri string
	version   int32
	text      []byte
	agent     bool
}

// maybeUnsaved returns the overlay's documents that may differ from their
// files, sorted by path.
func (o *overlay) maybeUnsaved() []bufferState {
	o.d.mu.Lock()
	defer o.d.mu.Unlock()
	var out []bufferState
	for path, doc := range o.docs {
		if doc.unsaved && within(o.root, path) {
			out = append(out, bufferState{path: path, uri: doc.uri, version: doc.version, text: doc.text, agent: doc.agent})
		}
	}
	slices.SortFunc(out, func(a, b bufferState) int { return strings.Compare(a.path, b.path) })
	return out
}

// differing returns the documents of states whose text is not their
// file's, and records the others as saved.
func (o *overlay) differing(states []bufferState) []bufferState {
	var out []bufferState
	for _, st := range states {
		if sameAsFile(st.path, st.text) {
			o.d.savedAs(st.path, st.version)
			continue
		}
		out = append(out, st)
	}
	return out
}

// sameAsFile reports whether the file at path holds exactly text (what a
// command reading it sees: links are followed, as the editor follows
// them).
func sameAsFile(path string, text []byte) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(text)) {
		return false
	}
	data, err := os.ReadFile(path)
	return err == nil && bytes.Equal(data, text)
}

// Unsaved implements tools.EditorBuffers.
func (o *overlay) Unsaved() []string {
	var out []string
	for _, st := range o.differing(o.maybeUnsaved()) {
		out = append(out, st.path)
	}
	return out
}

// SaveAgentEdits implements tools.EditorBuffers: octet/saveDocuments for
// the documents octet changed that differ from their files. The editor
// may ask the person first (a buffer the user edited too), so the
// request waits as long as an approval does; what it saved shows on
// disk, which Unsaved reads.
func (o *overlay) SaveAgentEdits(ctx context.Context, reason string) {
	o.d.mu.Lock()
	can := o.d.saveDocuments
	o.d.mu.Unlock()
	if !can {
		return
	}
	var p saveDocumentsParams
	for _, st := range o.differing(o.maybeUnsaved()) {
		if st.agent {
			p.URIs = append(p.URIs, st.uri)
		}
	}
	if len(p.URIs) == 0 {
		return
	}
	p.Reason = reason
	srv := o.d.srv
	raw, err := srv.call(ctx, srv.opts.ApprovalTimeout, "octet/saveDocuments", p)
	if err != nil {
		srv.log.Warn("octet/saveDocuments failed; the call's approval and result name the unsaved files", "error", err)
		return
	}
	var res struct {
		Saved    []string `json:"saved"`
		Declined []string `json:"declined"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		srv.log.Warn("octet/saveDocuments answer is not {saved, declined}", "answer", string(raw))
		return
	}
	srv.log.Debug("octet/saveDocuments answered", "saved", len(res.Saved), "declined", len(res.Declined))
}
