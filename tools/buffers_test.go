//go:build unix

package tools

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeBuffers is a Documents with EditorBuffers: saving clears the
// agent's edits it holds; unsaved lists what is left.
type fakeBuffers struct {
	*fakeDocs
	agent, user []string // absolute paths
	saves       []string // the reasons SaveAgentEdits was called with
}

func (f *fakeBuffers) SaveAgentEdits(_ context.Context, reason string) {
	f.saves = append(f.saves, reason)
	f.agent = nil
}

func (f *fakeBuffers) Unsaved() []string {
	return slices.Sorted(slices.Values(append(slices.Clone(f.agent), f.user...)))
}

// TestBufferGuardBeforeDiskReaders: only calls that read the disk (a
// process, an extension) have the editor save the agent's edits, and
// only when the policy would let them run or ask: a read of the overlay
// and a denied call do not. What stays unsaved is named in the approval
// (workspace-relative, outside the workspace absolute) and first in the
// result, with details.editorUnsaved.
func TestBufferGuardBeforeDiskReaders(t *testing.T) {
	ws := t.TempDir()
	bufs := &fakeBuffers{fakeDocs: newFakeDocs(), agent: []string{filepath.Join(ws, "a.go")}, user: []string{filepath.Join(ws, "sub", "b.go"), "/elsewhere/c.go"}}
	guard := NewBufferGuard(bufs, ws)
	if NewBufferGuard(newFakeDocs(), ws) != nil || NewBufferGuard(nil, ws) != nil {
		t.Fatal("a guard for documents without EditorBuffers")
	}
	read, shell, ext := newProbe("reader", WorkspaceRead), newShellProbe("sh"), newProbe("mcp__x__y", Extension)
	host := mustHost(t, read, shell, ext)
	ap := approveAll()
	br := NewBroker(BrokerConfig{Policy: ControlledBashApproval, Approver: ap, Buffers: guard})
	call := func(tool, args string) Result {
		res, _ := br.Dispatch(t.Context(), host, DispatchRequest{CallID: "c-" + tool, Tool: tool, Arguments: []byte(args)}, DispatchObserver{})
		return res
	}
	if res := call("reader", `{}`); len(bufs.saves) != 0 || strings.Contains(res.Text, "Not saved") {
		t.Errorf("a read of the overlay: saves %q, result %q", bufs.saves, res.Text)
	}
	const note = "Not saved in the editor (this call reads the file on disk, not the editor's text): /elsewhere/c.go, sub/b.go"
	res := call("sh", `{"command":"go test ./..."}`)
	if len(bufs.saves) != 1 || !strings.Contains(bufs.saves[0], "sh") {
		t.Errorf("before a command: saves %q", bufs.saves)
	}
	if reqs := ap.requests(); len(reqs) != 1 || !strings.HasSuffix(reqs[0].Detail, note) {
		t.Errorf("the command's approval %+v lacks %q", reqs, note)
	}
	if !strings.HasPrefix(res.Text, note+"\n\nok") || !slices.Equal(res.Details["editorUnsaved"].([]string), []string{"/elsewhere/c.go", "sub/b.go"}) {
		t.Errorf("the command's result %q %v", res.Text, res.Details)
	}
	bufs.agent = []string{filepath.Join(ws, "a.go")}
	if call("mcp__x__y", `{}`); len(bufs.saves) != 1 {
		t.Errorf("a call the policy denies (an extension under controlled) had the editor save: %q", bufs.saves)
	}
	br = NewBroker(BrokerConfig{Policy: UnsafeHost, Buffers: guard})
	if res := call("mcp__x__y", `{}`); len(bufs.saves) != 2 || !strings.HasPrefix(res.Text, note) {
		t.Errorf("an extension: saves %q, result %q", bufs.saves, res.Text)
	}
}
