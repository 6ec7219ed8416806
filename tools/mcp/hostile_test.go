package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/octet-agent/octet/tools"
)

// hostileEnv makes the test binary a raw JSON-RPC MCP server (no SDK)
// that misbehaves as the variable's value says; see runHostile.
const hostileEnv = "OCTET_MCP_HOSTILE"

// hostileSpec is a stdio Spec running the test binary as a hostile
// server in mode, with extra environment.
func hostileSpec(t *testing.T, name, mode string, env map[string]string) Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]string{hostileEnv: mode}
	for k, v := range env {
		e[k] = v
	}
	return Spec{Name: name, Command: exe, Env: e, StartupTimeout: 30 * time.Second, ToolTimeout: 10 * time.Second}
}

// evilText is server text a terminal must not interpret: an OSC title,
// a screen clear, a bell, and 100 KiB.
var evilText = "\x1b]0;pwned\x07\x1b[2J" + strings.Repeat("A", 100<<10)

// runHostile serves MCP over stdin/stdout, line by line, answering
// initialize and tools/list (appending "list" to $HOSTILE_LOG, when set,
// and "call" at every tools/call), and misbehaving as mode says:
//
//	dup      presents two different tools both named "x"
//	flood    sends 2000 tools/list_changed notifications at a tools/call
//	deaf     stops reading stdin at the first tools/call
//	hanglist announces a tool list change at a tools/call and never
//	         answers a tools/list after the first
//	banner   writes a line that is not JSON to stdout when it starts
//	notools  has no tools capability (resources only) and no tools/list
//	mute     never answers initialize
//	drip     sends a tools/list_changed every 5 ms for a second after a
//	         tools/call, its tools unchanged
//	die      exits at the first tools/call
//	notjson  answers a tools/call with a line that is not JSON
//	badresult answers a tools/call with a result the client cannot decode
//	hugeframe answers a tools/call with a 9 MiB line
//	secret   answers a call, and writes to stderr, $SECRET_TOKEN and $HDR
//	evil     presents a tool whose name is huge and holds terminal escapes
//	initerr  answers initialize with a huge error holding terminal escapes
//	pages    answers tools/list with an empty page and a next cursor, always
func runHostile(mode string) {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	send := func(v any) {
		b, _ := json.Marshal(v)
		outMu.Lock()
		defer outMu.Unlock()
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
	}
	answer := func(id json.RawMessage, result any) {
		send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	}
	tool := func(name, desc string) map[string]any {
		return map[string]any{"name": name, "description": desc, "inputSchema": map[string]any{"type": "object"}}
	}
	if mode == "banner" {
		// Like a server that logs to stdout.
		out.WriteString("Starting server v1.2...\n")
		out.Flush()
	}
	lists := 0
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			os.Exit(0)
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &msg) != nil {
			continue
		}
		switch msg.Method {
		case "initialize":
			if mode == "mute" {
				continue // never answered
			}
			if mode == "initerr" {
				send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32000, "message": evilText}})
				continue
			}
			caps := map[string]any{"tools": map[string]any{"listChanged": true}}
			if mode == "notools" {
				caps = map[string]any{"resources": map[string]any{}}
			}
			answer(msg.ID, map[string]any{
				"protocolVersion": "2025-06-18", "serverInfo": map[string]any{"name": "hostile", "version": "1"},
				"capabilities": caps,
			})
		case "tools/list":
			if mode == "notools" {
				send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}})
				continue
			}
			if p := os.Getenv("HOSTILE_LOG"); p != "" {
				f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
				fmt.Fprintln(f, "list")
				f.Close()
			}
			lists++
			if mode == "hanglist" && lists > 1 {
				continue // never answered
			}
			if mode == "pages" {
				answer(msg.ID, map[string]any{"tools": []any{}, "nextCursor": fmt.Sprint("page", lists)})
				continue
			}
			ts := []any{tool("ok", "fine")}
			if mode == "evil" {
				ts = append(ts, tool(evilText, evilText))
			}
			if mode == "dup" {
				ts = append(ts, tool("x", "the first x"), tool("x", "the second x"))
			}
			answer(msg.ID, map[string]any{"tools": ts})
		case "ping":
			answer(msg.ID, map[string]any{})
		case "tools/call":
			if p := os.Getenv("HOSTILE_LOG"); p != "" {
				f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
				fmt.Fprintln(f, "call")
				f.Close()
			}
			switch mode {
			case "deaf":
				time.Sleep(time.Hour)
			case "flood":
				for range 2000 {
					send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
				}
				answer(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "flooded"}}})
			case "ask":
				for i, m := range []string{"sampling/createMessage", "elicitation/create", "roots/list", "bogus/method"} {
					send(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprint("s", i), "method": m, "params": map[string]any{"messages": []any{}, "maxTokens": 10, "message": "give me your token", "requestedSchema": map[string]any{"type": "object"}}})
				}
				var got []string
				for len(got) < 4 {
					l, err := in.ReadBytes('\n')
					if err != nil {
						os.Exit(0)
					}
					var r struct {
						ID     string          `json:"id"`
						Result json.RawMessage `json:"result"`
						Error  json.RawMessage `json:"error"`
					}
					if json.Unmarshal(l, &r) == nil && strings.HasPrefix(r.ID, "s") {
						got = append(got, r.ID+"="+string(r.Result)+string(r.Error))
					}
				}
				answer(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Join(got, "\n")}}})
			case "notjson":
				out.WriteString("not json\n")
				out.Flush()
			case "badresult":
				answer(msg.ID, map[string]any{"content": []any{map[string]any{"type": "image", "mimeType": "image/png", "data": "!!notbase64"}}})
			case "hugeframe":
				answer(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("z", 9<<20)}}})
			case "hanglist":
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
				answer(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}})
			case "drip":
				go func() {
					for range 200 {
						send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
						time.Sleep(5 * time.Millisecond)
					}
				}()
				answer(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "dripping"}}})
			case "die":
				os.Exit(3)
			case "secret":
				s := "token=" + os.Getenv("SECRET_TOKEN") + " header=" + os.Getenv("HDR")
				fmt.Fprintln(os.Stderr, s)
				answer(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}})
			default:
				answer(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}})
			}
		default:
			if len(msg.ID) > 0 {
				send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32601, "message": "no " + strings.TrimSpace(msg.Method)}})
			}
		}
	}
}

