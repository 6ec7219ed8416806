package agent

import (
	"encoding/json"
	"fmt"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/internal/jsonstr"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Event kinds, exactly as the editor protocol names them.
const (
	KindRunStarted             = "run_started"
	KindOutputDelta            = "output_delta"
	KindToolCallStarted        = "tool_call_started"
	KindToolCallDelta          = "tool_call_delta"
	KindToolCallEnded          = "tool_call_ended"
	KindAssistantCommitted     = "assistant_committed"
	KindToolStarted            = "tool_started"
	KindToolPolicyDecision     = "tool_policy_decision"
	KindToolOutput             = "tool_output"
	KindToolFinished           = "tool_finished"
	KindProviderRetry          = "provider_retry"
	KindProviderUsageUncertain = "provider_usage_uncertain"
	KindUsage                  = "usage"
	KindCompactionStarted      = "compaction_started"
	KindCompactionFinished     = "compaction_finished"
	KindTurnFinished           = "turn_finished"
	KindRunFinished            = "run_finished"
	KindRecoveredOutput        = "recovered_output"
	KindPlan                   = "plan"
)

// Output channels of [OutputDelta] and [RecoveredOutput].
const (
	ChannelText      = "text"
	ChannelReasoning = "reasoning"
)

// Event is one frontend-neutral run event. Kind is the protocol's
// snake_case kind; Seq numbers the events of one run from 1 without gaps.
// [MarshalEvent] (and each type's MarshalJSON) encodes an event as one JSON
// object whose fields sit directly beside "kind".
type Event interface {
	Kind() string
	Seq() int64
	setSeq(int64)
}

// header carries the per-run sequence number every event has.
type header struct{ seq int64 }

// Seq is the event's position in its run, starting at 1.
func (h *header) Seq() int64 { return h.seq }

func (h *header) setSeq(s int64) { h.seq = s }

// MarshalEvent encodes e as {"kind": ..., fields...}. The sequence number is
// not part of the object: the server carries it in its envelope.
func MarshalEvent(e Event) ([]byte, error) { return json.Marshal(e) }

// AppendEvent appends MarshalEvent's encoding of e to dst. The streamed
// deltas (the events a response emits most) are encoded directly, without
// reflection or allocation; their bytes are exactly MarshalEvent's.
func AppendEvent(dst []byte, e Event) ([]byte, error) {
	switch e := e.(type) {
	case *OutputDelta:
		dst = append(dst, `{"kind":"output_delta","channel":`...)
		dst = jsonstr.Append(dst, e.Channel)
		dst = append(dst, `,"text":`...)
		dst = jsonstr.Append(dst, e.Text)
		return append(dst, '}'), nil
	case *ToolCallDelta:
		dst = append(dst, `{"kind":"tool_call_delta","callId":`...)
		dst = jsonstr.Append(dst, e.CallID)
		dst = append(dst, `,"delta":`...)
		dst = jsonstr.Append(dst, e.Delta)
		return append(dst, '}'), nil
	}
	b, err := MarshalEvent(e)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// withKind splices "kind" into the JSON object encoding of v.
func withKind(kind string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshal %s event: %w", kind, err)
	}
	out := make([]byte, 0, len(b)+len(kind)+12)
	out = append(out, `{"kind":`...)
	out = append(out, '"')
	out = append(out, kind...)
	out = append(out, '"')
	if len(b) > 2 { // not "{}"
		out = append(out, ',')
		out = append(out, b[1:]...)
	} else {
		out = append(out, '}')
	}
	return out, nil
}

// RunStarted is the first event of every run.
type RunStarted struct {
	header
	// RunID repeats the run's identifier for consumers that see only events.
	RunID string `json:"runId"`
	// WithoutTools reports a run started tool-free.
	WithoutTools bool `json:"withoutTools,omitempty"`
}

// OutputDelta is provisional streamed model output. It is never persisted;
// the committed text arrives with the assistant entry.
type OutputDelta struct {
	header
	Channel string `json:"channel"` // "text" or "reasoning"
	Text    string `json:"text"`
}

// ToolCallStarted reports the provider began streaming a function call.
// It is provisional: nothing is executed from streamed calls.
type ToolCallStarted struct {
	header
	CallID string `json:"callId"`
	Name   string `json:"name"`
}

// ToolCallDelta is a provisional fragment of a streamed call's arguments.
type ToolCallDelta struct {
	header
	CallID string `json:"callId"`
	Delta  string `json:"delta"`
}

// ToolCallEnded reports the provider finished streaming one call.
type ToolCallEnded struct {
	header
	CallID string `json:"callId"`
}

// AssistantCommitted reports the complete assistant message is durable.
// No tool of that message runs before this event.
type AssistantCommitted struct {
	header
	EntryID string `json:"entryId"`
}

// ToolStarted opens the dispatch of one call (before admission).
type ToolStarted struct {
	header
	CallID string `json:"callId"`
	Tool   string `json:"tool"`
}

// ToolPolicyDecision is the secret-safe admission evidence of one call,
// emitted after its ToolStarted and before its ToolFinished.
type ToolPolicyDecision struct {
	header
	CallID              string                    `json:"callId"`
	Decision            string                    `json:"decision"`
	Reason              string                    `json:"reason,omitempty"`
	Effect              tools.Effect              `json:"effect,omitempty"`
	EffectiveToolPolicy tools.EffectiveToolPolicy `json:"effectiveToolPolicy"`
	// RuleID names the standing approval that admitted the call (reason
	// session_rule) or was granted with it (approved_for_session).
	RuleID string `json:"ruleId,omitempty"`
}

// ToolOutput is bounded incremental tool output for presentation only.
type ToolOutput struct {
	header
	CallID string `json:"callId"`
	Text   string `json:"text"`
}

// ToolFinished closes the call: its result record is durable, or, with
// Unrecorded, its result could not be saved (the run then fails, and the
// call is indeterminate when the session is resumed).
type ToolFinished struct {
	header
	CallID  string `json:"callId"`
	IsError bool   `json:"isError"`
	// Error is a failed call's result as the model sees it (a denial's
	// reason, the tool's failure), bounded (MaxToolErrorEventBytes); it
	// is empty for a call that succeeded.
	Error      string `json:"error,omitempty"`
	Unrecorded bool   `json:"unrecorded,omitempty"`
	// Changes lists the files the call changed (edit, write, a
	// checkpointed bash call), each with its bounded unified diff;
	// omitted for calls that changed none.
	Changes []changes.Change `json:"changes,omitempty"`
	// CannotUndo states what a rewind of the call cannot take back (a
	// checkpointed bash call); omitted for other calls.
	CannotUndo []string `json:"cannotUndo,omitempty"`
}

// PlanUpdate reports the session's plan after an update_plan call, whole
// (it replaces the plan before it). It follows the call's durable result
// and precedes its ToolFinished.
type PlanUpdate struct {
	header
	CallID      string           `json:"callId"`
	Explanation string           `json:"explanation,omitempty"`
	Plan        []tools.PlanStep `json:"plan"`
}

// ProviderRetry reports that a failed provider attempt is being replaced.
// It invalidates all provisional output of the failed attempt.
type ProviderRetry struct {
	header
	Attempt     int     `json:"attempt"`
	MaxAttempts *int    `json:"maxAttempts"` // null while waiting for the network
	DelayMs     int64   `json:"delayMs"`
	RetryKind   string  `json:"retryKind"` // "interrupted_inference" | "waiting_for_network"
	Operation   *string `json:"operation"` // null for the main request
	Reason      string  `json:"reason"`
	// Cause names the failure as it is, for people ("cannot connect to
	// the provider: connection refused"); bounded and secret-free.
	Cause string `json:"cause"`
	// GiveUpInMs is how long from now the turn may still spend retrying
	// before it fails (max_retry_wait_secs, or max_network_wait_secs
	// while waiting for the network); null when only the attempt budget
	// bounds it.
	GiveUpInMs *int64 `json:"giveUpInMs"`
}

// ProviderUsageUncertain reports that the session's usage totals are no
// longer complete: a dispatched attempt failed with unknown usage. It is
// emitted on the first observed uncertainty of a run and at run start for an
// already-uncertain session.
type ProviderUsageUncertain struct {
	header
	Operation string `json:"operation,omitempty"`
	Reason    string `json:"reason"`
}

// Usage carries the run's known usage so far (a cumulative subtotal).
// Complete is false once any attempt's usage is unknown.
type Usage struct {
	header
	Input       int64  `json:"input"`
	CachedInput int64  `json:"cachedInput"`
	Output      int64  `json:"output"`
	Reasoning   int64  `json:"reasoning"`
	CostMicros  *int64 `json:"costMicros,omitempty"`
	Complete    bool   `json:"complete"`
	// ContextTokens is how much of the context window the conversation
	// fills: the last main request's input plus output tokens as the
	// provider reported them or, right after a compaction, the estimate
	// of the compacted context. ContextWindow is the model's window.
	ContextTokens int64 `json:"contextTokens"`
	ContextWindow int64 `json:"contextWindow"`
	// Session is the session's known totals after this request: every
	// run so far and its delegated children (a status line's session
	// figure; the fields above are this run's).
	Session SessionUsage `json:"session"`
}

// SessionUsage is a session's known usage totals, as a Usage event
// carries them (SessionUsageOf).
type SessionUsage struct {
	Input       int64 `json:"input"`
	CachedInput int64 `json:"cachedInput"`
	Output      int64 `json:"output"`
	Reasoning   int64 `json:"reasoning"`
	// CostMicros is the known cost of the priced requests (those of a
	// model without prices add none).
	CostMicros int64 `json:"costMicros"`
	Requests   int   `json:"requests"`
}

// CompactionStarted reports autonomous compaction began.
type CompactionStarted struct {
	header
	TokensBefore int `json:"tokensBefore"`
}

// CompactionFinished reports compaction ended. EntryID is the durable
// compaction entry, empty when it failed or was cancelled.
type CompactionFinished struct {
	header
	EntryID string `json:"entryId,omitempty"`
	Error   string `json:"error,omitempty"`
}

// TurnFinished closes one provider turn and its tool results.
type TurnFinished struct {
	header
	Turn int `json:"turn"`
}

// RunFinished is the last event of every run, emitted exactly once after
// the run's checkpoint is durable (or failed to be written).
type RunFinished struct {
	header
	Outcome Outcome `json:"outcome"`
	Error   string  `json:"error,omitempty"`
}

// RecoveredOutput carries the partial text or reasoning of an interrupted
// provider attempt. It is historical progress: consumers must never append
// it to the current answer.
type RecoveredOutput struct {
	header
	Channel string `json:"channel"`
	Text    string `json:"text"`
}

// Kind methods and JSON encoders. Each MarshalJSON uses a local alias so
// the fields sit beside "kind" without recursion.

// Kind returns the protocol kind (KindRunStarted).
func (*RunStarted) Kind() string { return KindRunStarted }

// Kind returns the protocol kind (KindOutputDelta).
func (*OutputDelta) Kind() string { return KindOutputDelta }

// Kind returns the protocol kind (KindToolCallStarted).
func (*ToolCallStarted) Kind() string { return KindToolCallStarted }

// Kind returns the protocol kind (KindToolCallDelta).
func (*ToolCallDelta) Kind() string { return KindToolCallDelta }

// Kind returns the protocol kind (KindToolCallEnded).
func (*ToolCallEnded) Kind() string { return KindToolCallEnded }

// Kind returns the protocol kind (KindAssistantCommitted).
func (*AssistantCommitted) Kind() string { return KindAssistantCommitted }

// Kind returns the protocol kind (KindToolStarted).
func (*ToolStarted) Kind() string { return KindToolStarted }

// Kind returns the protocol kind (KindToolPolicyDecision).
func (*ToolPolicyDecision) Kind() string { return KindToolPolicyDecision }

// Kind returns the protocol kind (KindToolOutput).
func (*ToolOutput) Kind() string { return KindToolOutput }

// Kind returns the protocol kind (KindToolFinished).
func (*ToolFinished) Kind() string { return KindToolFinished }

// Kind returns the protocol kind (KindPlan).
func (*PlanUpdate) Kind() string { return KindPlan }

// Kind returns the protocol kind (KindProviderRetry).
func (*ProviderRetry) Kind() string { return KindProviderRetry }

// Kind returns the protocol kind (KindProviderUsageUncertain).
func (*ProviderUsageUncertain) Kind() string { return KindProviderUsageUncertain }

// Kind returns the protocol kind (KindUsage).
func (*Usage) Kind() string { return KindUsage }

// Kind returns the protocol kind (KindCompactionStarted).
func (*CompactionStarted) Kind() string { return KindCompactionStarted }

// Kind returns the protocol kind (KindCompactionFinished).
func (*CompactionFinished) Kind() string { return KindCompactionFinished }

// Kind returns the protocol kind (KindTurnFinished).
func (*TurnFinished) Kind() string { return KindTurnFinished }

// Kind returns the protocol kind (KindRunFinished).
func (*RunFinished) Kind() string { return KindRunFinished }

// Kind returns the protocol kind (KindRecoveredOutput).
func (*RecoveredOutput) Kind() string { return KindRecoveredOutput }

// MarshalJSON encodes the event with its kind.
func (e *RunStarted) MarshalJSON() ([]byte, error) {
	type a RunStarted
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *OutputDelta) MarshalJSON() ([]byte, error) {
	type a OutputDelta
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *ToolCallStarted) MarshalJSON() ([]byte, error) {
	type a ToolCallStarted
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *ToolCallDelta) MarshalJSON() ([]byte, error) {
	type a ToolCallDelta
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *ToolCallEnded) MarshalJSON() ([]byte, error) {
	type a ToolCallEnded
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *AssistantCommitted) MarshalJSON() ([]byte, error) {
	type a AssistantCommitted
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *ToolStarted) MarshalJSON() ([]byte, error) {
	type a ToolStarted
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *ToolPolicyDecision) MarshalJSON() ([]byte, error) {
	type a ToolPolicyDecision
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *ToolOutput) MarshalJSON() ([]byte, error) {
	type a ToolOutput
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *ToolFinished) MarshalJSON() ([]byte, error) {
	type a ToolFinished
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *PlanUpdate) MarshalJSON() ([]byte, error) {
	type a PlanUpdate
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *ProviderRetry) MarshalJSON() ([]byte, error) {
	type a ProviderRetry
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *ProviderUsageUncertain) MarshalJSON() ([]byte, error) {
	type a ProviderUsageUncertain
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *Usage) MarshalJSON() ([]byte, error) {
	type a Usage
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *CompactionStarted) MarshalJSON() ([]byte, error) {
	type a CompactionStarted
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *CompactionFinished) MarshalJSON() ([]byte, error) {
	type a CompactionFinished
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *TurnFinished) MarshalJSON() ([]byte, error) {
	type a TurnFinished
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *RunFinished) MarshalJSON() ([]byte, error) {
	type a RunFinished
	return withKind(e.Kind(), (*a)(e))
}

// MarshalJSON encodes the event with its kind.
func (e *RecoveredOutput) MarshalJSON() ([]byte, error) {
	type a RecoveredOutput
	return withKind(e.Kind(), (*a)(e))
}

// SessionUsageOf is the known usage of a session's totals.
func SessionUsageOf(t session.Totals) SessionUsage {
	return SessionUsage{
		Input: t.Known.Input, CachedInput: t.Known.CachedInput, Output: t.Known.Output, Reasoning: t.Known.Reasoning,
		CostMicros: t.Known.CostPicodollars / 1_000_000, Requests: t.Requests,
	}
}
