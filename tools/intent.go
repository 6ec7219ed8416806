package tools

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Bounds on an EffectIntent. They keep the canonical encoding, its digest
// and any approval prompt built from it bounded no matter what the model
// emits.
const (
	// MaxIntentArgumentBytes bounds the raw and the canonical arguments of
	// one call (a write of a large file is the biggest legitimate case).
	MaxIntentArgumentBytes = 8 << 20
	// MaxIntentFieldBytes bounds each identity string of an intent
	// (principal, run id, call id, tool name, policy version).
	MaxIntentFieldBytes = 1024
	// maxArgumentDepth bounds JSON nesting so canonicalization cannot
	// exhaust the stack.
	maxArgumentDepth = 64
)

// ErrInvalidArguments is wrapped by every error that rejects a call's
// arguments before classification (not JSON, not an object, duplicate keys,
// invalid UTF-8, too large, too deep, schema violation, Classify failure).
// Callers branch on it with errors.Is; its text never reaches the model.
var ErrInvalidArguments = errors.New("invalid tool arguments")

// EffectIntent is the bounded canonical statement of one exact call that the
// broker admits, the approver confirms and a grant is bound to. It is built
// before any hook or tool sees the call. Two calls have the same intent only
// when every field, including the canonical arguments, is equal.
type EffectIntent struct {
	// Principal names who the run acts for (a user, an editor session).
	Principal string `json:"principal"`
	// RunID identifies the driven run.
	RunID string `json:"run_id"`
	// CatalogGeneration is the Host generation the call was resolved in.
	CatalogGeneration uint64 `json:"catalog_generation"`
	// CallID is the provider's call id.
	CallID string `json:"call_id"`
	// Tool is the tool name.
	Tool string `json:"tool"`
	// Effect is the host's exact classification of the call.
	Effect Effect `json:"effect"`
	// Arguments is the canonical JSON encoding of the arguments object:
	// keys sorted, no insignificant whitespace, no HTML escaping.
	Arguments json.RawMessage `json:"arguments"`
	// PolicyVersion identifies the policy and effective settings in force.
	PolicyVersion string `json:"policy_version"`
}

// NewIntent validates draft and returns it with canonical Arguments. It
// fails, wrapping ErrInvalidArguments, when the arguments are not a bounded,
// valid UTF-8 JSON object without duplicate keys, and with a plain error
// when an identity field is empty or too long.
func NewIntent(draft EffectIntent) (EffectIntent, error) {
	for _, f := range []struct{ name, v string }{
		{"principal", draft.Principal},
		{"run id", draft.RunID},
		{"call id", draft.CallID},
		{"tool", draft.Tool},
		{"policy version", draft.PolicyVersion},
	} {
		if len(f.v) > MaxIntentFieldBytes {
			return EffectIntent{}, fmt.Errorf("effect intent: %s is %d bytes, limit %d", f.name, len(f.v), MaxIntentFieldBytes)
		}
		if !utf8.ValidString(f.v) {
			return EffectIntent{}, fmt.Errorf("effect intent: %s is not valid UTF-8", f.name)
		}
	}
	if draft.Tool == "" || draft.CallID == "" {
		return EffectIntent{}, errors.New("effect intent: tool and call id are required")
	}
	canon, err := CanonicalArguments(draft.Arguments)
	if err != nil {
		return EffectIntent{}, err
	}
	draft.Arguments = canon
	return draft, nil
}

// newCanonicalIntent is NewIntent for arguments that CanonicalArguments
// already produced (the broker's path), skipping the second pass.
func newCanonicalIntent(draft EffectIntent) (EffectIntent, error) {
	args := draft.Arguments
	draft.Arguments = json.RawMessage("{}")
	in, err := NewIntent(draft)
	if err != nil {
		return EffectIntent{}, err
	}
	in.Arguments = args
	return in, nil
}

// Digest returns the hex SHA-256 of the intent's canonical encoding. It is
// what an approval answer must echo and what a grant is bound to.
func (i EffectIntent) Digest() string {
	sum := sha256.Sum256(i.canonicalBytes())
	return hex.EncodeToString(sum[:])
}

// canonicalBytes is the digest input: a version prefix and a JSON object
// with a fixed key order. Strings are escaped by writeJSONString, so no
// field can spill into another.
func (i EffectIntent) canonicalBytes() []byte {
	var b bytes.Buffer
	b.WriteString("octet.effect_intent.v1\n")
	b.WriteString(`{"arguments":`)
	if len(i.Arguments) == 0 {
		b.WriteString("null")
	} else {
		b.Write(i.Arguments)
	}
	b.WriteString(`,"call_id":`)
	writeJSONString(&b, i.CallID)
	b.WriteString(`,"catalog_generation":`)
	b.WriteString(strconv.FormatUint(i.CatalogGeneration, 10))
	b.WriteString(`,"effect":`)
	writeJSONString(&b, i.Effect.String())
	b.WriteString(`,"policy_version":`)
	writeJSONString(&b, i.PolicyVersion)
	b.WriteString(`,"principal":`)
	writeJSONString(&b, i.Principal)
	b.WriteString(`,"run_id":`)
	writeJSONString(&b, i.RunID)
	b.WriteString(`,"tool":`)
	writeJSONString(&b, i.Tool)
	b.WriteString("}")
	return b.Bytes()
}

// CanonicalArguments returns the canonical encoding of a JSON arguments
// object: object keys sorted by their UTF-8 bytes, no insignificant
// whitespace, strings re-escaped without HTML escaping, numbers kept as
// written. It rejects (wrapping ErrInvalidArguments) anything that is not a
// single JSON object, duplicate keys at any depth, invalid UTF-8, more than
// MaxIntentArgumentBytes, or nesting deeper than 64. An empty input is
// treated as the empty object.
func CanonicalArguments(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}"), nil
	}
	if len(raw) > MaxIntentArgumentBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d byte limit", ErrInvalidArguments, len(raw), MaxIntentArgumentBytes)
	}
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrInvalidArguments)
	}
	c := canonicalizer{in: raw}
	c.skipSpace()
	if c.pos >= len(raw) || raw[c.pos] != '{' {
		return nil, fmt.Errorf("%w: arguments must be a JSON object", ErrInvalidArguments)
	}
	out, err := c.value(make([]byte, 0, len(raw)), 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArguments, err)
	}
	c.skipSpace()
	if c.pos != len(raw) {
		return nil, fmt.Errorf("%w: trailing data after the arguments object", ErrInvalidArguments)
	}
	if len(out) > MaxIntentArgumentBytes {
		return nil, fmt.Errorf("%w: canonical form exceeds the %d byte limit", ErrInvalidArguments, MaxIntentArgumentBytes)
	}
	return out, nil
}

// writeJSONString writes s as a JSON string without HTML escaping.
func writeJSONString(out *bytes.Buffer, s string) {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain { // the common case, byte-identical to the encoder's output
		out.WriteByte('"')
		out.WriteString(s)
		out.WriteByte('"')
		return
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	out.Truncate(out.Len() - 1) // Encode appends '\n'
}

// truncateForError bounds a value quoted in an internal error.
func truncateForError(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// BindDigest returns the approval digest of an intent whose preview was
// computed against a named state (Preview.Binding), such as the version
// of an open editor document: the hex SHA-256 of the intent digest and
// the binding, so an approval of one version is no approval of another.
func BindDigest(intentDigest, binding string) string {
	var b bytes.Buffer
	b.WriteString("octet.effect_intent.bound.v1\n")
	writeJSONString(&b, intentDigest)
	b.WriteByte('\n')
	writeJSONString(&b, binding)
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}
