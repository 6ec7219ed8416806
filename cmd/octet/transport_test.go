package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

func transports(reqs []providertest.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Transport)
	}
	return out
}

// TestExecWebSocket: with transport = "websocket" on the Codex route every
// request of the run goes over one Responses WebSocket connection.
func TestExecWebSocket(t *testing.T) {
	x := newExecEnv(t,
		providertest.Reply(providertest.FunctionCall("call_1", "read", `{"path":"notes.txt"}`)),
		providertest.Text("alpha and beta."),
	)
	x.writeGlobalConfig(t, "transport = \"websocket\"\nruntime_profile = \"codex\"\n")
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "read notes.txt")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	reqs := x.srv.Requests()
	if got := strings.Join(transports(reqs), ","); got != "websocket,websocket" {
		t.Fatalf("transports = %s, want websocket,websocket", got)
	}
	if reqs[0].RemoteAddr != reqs[1].RemoteAddr {
		t.Errorf("the run dialled a second connection: %s, %s", reqs[0].RemoteAddr, reqs[1].RemoteAddr)
	}
	if reqs[1].Body["instructions"] != reqs[0].Body["instructions"] || reqs[0].Body["model"] != "gpt-5.1-codex" {
		t.Errorf("websocket request body differs from the route's: %v", reqs[0].Body)
	}
	_, events := parseJSONLines(t, r.stdout)
	if n := len(eventsOfKind(events, "provider_retry")); n != 0 {
		t.Errorf("%d provider_retry events on a healthy socket", n)
	}
	assertNoSecret(t, []string{r.stdout, r.stderr}, x.home)
}

// TestExecWebSocketFallsBackToHTTP: a handshake answered 426 (use HTTP)
// moves the run to HTTP; the request is sent once, over HTTP, and the run
// completes.
func TestExecWebSocketFallsBackToHTTP(t *testing.T) {
	x := newExecEnv(t, providertest.Text("answered over HTTP."))
	x.srv.RejectWebSocket(http.StatusUpgradeRequired)
	x.writeGlobalConfig(t, "transport = \"websocket\"\nruntime_profile = \"codex\"\n")
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "hello")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	if got := strings.Join(transports(x.srv.Requests()), ","); got != "http" {
		t.Fatalf("transports = %s, want http", got)
	}
	_, events := parseJSONLines(t, r.stdout)
	retries := eventsOfKind(events, "provider_retry")
	if len(retries) != 1 || retries[0]["delayMs"] != float64(0) {
		t.Errorf("provider_retry events = %v, want one immediate fallback", retries)
	}
	if len(eventsOfKind(events, "provider_usage_uncertain")) != 0 {
		t.Errorf("a refused handshake sent nothing, yet usage became uncertain")
	}
}

// TestExecWebSocketNeedsCodexRoute: without recovery authority there is
// no fallback, so octet stays on HTTP and says why.
func TestExecWebSocketNeedsCodexRoute(t *testing.T) {
	x := newExecEnv(t, providertest.Text("ok"))
	x.writeGlobalConfig(t, "transport = \"websocket\"\nruntime_profile = \"none\"\n")
	r := runCLI(t, x.ws, x.vars, "exec", "hello")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	if got := strings.Join(transports(x.srv.Requests()), ","); got != "http" {
		t.Fatalf("transports = %s, want http", got)
	}
	if !strings.Contains(r.stderr, "transport = websocket is not used: it needs runtime_profile = codex") {
		t.Errorf("stderr does not explain: %s", r.stderr)
	}
}

// TestExecWebSocketUnknownModelKeepsTheRoute: a model octet's table does
// not know keeps the route's recovery rules (qualification follows the
// host-selected profile and route, never the model's name), so on the
// Codex profile it uses the WebSocket, and a server refusing it moves the
// run to HTTP through the recovery policy.
func TestExecWebSocketUnknownModelKeepsTheRoute(t *testing.T) {
	x := newExecEnv(t, providertest.Text("ok"))
	x.srv.RejectWebSocket(http.StatusUpgradeRequired)
	x.writeGlobalConfig(t, "transport = \"websocket\"\n")
	r := runBin(t, x.ws, x.vars, "", "exec", "--model", "local-model", "hello")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "switching to HTTP") || strings.Contains(r.stderr, "transport = websocket is not used") {
		t.Errorf("the unknown model lost the WebSocket fallback:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, `model "local-model": context window unknown; assuming 128000 tokens`) {
		t.Errorf("stderr does not say the window is assumed:\n%s", r.stderr)
	}
	if got := x.srv.Requests(); len(got) != 1 || got[0].Transport != "http" {
		t.Errorf("requests = %v, want the one HTTP request after the refused handshake", transports(got))
	}
}

// TestExecOffline: --offline is accepted and documented as changing
// nothing today; in particular the model request still goes to the
// provider, byte for byte the same request as without the flag.
func TestExecOffline(t *testing.T) {
	x := newExecEnv(t, providertest.Text("online anyway"), providertest.Text("online anyway"))
	plain := runCLI(t, x.ws, x.vars, "exec", "hi")
	offline := runCLI(t, x.ws, x.vars, "exec", "--offline", "hi")
	if plain.code != exitOK || offline.code != exitOK || offline.stdout != plain.stdout {
		t.Fatalf("exit %d/%d, stdout %q vs %q\nstderr: %s", plain.code, offline.code, plain.stdout, offline.stdout, offline.stderr)
	}
	reqs := x.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2: --offline still contacts the provider", len(reqs))
	}
	strip := func(b map[string]any) map[string]any { delete(b, "prompt_cache_key"); return b }
	if a, b := fmt.Sprint(strip(reqs[0].Body)), fmt.Sprint(strip(reqs[1].Body)); a != b {
		t.Errorf("--offline changed the request:\n%s\n%s", a, b)
	}
	help := runCLI(t, x.ws, x.vars, "exec", "-h")
	if !strings.Contains(help.stdout, "no MCP server is listed or started") {
		t.Errorf("--offline help does not say what it does:\n%s", help.stdout)
	}
}
