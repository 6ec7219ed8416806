package provider

import "strings"

// ResponsesFeatures is a set of Responses capabilities. A capability is
// granted only when both the model and the endpoint (the host-configured
// route) have it; a model or endpoint name alone grants nothing.
type ResponsesFeatures uint64

// Responses features. Each is declared only with a consumer that honours
// it (agent.TestEveryFeatureHasAConsumer).
const (
	// FeatureReasoning: reasoning effort/summary controls.
	FeatureReasoning ResponsesFeatures = 1 << iota
	// FeatureEncryptedReasoning: reasoning.encrypted_content replay with store:false.
	FeatureEncryptedReasoning
	// FeatureParallelToolCalls: several function calls per response.
	FeatureParallelToolCalls
	// FeatureAsyncTools: parallel observation tools advertised async; their
	// calls may overlap the next response.
	FeatureAsyncTools
	// FeatureWebSocket: the Responses WebSocket mode.
	FeatureWebSocket
	// FeaturePromptCacheKey: prompt_cache_key routing.
	FeaturePromptCacheKey
	// FeatureCodexProfile: the route is the Codex runtime profile that
	// performs generation with locally dispatched function tools; it is
	// what qualifies in-process provider recovery.
	FeatureCodexProfile
	// FeaturePrewarm: a warm-up request (generate: false) on the
	// Responses WebSocket while the agent is idle, built as the next
	// run's first request is.
	FeaturePrewarm
	// FeatureNativeSteering: steering input sent into the response in
	// progress (response.steer on the Responses WebSocket). No model of
	// octet's table has it; a [models."NAME"] table declares it.
	FeatureNativeSteering
	// FeatureNativeCompaction: compaction by the provider's compact
	// endpoint (…/responses/compact). No model of octet's table has it; a
	// [models."NAME"] table declares it.
	FeatureNativeCompaction
)

var featureNames = []struct {
	f    ResponsesFeatures
	name string
}{
	{FeatureReasoning, "reasoning"},
	{FeatureEncryptedReasoning, "encrypted_reasoning"},
	{FeatureParallelToolCalls, "parallel_tool_calls"},
	{FeatureAsyncTools, "async_tools"},
	{FeatureWebSocket, "websocket"},
	{FeaturePromptCacheKey, "prompt_cache_key"},
	{FeatureCodexProfile, "codex_profile"},
	{FeaturePrewarm, "prewarm"},
	{FeatureNativeSteering, "native_steering"},
	{FeatureNativeCompaction, "native_compaction"},
}

// AllFeatures are every declared feature.
const AllFeatures = FeatureReasoning | FeatureEncryptedReasoning | FeatureParallelToolCalls |
	FeatureAsyncTools | FeatureWebSocket | FeaturePromptCacheKey | FeatureCodexProfile | FeaturePrewarm |
	FeatureNativeSteering | FeatureNativeCompaction

// DeclaredFeatures returns each declared feature, in declaration order.
func DeclaredFeatures() []ResponsesFeatures {
	out := make([]ResponsesFeatures, len(featureNames))
	for i, n := range featureNames {
		out[i] = n.f
	}
	return out
}

// Has reports whether every feature in x is in f.
func (f ResponsesFeatures) Has(x ResponsesFeatures) bool { return f&x == x }