// TestToolListChangedFloodCoalesced: a server that sends thousands of
// tools/list_changed notifications gets a few tools/list requests, not
// one each (each was a goroutine, a request and a pins file update).
func TestToolListChangedFloodCoalesced(t *testing.T) {
	lg := filepath.Join(t.TempDir(), "lists")
	f := start(t, Options{Servers: []Spec{hostileSpec(t, "h", "flood", map[string]string{"HOSTILE_LOG": lg})}})
	if res, _ := f.call(t, "mcp__h__ok", `{}`); res.IsError || res.Text != "flooded" {
		t.Fatalf("call: %+v", res)
	}
	lists := func() int {
		b, _ := os.ReadFile(lg)
		return strings.Count(string(b), "list\n")
	}
	// Wait until no tools/list arrived for a while.
	for n := -1; n != lists(); {
		n = lists()
		time.Sleep(500 * time.Millisecond)
	}
	if n := lists(); n > 10 {
		t.Errorf("%d tools/list requests for one burst of 2000 notifications, want a few", n)
	}
}

// TestServerDeathMidCallAdvises: a server that exits during a call, or
// breaks the protocol in its answer, is a tool error saying so, that the
// call's effect is unknown, and what octet does about it; a server whose
// connection ended is restarted.
func TestServerDeathMidCallAdvises(t *testing.T) {
	for _, mode := range []string{"die", "notjson", "badresult", "hugeframe"} {
		t.Run(mode, func(t *testing.T) {
			f := start(t, Options{Servers: []Spec{hostileSpec(t, "h", mode, nil)}, Backoff: 10 * time.Millisecond})
			res, _ := f.call(t, "mcp__h__ok", `{}`)
			if !res.IsError {
				t.Fatalf("call: %+v", res)
			}
			for _, want := range []string{`MCP server "h"`, "no valid answer", "unknown", "restarts", "log"} {
				if !strings.Contains(res.Text, want) {
					t.Errorf("result lacks %q: %s", want, res.Text)
				}
			}
			if mode != "badresult" {
				waitFor(t, "the restart", func() bool { return f.server(t, "h").Restarts > 0 && f.server(t, "h").State == StateRunning })
			}
		})
	}
}

// TestDuplicateToolNamesNotRegistered: a server presenting two tools of
// the same name (which one a call reaches is the server's choice) has
// neither registered, both listed invalid; its other tools are.
func TestDuplicateToolNamesNotRegistered(t *testing.T) {
	f := start(t, Options{Servers: []Spec{hostileSpec(t, "h", "dup", nil)}})
	s := f.server(t, "h")
	var xs int
	for _, ti := range s.Tools {
		if ti.Tool == "x" {
			xs++
			if ti.State != ToolInvalid || !strings.Contains(ti.Reason, "more than one tool named") {
				t.Errorf("duplicate x listed %s (%s)", ti.State, ti.Reason)
			}
		}
	}
	if xs != 2 || toolState(s, "ok") != ToolActive {
		t.Errorf("tools: %+v", s.Tools)
	}
	if _, ok := f.host.Lookup("mcp__h__x"); ok {
		t.Error("mcp__h__x registered")
	}
}

