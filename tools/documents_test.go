//go:build unix

package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeDocs is an in-memory editor: open documents by path, and the
// edits Apply was asked for.
type fakeDocs struct {
	mu      sync.Mutex
	docs    map[string]Document
	applies bool
	applied []Document // base of each Apply
	err     error
}

func newFakeDocs() *fakeDocs { return &fakeDocs{docs: map[string]Document{}, applies: true} }

func (f *fakeDocs) open(path, text string, version int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.docs[path] = Document{Text: []byte(text), Version: version}
}

func (f *fakeDocs) Document(path string) (Document, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.docs[path]
	return d, ok
}

func (f *fakeDocs) AppliesEdits() bool { return f.applies }

func (f *fakeDocs) Apply(_ context.Context, path string, base Document, updated []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, base)
	if f.err != nil {
		return f.err
	}
	f.docs[path] = Document{Text: updated, Version: base.Version + 1}
	return nil
}

// TestApprovalDigestCoversDocumentVersion: the same edit call previewed
// against two versions of an open document is asked for with two
// digests (and the prompt states the version); against one version, one.
func TestApprovalDigestCoversDocumentVersion(t *testing.T) {
	ws := t.TempDir()
	path := filepath.Join(ws, "a.txt")
	writeTestFile(t, path, "hello\n")
	docs := newFakeDocs()
	ed, err := NewEdit(Config{Root: ws, Documents: docs})
	if err != nil {
		t.Fatal(err)
	}
	host := mustHost(t, ed)
	ap := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: false, Digest: r.Digest}, nil
	}}
	br := NewBroker(BrokerConfig{Policy: Controlled, Approver: ap})
	ask := func() {
		br.Dispatch(t.Context(), host, DispatchRequest{CallID: "c", Tool: "edit",
			Arguments: argsJSON(t, map[string]any{"path": "a.txt", "old_text": "hello", "new_text": "bye"})}, DispatchObserver{})
	}
	docs.open(path, "hello\nunsaved\n", 4)
	ask()
	ask()
	docs.open(path, "hello\nunsaved\n", 5)
	ask()
	reqs := ap.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d approval requests", len(reqs))
	}
	if reqs[0].Digest != reqs[1].Digest || reqs[1].Digest == reqs[2].Digest {
		t.Errorf("digests %s %s %s: want equal for one version, different for another", reqs[0].Digest, reqs[1].Digest, reqs[2].Digest)
	}
	if reqs[2].Digest == reqs[2].Intent.Digest() {
		t.Error("the digest of an editor-document edit is the bare intent digest")
	}
	if !strings.Contains(reqs[0].Detail, "version 4") || !strings.Contains(reqs[2].Detail, "version 5") {
		t.Errorf("details %q / %q do not state the version", reqs[0].Detail, reqs[2].Detail)
	}
}

