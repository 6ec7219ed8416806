package acp

import (
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// TestThoughtLevelSurvivesLoad: the effort an ACP client sets through
// the thought_level config option is the session's durable selection: a
// second connection (a restarted agent) that loads the session reports
// it in the config options and sends it with the next prompt.
func TestThoughtLevelSurvivesLoad(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled, recovery: true})
	p.prov.Enqueue(providertest.Text("one"), providertest.Text("two"))
	p.initialize(false)
	id := p.newSession()
	p.ok("session/set_config_option", map[string]any{"sessionId": id, "configId": configReasoning, "value": "high"}, nil)
	if stop := p.prompt(id, "first"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	q := newPeerAt(t, stackOpts{policy: tools.Controlled, recovery: true}, p.prov, p.home, p.ws)
	q.initialize(false)
	var res struct {
		ConfigOptions []struct {
			ID           string `json:"id"`
			CurrentValue string `json:"currentValue"`
		} `json:"configOptions"`
	}
	q.ok("session/load", map[string]any{"sessionId": id, "cwd": q.ws, "mcpServers": []any{}}, &res)
	var level string
	for _, o := range res.ConfigOptions {
		if o.ID == configReasoning {
			level = o.CurrentValue
		}
	}
	if level != "high" {
		t.Errorf("thought_level after session/load = %q, want high (options %+v)", level, res.ConfigOptions)
	}
	if stop := q.prompt(id, "second"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	reqs := p.prov.Requests()
	r, _ := reqs[len(reqs)-1].Body["reasoning"].(map[string]any)
	if r["effort"] != "high" {
		t.Errorf("the prompt after session/load carried reasoning %v, want high", reqs[len(reqs)-1].Body["reasoning"])
	}
}