// TestServerTextNeutralizedInListing: a tool name and an error message
// a server sends reach List (octet/extensions/list, --tools errors, the
// log) bounded and without terminal controls.
func TestServerTextNeutralizedInListing(t *testing.T) {
	f := start(t, Options{Servers: []Spec{hostileSpec(t, "e", "evil", nil), hostileSpec(t, "i", "initerr", nil)}})
	clean := func(what, s string) {
		t.Helper()
		if strings.ContainsAny(s, "\x1b\x07") || len(s) > 2*maxErrorText {
			t.Errorf("%s is not neutralized or bounded (%d bytes): %.80q", what, len(s), s)
		}
	}
	var invalid bool
	for _, ti := range f.server(t, "e").Tools {
		clean("tool name", ti.Name)
		clean("server's tool name", ti.Tool)
		invalid = invalid || ti.State == ToolInvalid
	}
	if !invalid {
		t.Errorf("the evil tool is not listed invalid: %+v", f.server(t, "e").Tools)
	}
	i := f.server(t, "i")
	if i.State == StateRunning || len(i.Errors) == 0 {
		t.Fatalf("server i: %+v", i)
	}
	clean("reason", i.Reason)
	for _, e := range i.Errors {
		clean("error", e)
	}
	clean("log", f.log.String())
}

// TestHTTPResponseBodyBounded: a streamable HTTP server answering with
// an endless application/json body fails the read at the frame bound
// (as a stdio line does), instead of octet buffering all of it.
func TestHTTPResponseBodyBounded(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(strings.Repeat(" ", 64<<10))
		// At most 64 MiB: the unbounded reader would buffer it all.
		for written.Load() < 64<<20 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	f := start(t, Options{Servers: []Spec{{Name: "u", URL: srv.URL, StartupTimeout: 20 * time.Second, ToolTimeout: time.Second}}})
	s := f.server(t, "u")
	if s.State == StateRunning || !strings.Contains(s.Reason, "larger than") {
		t.Errorf("server answering an endless body: %s (%s); %d bytes sent", s.State, s.Reason, written.Load())
	}
}

// TestStopDuringCallReturnsPromptly: holding the servers (the session's
// policy tightened) or closing the manager while a call waits on a
// server that does not answer stops the server at once and ends the
// call with a tool error saying its effect is unknown; neither waits
// for the call's tool_timeout_secs.
func TestStopDuringCallReturnsPromptly(t *testing.T) {
	for _, how := range []string{"hold", "close"} {
		t.Run(how, func(t *testing.T) {
			lg := filepath.Join(t.TempDir(), "log")
			sp := hostileSpec(t, "h", "deaf", map[string]string{"HOSTILE_LOG": lg})
			sp.ToolTimeout = time.Minute
			f := start(t, Options{Servers: []Spec{sp}})
			done := make(chan tools.Result, 1)
			go func() { res, _ := f.call(t, "mcp__h__ok", `{}`); done <- res }()
			waitFor(t, "the call to reach the server", func() bool {
				b, _ := os.ReadFile(lg)
				return strings.Contains(string(b), "call")
			})
			stopped := make(chan struct{})
			go func() {
				if how == "hold" {
					f.m.Hold("policy tightened")
				} else {
					f.m.Close()
				}
				close(stopped)
			}()
			select {
			case <-stopped:
			case <-time.After(15 * time.Second):
				t.Fatalf("%s waits for the call (tool_timeout_secs 60)", how)
			}
			res := <-done
			if !res.IsError || !strings.Contains(res.Text, "stopped during the call") || !strings.Contains(res.Text, "unknown") {
				t.Errorf("call ended by %s: %+v", how, res)
			}
		})
	}
}

