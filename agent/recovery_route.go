package agent

import (
	"errors"
	"fmt"

	"github.com/octet-agent/octet/provider"
)

// RuntimeProfile names the runtime profile the host selected for a route.
// It is configuration, never inferred from a model name or provider label.
type RuntimeProfile string

// ProfileCodex is the host-selected Codex runtime profile: an OpenAI
// Responses route that performs generation with locally dispatched function
// tools. Selecting it asserts exactly that; an embedding host must not
// assign it to an arbitrary compatible endpoint for wire formatting.
const ProfileCodex RuntimeProfile = "codex"

// itemCompaction is the kind of a compaction item in replayed input.
const itemCompaction provider.ItemType = "compaction"

// qualifiedItems is the closed set of opaque input item kinds a qualified
// request may replay: message, reasoning, function call, function result
// and compaction items.
var qualifiedItems = map[provider.ItemType]bool{
	provider.ItemMessage: true, provider.ItemReasoning: true,
	provider.ItemFunctionCall: true, provider.ItemFunctionCallOutput: true,
	itemCompaction: true,
}

// Route is the set of facts about one prepared provider request that grant
// or deny in-process recovery authority. The loop builds it at every
// preparation (the input changes between turns; [RouteFor] does it) and
// hands it to [CodexRecovery.SetRoute]. Every field must positively
// authorize recovery; the zero Route is unqualified.
type Route struct {
	// Responses is true when the request goes to an OpenAI Responses
	// endpoint (HTTP SSE or WebSocket): the route's wire format, as the
	// host configured it. Chat Completions and Anthropic Messages routes
	// are never qualified, whatever their profile or model.
	Responses bool
	// Profile is the host-selected runtime profile from configuration.
	Profile RuntimeProfile
	// Granted is the set of Responses features both the model and the
	// endpoint authorize; it must include provider.FeatureCodexProfile.
	Granted provider.ResponsesFeatures
	// WebSocket is true while the route's transport is the Responses
	// WebSocket; the policy falls back to HTTP after repeated failures.
	WebSocket bool
	// ToolKinds lists the kind of every tool the request advertises;
	// only "function" tools (dispatched locally) qualify.
	ToolKinds []string
	// ItemKinds lists the kind of every input item of the request.
	ItemKinds []provider.ItemType
	// PreviousResponseID is a server-side continuation id; any value
	// disqualifies the route (replay would not be self-contained).
	PreviousResponseID string
	// Store is true when the request asks the provider to store it.
	Store bool
	// ContextManagement is true when the request asks for provider-side
	// context management (truncation, server compaction, …).
	ContextManagement bool
}

// RouteFor describes a prepared request for qualification: profile is the
// host's configured runtime profile, wire the route's wire format (only
// provider.WireResponses can qualify; empty fails closed), model the
// request's model, endpoint the transport's endpoint features (zero when
// the transport does not report any, which fails closed), webSocket
// whether the request goes over the Responses WebSocket. provider.Request
// always sends store:false and no continuation id, and advertises only
// function tools.
func RouteFor(profile RuntimeProfile, wire provider.WireAPI, model provider.Model, endpoint provider.ResponsesFeatures, webSocket bool, req *provider.Request) Route {
	r := Route{
		Responses: wire == provider.WireResponses,
		Profile:   profile,
		Granted:   provider.Granted(model.Features, endpoint),
		WebSocket: webSocket,
	}
	if req == nil {
		return Route{}
	}
	r.ToolKinds = make([]string, len(req.Tools))
	for i := range req.Tools {
		r.ToolKinds[i] = "function"
	}
	r.ItemKinds = make([]provider.ItemType, len(req.Input))
	for i := range req.Input {
		r.ItemKinds[i] = req.Input[i].Type
	}
	return r
}

// ErrUnqualifiedRoute is the sentinel every route disqualification wraps.
var ErrUnqualifiedRoute = errors.New("route not qualified for provider recovery")

// Qualify reports nil when the route grants recovery authority, or an error
// wrapping [ErrUnqualifiedRoute] that names the first failed condition.
// Everything not positively authorized fails closed.
func (r Route) Qualify() error {
	switch {
	case !r.Responses:
		return fmt.Errorf("%w: not an OpenAI Responses route (the route's wire format is not the Responses API)", ErrUnqualifiedRoute)
	case r.Profile != ProfileCodex:
		return fmt.Errorf("%w: runtime profile %q is not the Codex profile", ErrUnqualifiedRoute, r.Profile)
	case !r.Granted.Has(provider.FeatureCodexProfile):
		return fmt.Errorf("%w: model and endpoint do not both grant the Codex profile", ErrUnqualifiedRoute)
	case r.PreviousResponseID != "":
		return fmt.Errorf("%w: request uses a server-side continuation id", ErrUnqualifiedRoute)
	case r.Store:
		return fmt.Errorf("%w: request asks for provider storage", ErrUnqualifiedRoute)
	case r.ContextManagement:
		return fmt.Errorf("%w: request asks for provider context management", ErrUnqualifiedRoute)
	}
	for _, k := range r.ToolKinds {
		if k != "function" {
			return fmt.Errorf("%w: tool kind %q is not a local function tool", ErrUnqualifiedRoute, k)
		}
	}
	for _, k := range r.ItemKinds {
		if !qualifiedItems[k] {
			return fmt.Errorf("%w: input item kind %q", ErrUnqualifiedRoute, k)
		}
	}
	return nil
}
