package main

import (
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestExecWebSocketHonoursStreamIdleTimeout: with transport = "websocket"
// a response that goes silent after response.created ends after the
// route's stream_idle_timeout_secs, as on HTTP, and the recovery policy
// replaces it. The socket used to keep the transport's 300 s default, so
// the run sat at "Thinking" for minutes whatever the configuration said.
func TestExecWebSocketHonoursStreamIdleTimeout(t *testing.T) {
	x := newExecEnv(t, providertest.Stall(), providertest.Text("answered after the silence"))
	x.writeGlobalConfig(t, "transport = \"websocket\"\nruntime_profile = \"codex\"\nmodel_provider = \"loop\"\n"+
		"[model_providers.loop]\nbase_url = \""+x.srv.URL()+"\"\nenv_key = \"OPENAI_API_KEY\"\nruntime_profile = \"codex\"\nstream_idle_timeout_secs = 1\n")
	start := time.Now()
	r := runCLI(t, x.ws, x.vars, "exec", "--json", "wait")
	took := time.Since(start)
	reqs := x.srv.Requests()
	if r.code != exitOK || len(reqs) != 2 {
		t.Fatalf("exit %d after %v, %d requests\nstderr: %s", r.code, took, len(reqs), r.stderr)
	}
	if got := transports(reqs); got[0] != "websocket" || got[1] != "websocket" {
		t.Fatalf("transports %v, want both over the websocket", got)
	}
	_, events := parseJSONLines(t, r.stdout)
	retries := eventsOfKind(events, "provider_retry")
	if len(retries) != 1 || retries[0]["reason"] != "idle_timeout" {
		t.Fatalf("provider_retry events %v, want one for the idle timeout", retries)
	}
	if took > 30*time.Second {
		t.Errorf("the silent response took %v to end with stream_idle_timeout_secs = 1", took)
	}
}
