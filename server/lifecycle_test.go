package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/tools"
)

// TestRequestsBeforeInitialize checks -32002 for every request before
// initialize, and that notifications before it are dropped harmlessly.
func TestRequestsBeforeInitialize(t *testing.T) {
	e := newEditor(t, Options{Runtime: &host.Runtime{SessionsDir: t.TempDir()}})
	e.notify("$/setTrace", map[string]string{"value": "verbose"})
	for _, m := range []string{"octet/session/new", "octet/prompt", "shutdown", "workspace/executeCommand", "no/such"} {
		err := e.call(m, map[string]any{}, nil)
		if codeOf(err) != jsonrpc2.ServerNotInitialized {
			t.Errorf("%s before initialize: error %v (code %d), want -32002", m, err, codeOf(err))
		}
	}
	res := e.initialize(t.TempDir(), nil)
	if res["capabilities"] == nil {
		t.Fatalf("initialize result has no capabilities: %v", res)
	}
	if err := e.call("initialize", map[string]any{}, nil); codeOf(err) != jsonrpc2.InvalidRequest {
		t.Errorf("second initialize: %v, want InvalidRequest", err)
	}
}

// TestHandshake checks the advertised capabilities and the whole
// lifecycle: initialize (with "trace": null), initialized, shutdown, a
// request after shutdown, exit.
func TestHandshake(t *testing.T) {
	e := newEditor(t, Options{Runtime: &host.Runtime{SessionsDir: t.TempDir()}, Version: "test"})
	res := e.initialize(t.TempDir(), map[string]any{"confirmEffect": true})
	caps, _ := res["capabilities"].(map[string]any)
	exp, _ := caps["experimental"].(map[string]any)
	octet, _ := exp["octet"].(map[string]any)
	if octet["version"] != float64(2) || !strings.Contains(fmt.Sprint(octet["features"]), "octet/session/close") {
		t.Errorf("experimental.octet version %v features %v, want 2 with octet/session/close (caps %v)", octet["version"], octet["features"], caps)
	}
	ecp, _ := caps["executeCommandProvider"].(map[string]any)
	got := fmt.Sprint(ecp["commands"])
	for _, c := range []string{"octet.prompt", "octet.cancel", "octet.approve", "octet.deny"} {
		if !strings.Contains(got, c) {
			t.Errorf("executeCommandProvider.commands %s lacks %s", got, c)
		}
	}
	if si, _ := res["serverInfo"].(map[string]any); si["name"] != "octet" || si["version"] != "test" {
		t.Errorf("serverInfo = %v", res["serverInfo"])
	}
	e.notify("$/setTrace", map[string]string{"value": "off"})
	var out any
	e.mustCall("shutdown", nil, &out)
	if out != nil {
		t.Errorf("shutdown result = %v, want null", out)
	}
	if err := e.call("octet/session/list", nil, nil); codeOf(err) != jsonrpc2.InvalidRequest {
		t.Errorf("request after shutdown: %v, want InvalidRequest", err)
	}
	e.notify("exit", nil)
	select {
	case err := <-e.served:
		if err != nil {
			t.Errorf("Serve after shutdown+exit = %v, want nil", err)
		}
		e.served <- err
	case <-time.After(editorTimeout):
		t.Fatal("Serve did not return after exit")
	}
}

// TestExitWithoutShutdown checks the LSP rule: exit before shutdown is an
// error exit.
func TestExitWithoutShutdown(t *testing.T) {
	e := newEditor(t, Options{Runtime: &host.Runtime{SessionsDir: t.TempDir()}})
	e.initialize(t.TempDir(), nil)
	e.notify("exit", nil)
	select {
	case err := <-e.served:
		if err != ErrExitWithoutShutdown {
			t.Errorf("Serve = %v, want ErrExitWithoutShutdown", err)
		}
		e.served <- err
	case <-time.After(editorTimeout):
		t.Fatal("Serve did not return after exit")
	}
}