// TestHoldDuringRelistReturnsPromptly: holding the servers while a
// re-read of a server's tool list waits for an answer stops it at once,
// not after startup_timeout_secs.
func TestHoldDuringRelistReturnsPromptly(t *testing.T) {
	lg := filepath.Join(t.TempDir(), "log")
	sp := hostileSpec(t, "h", "hanglist", map[string]string{"HOSTILE_LOG": lg})
	sp.StartupTimeout = time.Minute
	f := start(t, Options{Servers: []Spec{sp}})
	if res, _ := f.call(t, "mcp__h__ok", `{}`); res.IsError {
		t.Fatalf("call: %+v", res)
	}
	waitFor(t, "the second tools/list", func() bool {
		b, _ := os.ReadFile(lg)
		return strings.Count(string(b), "list\n") >= 2
	})
	held := make(chan struct{})
	go func() { f.m.Hold("policy tightened"); close(held) }()
	select {
	case <-held:
	case <-time.After(15 * time.Second):
		t.Fatal("Hold waits for the unanswered tools/list (startup_timeout_secs 60)")
	}
}

// TestBearerTokenEnvUnsetSaysWhatToDo: an HTTP server whose token
// variable is not set fails to start saying how to set it.
func TestBearerTokenEnvUnsetSaysWhatToDo(t *testing.T) {
	f := start(t, Options{Servers: []Spec{{Name: "u", URL: "http://127.0.0.1:1/mcp", BearerTokenEnv: "OCTET_TEST_UNSET_TOKEN", StartupTimeout: time.Second, ToolTimeout: time.Second}}})
	s := f.server(t, "u")
	for _, want := range []string{"OCTET_TEST_UNSET_TOKEN is not set", "export OCTET_TEST_UNSET_TOKEN=", "remove bearer_token_env_var from [mcp_servers.u]"} {
		if !strings.Contains(s.Reason, want) {
			t.Errorf("reason lacks %q: %s", want, s.Reason)
		}
	}
}

// TestStdoutBannerSaysWhatToDo: a server that writes something other
// than JSON-RPC to stdout (a log line) fails to start saying that
// stdout is the protocol's and logs belong on stderr.
func TestStdoutBannerSaysWhatToDo(t *testing.T) {
	f := start(t, Options{Servers: []Spec{hostileSpec(t, "h", "banner", nil)}, Backoff: time.Hour})
	s := f.server(t, "h")
	if s.State == StateRunning || !strings.Contains(s.Reason, "not JSON-RPC") || !strings.Contains(s.Reason, "stderr") {
		t.Errorf("server writing a banner: %s: %s", s.State, s.Reason)
	}
}

// TestUnreadablePinsSaysWhy: with a pins file that cannot be read every
// tool is withheld, listed with that reason and what to do, not as a
// tool that appeared after the server was first enabled.
func TestUnreadablePinsSaysWhy(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "mcp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, PinsFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := start(t, Options{Servers: []Spec{hostileSpec(t, "h", "plain", nil)}, Pins: OpenPins(home)})
	s := f.server(t, "h")
	if len(s.Tools) != 1 || s.Tools[0].State != ToolNew || !strings.Contains(s.Tools[0].Reason, "read MCP pins") || !strings.Contains(s.Tools[0].Reason, "remove the file") {
		t.Errorf("tools with unreadable pins: %+v", s.Tools)
	}
	if !strings.Contains(f.log.String(), "the pins cannot be read") {
		t.Errorf("log:\n%s", f.log.String())
	}
}

// TestServerWithoutToolsRuns: a server that offers no tools (its
// capabilities name none, tools/list is not a method of it) runs with
// no tools rather than failing to start again and again.
func TestServerWithoutToolsRuns(t *testing.T) {
	f := start(t, Options{Servers: []Spec{hostileSpec(t, "h", "notools", nil)}, Backoff: time.Hour})
	if s := f.server(t, "h"); s.State != StateRunning || len(s.Tools) != 0 {
		t.Errorf("server without tools: %+v", s)
	}
}

// TestEndlessToolListRefused: a server whose tools/list names a next page
// on every answer fails its start after maxToolPages pages, saying so —
// it was asked until the startup timeout, which said only "deadline
// exceeded".
func TestEndlessToolListRefused(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	sp := hostileSpec(t, "h", "pages", map[string]string{"HOSTILE_LOG": log})
	began := time.Now()
	f := start(t, Options{Servers: []Spec{sp}, Backoff: time.Hour})
	s := f.server(t, "h")
	if s.State == StateRunning || !strings.Contains(s.Reason, "did not end after") {
		t.Errorf("endless tool list: %s: %s", s.State, s.Reason)
	}
	if took := time.Since(began); took > sp.StartupTimeout/2 {
		t.Errorf("refused after %v: it waited for the startup timeout", took)
	}
	if b, _ := os.ReadFile(log); strings.Count(string(b), "list") > maxToolPages {
		t.Errorf("%d tools/list requests, want at most %d", strings.Count(string(b), "list"), maxToolPages)
	}
}