// TestEditAndWriteRouteOpenDocuments: with an editor that applies edits,
// edit and write of an open document go to Apply (computed against the
// buffer), never to disk; a failing Apply is a tool error; an editor that
// does not apply edits keeps the disk path; read sees the buffer.
func TestEditAndWriteRouteOpenDocuments(t *testing.T) {
	ws := t.TempDir()
	path := filepath.Join(ws, "a.txt")
	writeTestFile(t, path, "hello\n")
	docs := newFakeDocs()
	docs.open(path, "hello\nunsaved\n", 7)
	cfg := Config{Root: ws, Documents: docs, Files: NewFileTracker()}
	ed, _ := NewEdit(cfg)
	wr, _ := NewWrite(cfg)
	rd, _ := NewRead(cfg)
	ctx := t.Context()
	res, _ := rd.Execute(ctx, Invocation{CallID: "r", Arguments: argsJSON(t, map[string]any{"path": "a.txt"})})
	if !strings.Contains(res.Text, "unsaved") || res.Details["source"] != "editor" || res.Details["version"] != int32(7) {
		t.Fatalf("read %q %v", res.Text, res.Details)
	}
	res, _ = ed.Execute(ctx, Invocation{CallID: "e", Arguments: argsJSON(t, map[string]any{"path": "a.txt", "old_text": "hello", "new_text": "bye"})})
	if res.IsError || string(docs.docs[path].Text) != "bye\nunsaved\n" || readTestFile(t, path) != "hello\n" {
		t.Fatalf("edit %q; buffer %q; disk %q", res.Text, docs.docs[path].Text, readTestFile(t, path))
	}
	res, _ = wr.Execute(ctx, Invocation{CallID: "w", Arguments: argsJSON(t, map[string]any{"path": "a.txt", "content": "whole\n"})})
	if res.IsError || string(docs.docs[path].Text) != "whole\n" || readTestFile(t, path) != "hello\n" {
		t.Fatalf("write %q; buffer %q; disk %q", res.Text, docs.docs[path].Text, readTestFile(t, path))
	}
	if len(docs.applied) != 2 || docs.applied[0].Version != 7 || docs.applied[1].Version != 8 {
		t.Errorf("Apply bases %+v", docs.applied)
	}
	docs.err = errors.New("the editor refused it")
	res, _ = ed.Execute(ctx, Invocation{CallID: "e2", Arguments: argsJSON(t, map[string]any{"path": "a.txt", "old_text": "whole", "new_text": "x"})})
	if !res.IsError || !strings.Contains(res.Text, "open in the editor and the change was not applied: the editor refused it") {
		t.Errorf("failed Apply: %+v", res)
	}
	untracked := filepath.Join(ws, "big.txt")
	writeTestFile(t, untracked, "on disk\n")
	docs.docs[untracked] = Document{Untracked: true}
	res, _ = rd.Execute(ctx, Invocation{CallID: "r2", Arguments: argsJSON(t, map[string]any{"path": "big.txt"})})
	if !strings.Contains(res.Text, "on disk") {
		t.Errorf("read of an untracked document: %q", res.Text)
	}
	res, _ = wr.Execute(ctx, Invocation{CallID: "w3", Arguments: argsJSON(t, map[string]any{"path": "big.txt", "content": "x\n"})})
	if !res.IsError || !strings.Contains(res.Text, "too large (or one of too many open documents) for octet to track") || readTestFile(t, untracked) != "on disk\n" {
		t.Errorf("write of an untracked document: %q", res.Text)
	}
	// An editor octet does not change through: a saved buffer keeps the
	// disk path; one with unsaved text (also a buffer with no file yet)
	// is never written behind.
	docs.applies = false
	saved := filepath.Join(ws, "s.txt")
	writeTestFile(t, saved, "same\n")
	docs.open(saved, "same\n", 1)
	res, _ = wr.Execute(ctx, Invocation{CallID: "w4", Arguments: argsJSON(t, map[string]any{"path": "s.txt", "content": "disk\n"})})
	if res.IsError || readTestFile(t, saved) != "disk\n" {
		t.Errorf("without AppliesEdits, a saved buffer: %q, disk %q", res.Text, readTestFile(t, saved))
	}
	other := filepath.Join(ws, "c.txt")
	docs.open(other, "buffer\n", 1)
	for _, args := range []map[string]any{
		{"path": "c.txt", "content": "disk\n"},
		{"path": "a.txt", "content": "disk\n"},
	} {
		res, _ = wr.Execute(ctx, Invocation{CallID: "w2", Arguments: argsJSON(t, args)})
		if !res.IsError || !strings.Contains(res.Text, "open in the editor with unsaved changes") {
			t.Errorf("without AppliesEdits, write of an unsaved buffer %v: %q", args["path"], res.Text)
		}
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) || readTestFile(t, path) != "hello\n" {
		t.Errorf("written behind unsaved buffers: c.txt %v, a.txt %q", err, readTestFile(t, path))
	}
}

// TestSearchSeesOpenDocuments: search matches an open document's buffer
// and names it in details.
func TestSearchSeesOpenDocuments(t *testing.T) {
	ws := t.TempDir()
	writeTestFile(t, filepath.Join(ws, "a.txt"), "saved\n")
	writeTestFile(t, filepath.Join(ws, "b.txt"), "other\n")
	docs := newFakeDocs()
	docs.open(filepath.Join(ws, "a.txt"), "saved\nunsaved needle\n", 2)
	s, err := NewSearch(Config{Root: ws, Documents: docs})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".", "a.txt"} {
		res, _ := s.Execute(t.Context(), Invocation{CallID: "s", Arguments: argsJSON(t, map[string]any{"pattern": "needle", "path": p})})
		if !strings.Contains(res.Text, "a.txt:2:unsaved needle") || res.Details["source"] != "editor" {
			t.Errorf("path %s: %q %v", p, res.Text, res.Details)
		}
	}
}

func readTestFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