// TestBadParamsAndUnknownMethods checks that bad params and unknown
// methods get errors and the server keeps serving.
func TestBadParamsAndUnknownMethods(t *testing.T) {
	e := newEditor(t, Options{Runtime: &host.Runtime{SessionsDir: t.TempDir()}})
	e.initialize(t.TempDir(), nil)
	cases := []struct {
		method string
		params any
		code   jsonrpc2.Code
	}{
		{"octet/prompt", json.RawMessage(`[1,2]`), jsonrpc2.InvalidParams},
		{"octet/prompt", map[string]any{"sessionId": 7}, jsonrpc2.InvalidParams},
		{"octet/prompt", map[string]any{"sessionId": "nope", "text": "hi"}, CodeNoSession},
		{"octet/steer", map[string]any{"runId": "run_nope", "text": "x"}, CodeNoRun},
		{"octet/cancel", nil, jsonrpc2.InvalidParams},
		{"octet/session/resume", map[string]any{"sessionId": "../../etc/passwd"}, CodeNoSession},
		{"octet/nothing", nil, jsonrpc2.MethodNotFound},
		{"workspace/executeCommand", map[string]any{"command": "rm -rf"}, jsonrpc2.InvalidParams},
		{"octet/session/new", map[string]any{"reasoning": "maximum"}, jsonrpc2.InvalidParams},
	}
	for _, c := range cases {
		err := e.call(c.method, c.params, nil)
		if codeOf(err) != c.code {
			t.Errorf("%s %v: %v (code %d), want code %d", c.method, c.params, err, codeOf(err), c.code)
		}
	}
	// Notifications with garbage never end the connection.
	e.notify("$/cancelRequest", json.RawMessage(`{"id":{"x":1}}`))
	e.notify("$/setTrace", json.RawMessage(`"verbose"`))
	e.notify("window/workDoneProgress/cancel", json.RawMessage(`[]`))
	e.notify("textDocument/didOpen", json.RawMessage(`{}`))
	var list struct {
		Sessions []any `json:"sessions"`
	}
	e.mustCall("octet/session/list", map[string]any{}, &list)
	if list.Sessions == nil {
		t.Errorf("session/list returned no sessions array")
	}
}

// TestLogMessageWhenAsked checks logs reach window/logMessage only when the
// client asks for them ($/setTrace or initializationOptions.logLevel).
func TestLogMessageWhenAsked(t *testing.T) {
	st := newStack(t, tools.Controlled)
	e := newEditor(t, Options{Runtime: st.Runtime})
	e.mustCall("initialize", map[string]any{"rootUri": "file://" + st.Workspace, "capabilities": map[string]any{}}, nil)
	e.newSession()
	logged := func(notes []note) bool {
		for _, n := range notes {
			if n.Method == "window/logMessage" && strings.Contains(string(n.Params), "session created") {
				return true
			}
		}
		return false
	}
	e.mu.Lock()
	early := logged(e.notes)
	e.mu.Unlock()
	if early {
		t.Errorf("window/logMessage sent although the client did not ask")
	}
	e.notify("$/setTrace", map[string]string{"value": "messages"})
	e.newSession()
	e.await("window/logMessage after $/setTrace messages", logged)
}

// TestHandlerPanicAnswered checks a panic inside a handler (a runtime
// with a broken invariant) is answered with -32603 and the server keeps
// serving.
func TestHandlerPanicAnswered(t *testing.T) {
	rt := &host.Runtime{SessionsDir: t.TempDir(), Catalog: func() host.Catalog { panic("broken invariant") }}
	e := newEditor(t, Options{Runtime: rt})
	e.initialize(t.TempDir(), nil)
	err := e.call("octet/models", nil, nil)
	if codeOf(err) != jsonrpc2.InternalError || !strings.Contains(err.Error(), "broken invariant") {
		t.Errorf("panicking handler: %v, want -32603", err)
	}
	var out any
	e.mustCall("shutdown", nil, &out)
}
