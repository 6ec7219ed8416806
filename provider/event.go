package provider

import (
	"context"
	"net/http"
)

// EventType says what an [Event] reports.
type EventType int

// Event types, in the order they typically appear.
const (
	// EventCreated reports response.created; Response carries only the ID.
	EventCreated EventType = iota + 1
	// EventTextDelta is a provisional fragment of assistant message text.
	EventTextDelta
	// EventReasoningDelta is a provisional fragment of a reasoning summary
	// (SummaryIndex says which one) or of raw reasoning text.
	EventReasoningDelta
	// EventToolCallStarted reports that the model began a tool call
	// (CallID, Name). It never authorizes executing anything.
	EventToolCallStarted
	// EventToolCallDelta is a provisional fragment of tool-call arguments.
	EventToolCallDelta
	// EventItemDone carries an authoritative, complete output item.
	EventItemDone
	// EventCompleted is the terminal event of a healthy response.
	EventCompleted
	// EventSteerAccepted reports response.steer.accepted: the server
	// queued a steering input (Steer) for the response in progress.
	EventSteerAccepted
	// EventSteerPending reports response.steer.pending: an accepted
	// steering input waits for the tool results the response asked for
	// (Steer.RequiredCallIDs), which go back with [SteeringStream.Continue].
	EventSteerPending
	// EventSteerFailed reports response.steer.failed: the input was not
	// applied and will not be (Steer.Code, Steer.Message).
	EventSteerFailed
	// EventSegmentDone ends one response of a steered stream (Response:
	// completed, or incomplete with reason "steered"); the stream goes on
	// with the successor response the accepted steering input asked for.
	EventSegmentDone
)

var eventTypeNames = [...]string{
	EventCreated:         "created",
	EventTextDelta:       "text_delta",
	EventReasoningDelta:  "reasoning_delta",
	EventToolCallStarted: "tool_call_started",
	EventToolCallDelta:   "tool_call_delta",
	EventItemDone:        "item_done",
	EventCompleted:       "completed",
	EventSteerAccepted:   "steer_accepted",
	EventSteerPending:    "steer_pending",
	EventSteerFailed:     "steer_failed",
	EventSegmentDone:     "segment_done",
}

// String returns a short lower-case name such as "text_delta".
func (t EventType) String() string {
	if t > 0 && int(t) < len(eventTypeNames) {
		return eventTypeNames[t]
	}
	return "unknown"
}

// Event is one decoded stream event.
type Event struct {
	Type EventType
	// ItemID is the output item the event belongs to, when the wire says.
	ItemID string
	// OutputIndex is the item's position in the response output.
	OutputIndex int
	// SummaryIndex is the reasoning summary part of an EventReasoningDelta.
	SummaryIndex int
	// Delta is the provisional text, reasoning or tool-argument fragment.
	Delta string
	// CallID and Name identify the tool call of EventToolCallStarted (and of
	// EventToolCallDelta, filled from the started event).
	CallID, Name string
	// Item is the authoritative item of EventItemDone.
	Item *Item
	// Response is set on EventCreated (ID only), EventCompleted and
	// EventSegmentDone.
	Response *Response
	// Steer is set on the steering events.
	Steer *SteerUpdate
}

// SteerUpdate is what a steering event says about one steering input.
type SteerUpdate struct {
	// ID is the server's steering id; PreviousResponseID the response
	// it was sent to.
	ID, PreviousResponseID string
	// Reason and RequiredCallIDs are those of EventSteerPending
	// ("waiting_for_required_input" and the calls whose outputs it needs).
	Reason          string
	RequiredCallIDs []string
	// Code and Message are the error of EventSteerFailed.
	Code, Message string
}

// Response is the outcome of a response: what EventCompleted carries, and
// what an [*Error] of class [ResponsesIncomplete] or [ResponsesFailed]
// carries when the server sent it.
type Response struct {
	ID     string
	Model  string
	Status string
	// Output holds the items from response.output_item.done in output
	// order. If the stream delivered no output_item.done at all, it holds
	// the output array of the terminal response object instead.
	Output []Item
	// Usage is nil when the server reported none.
	Usage *Usage
	// IncompleteReason is incomplete_details.reason of an incomplete
	// response ("max_output_tokens", "content_filter", ...).
	IncompleteReason string
}

// Usage is the token accounting the server reported for one response.
// Details the server sent as null are zero.
type Usage struct {
	InputTokens     int64
	CachedTokens    int64
	OutputTokens    int64
	ReasoningTokens int64
	// CacheWriteTokens is the part of InputTokens written to a prompt
	// cache, which some providers (Anthropic) bill above input.
	CacheWriteTokens int64
}

// Stream is one in-flight response. It is owned by one goroutine: Next is not
// safe for concurrent use, Close may be called from any goroutine.
type Stream interface {
	// Next returns the next event, io.EOF after EventCompleted, or an
	// [*Error]. ctx bounds this call only; cancelling it aborts the stream
	// (the error has class Canceled).
	Next(ctx context.Context) (Event, error)
	// Close releases the stream. Closing before EventCompleted abandons the
	// response (over WebSocket it retires the connection).
	Close() error
	// RequestID is the server's request id (x-request-id), if any.
	RequestID() string
	// RateLimits are the rate-limit headers of the response, if any.
	RateLimits() RateLimits
}

// Transport opens streams. Open connects, sends the request and waits for
// the response headers (HTTP) or for the frame to be written (WebSocket);
// ctx bounds only that opening. It never retries.
type Transport interface {
	Open(ctx context.Context, req *Request) (Stream, error)
}

// FeatureReporter is implemented by transports that advertise the
// Responses features their endpoint grants (see [Qualified]).
type FeatureReporter interface {
	EndpointFeatures() ResponsesFeatures
}

// header returns a copy of h with sensitive values removed, for debugging.
func redactHeader(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range credentialHeaders {
		if _, ok := out[k]; ok {
			out[k] = []string{"[REDACTED]"}
		}
	}
	return out
}
