package acp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// TestDescribeApplyPatch: an apply_patch call is an edit whose locations
// are every file the patch names (a move's destination included), named
// in its one-line title.
func TestDescribeApplyPatch(t *testing.T) {
	args, _ := json.Marshal(map[string]string{"input": "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: b.txt\n*** Move to: c.txt\n*** End Patch"})
	v := describeCall("/ws", "apply_patch", args)
	if v.kind != "edit" {
		t.Errorf("kind %q", v.kind)
	}
	var paths []string
	for _, l := range v.locations {
		paths = append(paths, l["path"].(string))
	}
	if strings.Join(paths, " ") != "/ws/a.txt /ws/b.txt /ws/c.txt" {
		t.Errorf("locations %v", paths)
	}
	if v.title != "`apply_patch a.txt, b.txt, c.txt`" || strings.Contains(v.title, "\n") {
		t.Errorf("title %q", v.title)
	}
	// A patch that does not parse is shown by name only.
	if v := describeCall("/ws", "apply_patch", []byte(`{"input":"nonsense"}`)); v.title != "`apply_patch`" || len(v.locations) != 0 {
		t.Errorf("unparsable patch: %+v", v)
	}
}

// TestClientOwnedApplyPatch: an apply_patch through an ACP client with
// fs capabilities computes the update against the client's text and
// writes it with fs/write_text_file (never behind the editor), adds the
// new file on disk, and asks one permission showing both diffs.
func TestClientOwnedApplyPatch(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	path := filepath.Join(p.ws, "a.txt")
	os.WriteFile(path, []byte("disk\n"), 0o600)
	var mu sync.Mutex
	buffer := "buffer text\n"
	var wrote []string
	ps := p.answerPermissions("allow_once", func(m message) (any, *rpcError) {
		var req struct{ Path, Content string }
		_ = json.Unmarshal(m.Params, &req)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case m.Method == "fs/read_text_file" && req.Path == path:
			return map[string]any{"content": buffer}, nil
		case m.Method == "fs/write_text_file":
			wrote = append(wrote, req.Path+"="+req.Content)
			buffer = req.Content
			return map[string]any{}, nil
		}
		return nil, &rpcError{Code: codeResourceNotFound, Message: "no such buffer"}
	})
	patch, _ := json.Marshal(map[string]string{"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-buffer text\n+patched\n*** Add File: b.txt\n+new\n*** End Patch"})
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "apply_patch", string(patch))), providertest.Text("ok"))
	p.initialize(true)
	id := p.newSession()
	if stop := p.prompt(id, "patch"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(wrote, []string{path + "=patched\n"}) {
		t.Errorf("fs/write_text_file calls %q", wrote)
	}
	if s, _ := os.ReadFile(path); string(s) != "disk\n" {
		t.Errorf("disk %q: the update went behind the editor", s)
	}
	if s, _ := os.ReadFile(filepath.Join(p.ws, "b.txt")); string(s) != "new\n" {
		t.Errorf("b.txt = %q", s)
	}
	a := ps.list()
	if len(a) != 1 {
		t.Fatalf("%d permission requests, want one for the whole patch", len(a))
	}
	if text := permissionText(a[0].content); !strings.Contains(text, "-buffer text\n+patched\n") || !strings.Contains(text, "+++ b/b.txt") {
		t.Errorf("permission content lacks a file's diff:\n%s", text)
	}
}
