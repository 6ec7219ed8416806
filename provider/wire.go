package provider

import "net/http"

// WireAPI names a wire format: what a route's endpoint speaks.
type WireAPI string

// The wire formats octet speaks over HTTP server-sent events.
const (
	// WireResponses is the OpenAI Responses API (POST …/responses), the
	// only route that can be qualified for provider recovery.
	WireResponses WireAPI = "responses"
	// WireChat is the OpenAI Chat Completions API (POST
	// …/chat/completions), which local servers and gateways speak.
	WireChat WireAPI = "chat"
	// WireAnthropic is the Anthropic Messages API (POST …/messages).
	WireAnthropic WireAPI = "anthropic"
)

// WireAPIs lists the wire formats, Responses first.
var WireAPIs = []WireAPI{WireResponses, WireChat, WireAnthropic}

// Key headers: where a route sends its credential.
const (
	// KeyAuthorization sends "Authorization: Bearer <key>" (OpenAI,
	// most OpenAI-compatible servers).
	KeyAuthorization = "authorization"
	// KeyAPIKey sends "api-key: <key>" (Azure OpenAI).
	KeyAPIKey = "api-key"
	// KeyXAPIKey sends "x-api-key: <key>" (Anthropic).
	KeyXAPIKey = "x-api-key"
)

// KeyHeaders lists the accepted key header names.
var KeyHeaders = []string{KeyAuthorization, KeyAPIKey, KeyXAPIKey}

// WireReporter is implemented by transports that say which wire format
// their endpoint speaks. Recovery qualification asks the route, never a
// model or provider name.
type WireReporter interface {
	WireAPI() WireAPI
}

// setKey puts key where keyHeader says, replacing any value configured
// headers gave that header.
func setKey(h http.Header, keyHeader, key string) {
	switch keyHeader {
	case KeyAPIKey:
		h.Set("Api-Key", key)
	case KeyXAPIKey:
		h.Set("X-Api-Key", key)
	default:
		h.Set("Authorization", "Bearer "+key)
	}
}

// credentialHeaders are header names that carry a credential: configured
// headers never set them (the key has its own source), and debug dumps
// redact them.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Api-Key", "X-Api-Key", "Openai-Api-Key", "Cookie"}

// IsCredentialHeader reports whether a header carries a credential
// (Authorization, api-key, x-api-key, …): configured headers may not set
// one, and debug dumps redact them.
func IsCredentialHeader(k string) bool {
	k = http.CanonicalHeaderKey(k)
	for _, c := range credentialHeaders {
		if k == c {
			return true
		}
	}
	return false
}
