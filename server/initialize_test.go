package server

import (
	"testing"

	"go.lsp.dev/jsonrpc2"
)

// TestParseInitializeLenient checks odd but real-world initialize params
// are accepted and the workspace comes from the params, never the cwd.
func TestParseInitializeLenient(t *testing.T) {
	cases := []struct {
		name, params, workspace string
		confirm, progress       bool
	}{
		{"trace null, rootUri null", `{"processId":null,"rootUri":null,"capabilities":{},"trace":null}`, "", false, false},
		{"folders win over rootUri", `{"rootUri":"file:///a","workspaceFolders":[{"uri":"file:///b/c","name":"c"}],"capabilities":{"window":{"workDoneProgress":true}}}`, "/b/c", false, true},
		{"rootPath fallback", `{"rootPath":"/p/q","capabilities":null}`, "/p/q", false, false},
		{"relative rootPath ignored", `{"rootPath":"rel"}`, "", false, false},
		{"non-file uri ignored", `{"rootUri":"https://example.com/x"}`, "", false, false},
		{"escaped uri", `{"rootUri":"file:///my%20dir"}`, "/my dir", false, false},
		{"mistyped capabilities", `{"rootUri":"file:///w","capabilities":{"window":"yes","experimental":{"octet":true}},"workspaceFolders":7,"trace":5}`, "/w", false, false},
		{"octet caps", `{"capabilities":{"experimental":{"octet":{"confirmEffect":true,"events":"yes"}}}}`, "", true, false},
		{"empty params", ``, "", false, false},
	}
	for _, c := range cases {
		p, err := parseInitialize([]byte(c.params))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if ws := workspaceFromParams(p); ws != c.workspace || p.ConfirmEffect != c.confirm || p.WorkDoneProgress != c.progress {
			t.Errorf("%s: workspace %q confirm %v progress %v, want %q %v %v", c.name, ws, p.ConfirmEffect, p.WorkDoneProgress, c.workspace, c.confirm, c.progress)
		}
	}
	if _, err := parseInitialize([]byte(`[1]`)); codeOf(err) != jsonrpc2.InvalidParams {
		t.Errorf("array params: %v, want InvalidParams", err)
	}
}

// TestEmptyArrayParams checks that [] params (Neovim encodes an empty Lua
// table {} as []) mean "all defaults", like absent params, while other
// non-object params are still refused.
func TestEmptyArrayParams(t *testing.T) {
	for _, raw := range []string{`[]`, `[ ]`, ` [
] `} {
		var p struct{ Cwd string }
		if err := decodeParams([]byte(raw), &p); err != nil {
			t.Errorf("decodeParams(%q): %v", raw, err)
		}
	}
	for _, raw := range []string{`[1]`, `["x"]`, `7`, `"s"`, `[`} {
		var p struct{ Cwd string }
		if err := decodeParams([]byte(raw), &p); codeOf(err) != jsonrpc2.InvalidParams {
			t.Errorf("decodeParams(%q): %v, want InvalidParams", raw, err)
		}
	}
}
