package agent

import "github.com/octet-agent/octet/provider"

// Responses features are authorized by both sides: the model's (octet's
// model table) and the endpoint's (the host-configured route, reported
// by the transport as provider.FeatureReporter). A transport that
// reports none grants nothing; model names, Responses Lite or a
// WebSocket being reachable grant nothing. Each declared feature has
// exactly one consumer:
//
//	reasoning            the request's reasoning effort/summary (buildRequest)
//	encrypted_reasoning  include reasoning.encrypted_content (buildRequest)
//	parallel_tool_calls  parallel_tool_calls: true (buildRequest)
//	async_tools          parallel tools advertised async, their batches overlapping the next response (async.go)
//	prompt_cache_key     prompt_cache_key: the session id (buildRequest)
//	websocket            the Responses WebSocket transport (WebSocketGranted)
//	codex_profile        in-process provider recovery (RouteFor, CodexRecovery)
//	prewarm              the idle warm-up of the next request (StartPrewarm, prewarm.go)
//	native_steering      steering input sent into the response in progress (steering.go)
//	native_compaction    compaction by the provider's compact endpoint (compact_native.go)
//
// Ordinary routes keep synchronous tools and queued steering.

// EndpointGrant is what a route of the host-selected runtime profile
// authorizes on the endpoint side: ProfileCodex (an OpenAI Responses
// route generating with locally dispatched function tools) every
// feature octet implements; any other profile (an endpoint that only
// borrows the wire format, a chat or anthropic route) the controls every
// such wire format has — the reasoning effort the person configured —
// and nothing else: parallel_tool_calls is not sent (the endpoint's
// default applies), nor OpenAI's extensions (prompt_cache_key,
// encrypted reasoning), the WebSocket or recovery. A chat or anthropic
// route maps parallel calls itself, as the model side declares them.
func EndpointGrant(profile RuntimeProfile) provider.ResponsesFeatures {
	if profile == ProfileCodex {
		return provider.AllFeatures
	}
	return provider.FeatureReasoning
}

// WebSocketGranted reports whether a run of model on an endpoint
// granting endpoint may use the Responses WebSocket: both sides grant
// it, and the Codex profile that owns the WebSocket→HTTP fallback.
func WebSocketGranted(model provider.Model, endpoint provider.ResponsesFeatures) bool {
	return provider.Qualified(model.Features, endpoint, provider.FeatureWebSocket|provider.FeatureCodexProfile)
}

// granted returns the features both model and the agent's transport
// authorize. On a route of another wire format (chat, anthropic) there
// are no Responses features: its codec maps the controls it has
// (reasoning, parallel calls) as the model side declares them and
// drops the rest.
func (a *Agent) granted(model provider.Model) provider.ResponsesFeatures {
	if wr, ok := a.cfg.Transport.(provider.WireReporter); ok && wr.WireAPI() != provider.WireResponses {
		return model.Features
	}
	var endpoint provider.ResponsesFeatures
	if fr, ok := a.cfg.Transport.(provider.FeatureReporter); ok {
		endpoint = fr.EndpointFeatures()
	}
	return provider.Granted(model.Features, endpoint)
}
