package server

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/internal/testbin"
)

// TestNeovimDocumentCoherence runs headless Neovim (each of testNvims)
// with a.txt open and an unsaved line typed: the agent's approved edit
// lands in the buffer through workspace/applyEdit, the unsaved line
// survives, the disk is untouched until :w, :undo reverts only the
// agent's edit, and :redo then :w writes both.
func TestNeovimDocumentCoherence(t *testing.T) {
	eachNvim(t, "documents_test.lua", runNvimDocuments)
}

func runNvimDocuments(t *testing.T, nvim, bin, script string) {
	w := newRealWorld(t, bin)
	writeFile(t, filepath.Join(w.ws, "a.txt"), "hello world\nthird\n")
	editScript(&stack{&hosttest.Stack{Provider: w.prov}})
	res, out := w.runNvim(t, nvim, script)
	t.Logf("nvim result:\n%s", res)
	if !strings.HasPrefix(res, "ok\n") {
		t.Fatalf("neovim document coherence failed:\n%s\nnvim output: %s", res, out)
	}
	if !strings.Contains(res, "version") {
		t.Errorf("the approval did not state the document version:\n%s", res)
	}
}

// TestVSCodeJSONRPCDocumentCoherence drives the built `octet lsp` with
// vscode-jsonrpc and a VS Code-like document model
// (testdata/vscode/documents.js): an unsaved line typed in the buffer
// survives the agent's edit, which arrives as workspace/applyEdit at the
// buffer's version and leaves the disk alone; undo reverts it; saving
// keeps both.
func TestVSCodeJSONRPCDocumentCoherence(t *testing.T) {
	vscodeClient(t)
	w := newRealWorld(t, testbin.Octet(t))
	writeFile(t, filepath.Join(w.ws, "a.txt"), "hello world\nthird\n")
	editScript(&stack{&hosttest.Stack{Provider: w.prov}})
	var got struct {
		Confirms                                   []struct{ Tool, Detail string }
		ApplyEdits                                 []struct{ Version, Edits int }
		Prompt                                     promptAnswer
		AfterEdit, DiskAfterEdit, AfterUndo, Saved string
		Errors                                     []string
		ExitCode                                   int
	}
	w.runNode(t, "documents.js", &got)
	const typed = "typed \U0001F600 here\n"
	if got.Prompt.Outcome != "completed" || got.AfterEdit != "goodbye world\n"+typed+"third\n" {
		t.Errorf("prompt %+v; buffer after the edit %q", got.Prompt, got.AfterEdit)
	}
	if got.DiskAfterEdit != "hello world\nthird\n" {
		t.Errorf("the edit was written behind the buffer: disk %q", got.DiskAfterEdit)
	}
	if got.AfterUndo != "hello world\n"+typed+"third\n" || got.Saved != got.AfterEdit {
		t.Errorf("after undo %q; saved %q", got.AfterUndo, got.Saved)
	}
	if len(got.ApplyEdits) != 1 || got.ApplyEdits[0].Version != 2 || len(got.Confirms) != 1 || !strings.Contains(got.Confirms[0].Detail, "version 2") {
		t.Errorf("applyEdit %+v, confirms %+v", got.ApplyEdits, got.Confirms)
	}
	if len(got.Errors) != 0 || got.ExitCode != 0 {
		t.Errorf("errors %v, exit %d", got.Errors, got.ExitCode)
	}
}