// TestStartupTimeoutSaysWhatToDo: a server that does not answer
// initialize within startup_timeout_secs fails saying which setting to
// raise, and where.
func TestStartupTimeoutSaysWhatToDo(t *testing.T) {
	sp := hostileSpec(t, "h", "mute", nil)
	sp.StartupTimeout = time.Second
	f := start(t, Options{Servers: []Spec{sp}, Backoff: time.Hour})
	s := f.server(t, "h")
	if s.State == StateRunning || !strings.Contains(s.Reason, "startup_timeout_secs 1 exceeded") || !strings.Contains(s.Reason, "raise startup_timeout_secs in [mcp_servers.h]") {
		t.Errorf("mute server: %s: %s", s.State, s.Reason)
	}
	// A client's server has no table to raise it in.
	sp.Name, sp.FromClient = "c", true
	f = start(t, Options{Servers: []Spec{sp}, Backoff: time.Hour})
	if s := f.server(t, "c"); !strings.Contains(s.Reason, "startup_timeout_secs 1 exceeded") || strings.Contains(s.Reason, "mcp_servers") {
		t.Errorf("client's mute server: %s: %s", s.State, s.Reason)
	}
}

// TestUnansweredCallSaysEffectUnknown: a call that timed out, or was
// cancelled, after it reached the server may have acted: the tool error
// says so, so the model checks before repeating it.
func TestUnansweredCallSaysEffectUnknown(t *testing.T) {
	sp := hostileSpec(t, "h", "deaf", nil)
	sp.ToolTimeout = time.Second
	f := start(t, Options{Servers: []Spec{sp}, Backoff: 10 * time.Millisecond})
	res, _ := f.call(t, "mcp__h__ok", `{}`)
	if !res.IsError || !strings.Contains(res.Text, "tool_timeout_secs") || !strings.Contains(res.Text, "unknown") {
		t.Errorf("timed-out call: %+v", res)
	}
	waitFor(t, "the restart", func() bool { return f.server(t, "h").State == StateRunning })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, _ = f.broker.Dispatch(ctx, f.host, tools.DispatchRequest{RunID: "r", CallID: "c2", Tool: "mcp__h__ok", Arguments: json.RawMessage(`{}`)}, tools.DispatchObserver{})
	if !res.IsError || !strings.Contains(res.Text, "cancelled") || !strings.Contains(res.Text, "unknown") {
		t.Errorf("cancelled call: %+v", res)
	}
}

// TestUnchangedToolListNotAnnounced: a server announcing tool list
// changes that change nothing (every 5 ms) does not make octet announce
// a change (extensions_changed to the editor) or re-register its tools
// each time.
func TestUnchangedToolListNotAnnounced(t *testing.T) {
	lg := filepath.Join(t.TempDir(), "log")
	var counting atomic.Bool
	var changes atomic.Int64
	f := start(t, Options{Servers: []Spec{hostileSpec(t, "h", "drip", map[string]string{"HOSTILE_LOG": lg})}, OnChange: func() {
		if counting.Load() {
			changes.Add(1)
		}
	}})
	time.Sleep(100 * time.Millisecond) // the start's own announcements
	counting.Store(true)
	if res, _ := f.call(t, "mcp__h__ok", `{}`); res.IsError {
		t.Fatalf("call: %+v", res)
	}
	lists := func() int {
		b, _ := os.ReadFile(lg)
		return strings.Count(string(b), "list\n")
	}
	waitFor(t, "a few re-reads", func() bool { return lists() > 5 })
	time.Sleep(1200 * time.Millisecond)
	if n := changes.Load(); n > 0 {
		t.Errorf("%d changes announced for %d re-reads of an unchanged tool list", n, lists())
	}
}

// TestHTTPRefusedCredentialsSaysWhatToDo: an HTTP server answering 401
// fails to start saying its credentials were refused and where to set
// a token.
func TestHTTPRefusedCredentialsSaysWhatToDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	defer srv.Close()
	f := start(t, Options{Servers: []Spec{{Name: "u", URL: srv.URL, StartupTimeout: 5 * time.Second, ToolTimeout: time.Second}}, Backoff: time.Hour})
	s := f.server(t, "u")
	for _, want := range []string{"refused octet's credentials (HTTP 401 Unauthorized)", "bearer_token_env_var (or headers) in [mcp_servers.u]", "OAuth"} {
		if !strings.Contains(s.Reason, want) {
			t.Errorf("reason lacks %q: %s", want, s.Reason)
		}
	}
}
