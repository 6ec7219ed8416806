package agent

import (
	"context"
	"testing"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
)

// TestEveryFeatureHasAConsumer: "Model and endpoint ResponsesFeatures
// must both authorize each feature." Every declared feature has a
// consumer that honours it, and each is on when both sides grant it and
// off when either lacks it.
func TestEveryFeatureHasAConsumer(t *testing.T) {
	// request builds the main request a model with features m makes on an
	// endpoint granting e.
	request := func(t *testing.T, m, e provider.ResponsesFeatures) *provider.Request {
		model := provider.Model{Name: "m", ContextWindow: 100_000, MaxOutputTokens: 10_000, Reasoning: true, Features: m}
		tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: "http://127.0.0.1:1/v1", Features: e})
		h := newHarness(t, harnessOpt{model: model, transport: tr})
		if _, err := h.agent.SetReasoning("high"); err != nil {
			t.Fatal(err)
		}
		req, _, _ := testRun(h.agent).buildRequest()
		return req
	}
	consumers := map[provider.ResponsesFeatures]func(t *testing.T, m, e provider.ResponsesFeatures) bool{
		provider.FeatureReasoning: func(t *testing.T, m, e provider.ResponsesFeatures) bool {
			return request(t, m, e).Reasoning != nil
		},
		provider.FeatureEncryptedReasoning: func(t *testing.T, m, e provider.ResponsesFeatures) bool {
			return request(t, m, e).EncryptedReasoning
		},
		provider.FeatureParallelToolCalls: func(t *testing.T, m, e provider.ResponsesFeatures) bool {
			return request(t, m, e).ParallelToolCalls
		},
		provider.FeatureAsyncTools: func(t *testing.T, m, e provider.ResponsesFeatures) bool {
			for _, tool := range request(t, m, e).Tools {
				if tool.Async {
					return true
				}
			}
			return false
		},
		provider.FeaturePromptCacheKey: func(t *testing.T, m, e provider.ResponsesFeatures) bool {
			return request(t, m, e).PromptCacheKey != ""
		},
		provider.FeatureWebSocket: func(t *testing.T, m, e provider.ResponsesFeatures) bool {
			return WebSocketGranted(provider.Model{Name: "m", Features: m}, e)
		},
		provider.FeaturePrewarm: func(t *testing.T, m, e provider.ResponsesFeatures) bool {
			model := provider.Model{Name: "m", ContextWindow: 100_000, MaxOutputTokens: 10_000, Reasoning: true, Features: m}
			h := newHarness(t, harnessOpt{model: model, websocket: true, endpoint: &e})
			h.srv.Enqueue(pt.Reply())
			sent, err := h.agent.Prewarm(context.Background())
			if err != nil {
				t.Fatalf("prewarm: %v", err)
			}
			reqs := h.srv.Requests()
			if sent != (len(reqs) == 1 && isWarmup(reqs[0])) {
				t.Fatalf("Prewarm says sent %v; the server saw %d requests", sent, len(reqs))
			}
			return sent
		},
		provider.FeatureNativeSteering: func(t *testing.T, m, e provider.ResponsesFeatures) bool {
			model := provider.Model{Name: "m", ContextWindow: 100_000, MaxOutputTokens: 10_000, Features: m}
			h := newHarness(t, harnessOpt{model: model, websocket: true, endpoint: &e})
			r := testRun(h.agent)
			return r.nativeGranted(model) // TestNativeSteeringNeedsTheGrant: otherwise inputs queue
		},
		provider.FeatureNativeCompaction: func(t *testing.T, m, e provider.ResponsesFeatures) bool {
			model := provider.Model{Name: "m", ContextWindow: 100_000, MaxOutputTokens: 10_000, Features: m}
			tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: "http://127.0.0.1:1/v1", Features: e})
			h := newHarness(t, harnessOpt{model: model, transport: tr})
			return testRun(h.agent).nativeCompaction(model) // TestNativeCompaction*: the compact endpoint, else a local summary
		},
		provider.FeatureCodexProfile: func(t *testing.T, m, e provider.ResponsesFeatures) bool {
			req := request(t, m, e)
			return RouteFor(ProfileCodex, provider.WireResponses, provider.Model{Name: "m", Features: m}, e, false, req).Qualify() == nil
		},
	}
	all := provider.AllFeatures
	for _, f := range provider.DeclaredFeatures() {
		on, ok := consumers[f]
		if !ok {
			t.Errorf("feature %s has no consumer: declare a feature only with the code that honours it", f)
			continue
		}
		t.Run(f.String(), func(t *testing.T) {
			if !on(t, all, all) {
				t.Errorf("%s is off although model and endpoint grant it", f)
			}
			if on(t, all&^f, all) {
				t.Errorf("%s is on although the model lacks it", f)
			}
			if on(t, all, all&^f) {
				t.Errorf("%s is on although the endpoint lacks it", f)
			}
		})
	}
	if len(consumers) != len(provider.DeclaredFeatures()) {
		t.Errorf("%d consumers for %d declared features", len(consumers), len(provider.DeclaredFeatures()))
	}
}

// testRun is a run of a that is not driven: its requests can be built.
func testRun(a *Agent) *Run {
	r := newRun(a, context.Background(), PromptOptions{})
	r.pin = a.selection()
	return r
}

// TestEndpointGrant: the Codex profile grants every declared feature on
// the endpoint side; any other profile only the reasoning controls (so
// parallel_tool_calls, prompt_cache_key and the encrypted-reasoning
// include are not sent: the endpoint's own defaults apply).
func TestEndpointGrant(t *testing.T) {
	if g := EndpointGrant(ProfileCodex); g != provider.AllFeatures {
		t.Errorf("codex grants %s", g)
	}
	if g := EndpointGrant("none"); g != provider.FeatureReasoning {
		t.Errorf("none grants %s", g)
	}
}

// TestOtherWiresHaveNoResponsesFeatures: on a chat or anthropic route
// the transport grants no Responses feature (provider.HTTP zeroes them),
// and the request carries the controls as the model declares them for
// that route's codec to map (reasoning, parallel calls) or drop.
func TestOtherWiresHaveNoResponsesFeatures(t *testing.T) {
	model := provider.Model{Name: "m", ContextWindow: 100_000, Reasoning: true, Features: provider.FeatureReasoning | provider.FeatureParallelToolCalls}
	tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: "http://127.0.0.1:1/v1", Wire: provider.WireChat, Features: provider.AllFeatures})
	if tr.EndpointFeatures() != 0 {
		t.Fatalf("a chat route reports Responses features %s", tr.EndpointFeatures())
	}
	h := newHarness(t, harnessOpt{model: model, transport: tr})
	if _, err := h.agent.SetReasoning("high"); err != nil {
		t.Fatal(err)
	}
	req, _, _ := testRun(h.agent).buildRequest()
	if req.Reasoning == nil || !req.ParallelToolCalls || req.PromptCacheKey != "" || req.EncryptedReasoning {
		t.Fatalf("chat request: reasoning %v parallel %v cache key %q encrypted %v", req.Reasoning, req.ParallelToolCalls, req.PromptCacheKey, req.EncryptedReasoning)
	}
}