// String lists the feature names joined with "|".
func (f ResponsesFeatures) String() string {
	var parts []string
	for _, n := range featureNames {
		if f&n.f != 0 {
			parts = append(parts, n.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// Granted returns the features both the model and the endpoint authorize.
func Granted(model, endpoint ResponsesFeatures) ResponsesFeatures { return model & endpoint }

// Qualified reports whether every feature in want is authorized by both the
// model and the endpoint. An empty want is trivially qualified.
func Qualified(model, endpoint, want ResponsesFeatures) bool {
	return Granted(model, endpoint).Has(want)
}

// Model describes a model's limits and model-side features.
type Model struct {
	Name string
	// ContextWindow is the total token window (input + output).
	ContextWindow int
	// MaxOutputTokens is the provider-advertised completion ceiling.
	MaxOutputTokens int
	// Reasoning reports reasoning support.
	Reasoning bool
	// Features are the model side of the qualification; the endpoint must
	// grant the same features before any of them applies.
	Features ResponsesFeatures
	// ApplyPatch reports that the model was trained on the apply_patch
	// patch format (Codex's), so it is offered that tool by default.
	ApplyPatch bool
	// Images reports that the model takes image input (input_image
	// parts, image_url parts, image blocks): prompts may carry images and
	// it is offered view_image.
	Images bool
	// Assumed is true when neither octet's table nor the configuration
	// knows the model's context window: ContextWindow is
	// AssumedContextWindow, a guess, and MaxOutputTokens is unknown
	// (requests leave the output bound to the server).
	Assumed bool
}

// AssumedContextWindow is the context window assumed for a model whose
// window nobody declared.
const AssumedContextWindow = 128_000

const codexFamily = FeatureReasoning | FeatureEncryptedReasoning | FeatureParallelToolCalls |
	FeatureAsyncTools | FeatureWebSocket | FeaturePromptCacheKey | FeatureCodexProfile | FeaturePrewarm

// gpt5Family also carries the model side of the Codex runtime profile:
// Codex generates with these models and locally dispatched function tools.
const gpt5Family = FeatureReasoning | FeatureEncryptedReasoning | FeatureParallelToolCalls |
	FeatureWebSocket | FeaturePromptCacheKey | FeatureCodexProfile | FeaturePrewarm

var models = []Model{
	{Name: "gpt-5.3-codex", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: codexFamily, ApplyPatch: true, Images: true},
	{Name: "gpt-5.2-codex", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: codexFamily, ApplyPatch: true, Images: true},
	{Name: "gpt-5.1-codex-max", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: codexFamily, ApplyPatch: true, Images: true},
	{Name: "gpt-5.1-codex", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: codexFamily, ApplyPatch: true, Images: true},
	{Name: "gpt-5.1-codex-mini", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: codexFamily, ApplyPatch: true, Images: true},
	{Name: "gpt-5-codex", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: codexFamily, ApplyPatch: true, Images: true},
	{Name: "gpt-5.2", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: gpt5Family, ApplyPatch: true, Images: true},
	{Name: "gpt-5.1", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: gpt5Family, ApplyPatch: true, Images: true},
	{Name: "gpt-5", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: gpt5Family, ApplyPatch: true, Images: true},
	{Name: "gpt-5-mini", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: gpt5Family, ApplyPatch: true, Images: true},
	{Name: "gpt-5-nano", ContextWindow: 400_000, MaxOutputTokens: 128_000, Reasoning: true, Features: gpt5Family, ApplyPatch: true, Images: true},
	{Name: "gpt-4.1", ContextWindow: 1_047_576, MaxOutputTokens: 32_768, Features: FeatureParallelToolCalls | FeaturePromptCacheKey, ApplyPatch: true, Images: true},
}

// ModelNames returns the names of the built-in model table, newest family
// first: the names LookupModel knows (besides their dated snapshots).
func ModelNames() []string {
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	return names
}

// LookupModel finds a model in the built-in table by exact name or by a
// dated snapshot of it ("gpt-5-nano-2025-08-07").
func LookupModel(name string) (Model, bool) {
	for _, m := range models {
		if m.Name == name {
			return m, true
		}
	}
	for _, m := range models {
		if rest, ok := strings.CutPrefix(name, m.Name+"-"); ok && isSnapshotDate(rest) {
			m.Name = name
			return m, true
		}
	}
	return Model{}, false
}

// isSnapshotDate reports whether s looks like "2025-08-07".
func isSnapshotDate(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for i, c := range s {
		if i == 4 || i == 7 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
