package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// flexString decodes a JSON string, number or null into a string; provider
// error codes are sometimes numbers and often null.
type flexString string

// UnmarshalJSON accepts a string, a number, a boolean or null.
func (f *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		*f = ""
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
	case b[0] == '{' || b[0] == '[':
		return fmt.Errorf("error code is a JSON %s", map[byte]string{'{': "object", '[': "array"}[b[0]])
	default:
		*f = flexString(b)
	}
	return nil
}

type wireError struct {
	Type    flexString `json:"type"`
	Code    flexString `json:"code"`
	Message flexString `json:"message"`
}

type wireUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

type wireResponse struct {
	ID                string            `json:"id"`
	Model             string            `json:"model"`
	Status            string            `json:"status"`
	Output            []json.RawMessage `json:"output"`
	Usage             *wireUsage        `json:"usage"`
	Error             *wireError        `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

type wireOutputContent struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

type wireOutputItem struct {
	ID               string              `json:"id"`
	Type             string              `json:"type"`
	Status           string              `json:"status"`
	Role             string              `json:"role"`
	Phase            string              `json:"phase"`
	Content          []wireOutputContent `json:"content"`
	Summary          []wireOutputContent `json:"summary"`
	EncryptedContent string              `json:"encrypted_content"`
	CallID           string              `json:"call_id"`
	Name             string              `json:"name"`
	Arguments        string              `json:"arguments"`
	Async            bool                `json:"async"`
	Input            string              `json:"input"`
	Output           flexString          `json:"output"`
}

// wireEvent is the union of every event field octet reads.
type wireEvent struct {
	Type         string          `json:"type"`
	ItemID       string          `json:"item_id"`
	OutputIndex  *int            `json:"output_index"`
	SummaryIndex int             `json:"summary_index"`
	Delta        string          `json:"delta"`
	Item         json.RawMessage `json:"item"`
	Response     *wireResponse   `json:"response"`
	// The error event: either flat {code, message} (documented) or nested
	// {error:{type, code, message}} (observed live; also the WebSocket
	// error frame, which adds status and headers).
	Code    flexString `json:"code"`
	Message flexString `json:"message"`
	Error   *wireError `json:"error"`
	Status  int        `json:"status"`
	// StatusCode is the alias some servers use for Status (Codex accepts both).
	StatusCode int            `json:"status_code"`
	Headers    map[string]any `json:"headers"`
}

// wireSteerEvent holds the fields of the steering events (decoded apart,
// so other events' fields of the same names cannot break their decoding).
type wireSteerEvent struct {
	Steer *struct {
		ID                 string `json:"id"`
		PreviousResponseID string `json:"previous_response_id"`
	} `json:"steer"`
	Reason        string `json:"reason"`
	RequiredInput []struct {
		CallID string `json:"call_id"`
	} `json:"required_input"`
}

// doneItem is an output item with its output index.
type doneItem struct {
	index int
	item  Item
}

// callInfo remembers a tool call's identity between its added event and
// its argument deltas.
type callInfo struct {
	itemID string
	callID string
	name   string
}

// decoder turns Responses event payloads into Events. It is shared by both
// transports, so the same bytes yield the same events.
type decoder struct {
	ev       wireEvent
	done     []doneItem
	calls    []callInfo
	nextIdx  int
	sawFirst bool
	// lastItemID interns repeated delta item ids.
	lastItemID string
	// noFast disables fastDelta (tests compare both paths).
	noFast bool
}

// step is the outcome of decoding one payload.
type step struct {
	emit  bool
	final bool
}

// decode decodes one payload. A returned *Error is terminal (Phase Body,
// Dispatched true; the transport fills request facts).
func (d *decoder) decode(data []byte) (Event, step, *Error) {
	if !utf8.Valid(data) {
		return Event{}, step{}, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeInvalidUTF8, Dispatched: true,
			Err: fmt.Errorf("frame of %d bytes is not valid UTF-8", len(data))}
	}
	if !d.noFast {
		if ev, ok := d.fastDelta(data); ok {
			d.sawFirst = true
			return ev, step{emit: true}, nil
		}
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		return Event{}, step{}, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeJSON, Dispatched: true,
			Err: fmt.Errorf("decode frame: %w", err)}
	}
	return d.decodeSlow(data)
}

// decodeSlow decodes any valid JSON payload with encoding/json.
func (d *decoder) decodeSlow(data []byte) (Event, step, *Error) {
	d.ev = wireEvent{}
	if err := json.Unmarshal(data, &d.ev); err != nil {
		return Event{}, step{}, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeJSON, Dispatched: true,
			Err: fmt.Errorf("decode frame: %w", err)}
	}
	first := !d.sawFirst
	d.sawFirst = true
	w := &d.ev
	switch w.Type {
	case "response.created":
		r := &Response{}
		if w.Response != nil {
			r.ID, r.Model, r.Status = w.Response.ID, w.Response.Model, w.Response.Status
		}
		return Event{Type: EventCreated, Response: r}, step{emit: true}, nil
	case "response.output_text.delta", "response.refusal.delta":
		return Event{Type: EventTextDelta, ItemID: w.ItemID, OutputIndex: d.index(w), Delta: w.Delta}, step{emit: true}, nil
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		return Event{Type: EventReasoningDelta, ItemID: w.ItemID, OutputIndex: d.index(w), SummaryIndex: w.SummaryIndex, Delta: w.Delta}, step{emit: true}, nil
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		ev := Event{Type: EventToolCallDelta, ItemID: w.ItemID, OutputIndex: d.index(w), Delta: w.Delta}
		if c := d.call(w.ItemID); c != nil {
			ev.CallID, ev.Name = c.callID, c.name
		}
		return ev, step{emit: true}, nil
	case "response.output_item.added":
		return d.added(w)
	case "response.output_item.done":
		return d.itemDone(w)
	case "response.completed":
		if w.Response == nil {
			return Event{}, step{}, violation("response.completed without a response object")
		}
		return Event{Type: EventCompleted, Response: d.assemble(w.Response)}, step{emit: true, final: true}, nil
	case "response.incomplete":
		e := &Error{Phase: Body, Class: ResponsesIncomplete, Dispatched: true}
		if w.Response != nil {
			e.Response = d.assemble(w.Response)
			e.IncompleteReason = e.Response.IncompleteReason
		}
		if e.IncompleteReason == "" {
			e.IncompleteReason = "unknown"
		}
		return Event{}, step{}, e
	case "response.failed":
		e := &Error{Phase: Body, Class: ResponsesFailed, Dispatched: true}
		if w.Response != nil {
			e.Response = d.assemble(w.Response)
			if we := w.Response.Error; we != nil {
				e.Type, e.Code, e.Message = string(we.Type), string(we.Code), string(we.Message)
			}
		}
		return Event{}, step{}, e
	case "error":
		return Event{}, step{}, d.errorEvent(w, first)
	case "":
		if w.Error != nil { // {"error":{…}} without a type: a gateway's error frame
			return Event{}, step{}, d.errorEvent(w, first)
		}
	case "response.steer.accepted", "response.steer.pending", "response.steer.failed":
		return d.steerEvent(w, data)
	}
	// Every other event (in_progress, queued, content_part.*, *.done
	// summaries, annotations, keepalive, rate_limits.updated, hosted-tool
	// progress, unknown future events) is skipped: output_item.done carries
	// the authoritative content.
	return Event{}, step{}, nil
}

// steerEvent maps a steering event.
func (d *decoder) steerEvent(w *wireEvent, data []byte) (Event, step, *Error) {
	var s wireSteerEvent
	if err := json.Unmarshal(data, &s); err != nil {
		return Event{}, step{}, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeJSON, Dispatched: true,
			Err: fmt.Errorf("decode %s: %w", w.Type, err)}
	}
	u := &SteerUpdate{Reason: s.Reason}
	if s.Steer != nil {
		u.ID, u.PreviousResponseID = s.Steer.ID, s.Steer.PreviousResponseID
	}
	ev := Event{Steer: u}
	switch w.Type {
	case "response.steer.accepted":
		ev.Type = EventSteerAccepted
	case "response.steer.pending":
		ev.Type = EventSteerPending
		for _, in := range s.RequiredInput {
			u.RequiredCallIDs = append(u.RequiredCallIDs, in.CallID)
		}
	default:
		ev.Type = EventSteerFailed
		u.Code, u.Message = string(w.Code), string(w.Message)
		if w.Error != nil {
			u.Code, u.Message = string(w.Error.Code), string(w.Error.Message)
		}
	}
	return ev, step{emit: true}, nil
}

func violation(msg string) *Error {
	return &Error{Phase: Body, Class: ProtocolViolation, Dispatched: true, Message: msg}
}

// errorEvent maps an error event. A WebSocket error frame with an error
// status ("status", or "status_code") is the socket's form of an HTTP error
// response and maps like one; without one it is a ResponsesFailed.
func (d *decoder) errorEvent(w *wireEvent, first bool) *Error {
	e := &Error{Phase: Body, Class: ResponsesFailed, Dispatched: true,
		Code: string(w.Code), Message: string(w.Message)}
	if w.Error != nil {
		e.Type = string(w.Error.Type)
		if w.Error.Code != "" {
			e.Code = string(w.Error.Code)
		}
		if w.Error.Message != "" {
			e.Message = string(w.Error.Message)
		}
	}
	status := w.Status
	if status == 0 {
		status = w.StatusCode
	}
	if status >= 400 && status <= 599 {
		e.Class = HTTPStatus
		e.Status = status
		if first {
			e.Phase = Opening
		}
		h := frameHeaders(w.Headers)
		e.RetryAfter, e.HasRetryAfter = RetryAfterFromHeader(h, nowFunc())
		e.RateLimits = ParseRateLimits(h)
		e.RequestID = h.Get("X-Request-Id")
	}
	return e
}

func (d *decoder) index(w *wireEvent) int {
	if w.OutputIndex != nil {
		return *w.OutputIndex
	}
	return -1
}

func (d *decoder) call(itemID string) *callInfo {
	for i := range d.calls {
		if d.calls[i].itemID == itemID {
			return &d.calls[i]
		}
	}
	return nil
}

func (d *decoder) added(w *wireEvent) (Event, step, *Error) {
	if len(w.Item) == 0 || bytes.Equal(w.Item, []byte("null")) {
		return Event{}, step{}, violation("response.output_item.added without an item")
	}
	var it wireOutputItem
	if err := json.Unmarshal(w.Item, &it); err != nil {
		return Event{}, step{}, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeJSON, Dispatched: true,
			Err: fmt.Errorf("decode output item: %w", err)}
	}
	if it.Type != string(ItemFunctionCall) && it.Type != string(ItemCustomToolCall) {
		return Event{}, step{}, nil
	}
	if c := d.call(it.ID); it.ID != "" && c != nil && c.callID == it.CallID && c.name == it.Name {
		return Event{}, step{}, nil // a repeated frame: the call has started
	}
	d.calls = append(d.calls, callInfo{itemID: it.ID, callID: it.CallID, name: it.Name})
	return Event{Type: EventToolCallStarted, ItemID: it.ID, OutputIndex: d.index(w), CallID: it.CallID, Name: it.Name}, step{emit: true}, nil
}

func (d *decoder) itemDone(w *wireEvent) (Event, step, *Error) {
	if len(w.Item) == 0 || bytes.Equal(w.Item, []byte("null")) {
		return Event{}, step{}, violation("response.output_item.done without an item")
	}
	it, err := decodeItem(w.Item)
	if err != nil {
		return Event{}, step{}, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeJSON, Dispatched: true,
			Err: fmt.Errorf("decode output item: %w", err)}
	}
	if d.repeated(&it) {
		return Event{}, step{}, nil
	}
	idx := d.index(w)
	if idx < 0 {
		idx = d.nextIdx
	}
	d.nextIdx = max(d.nextIdx, idx+1)
	d.done = append(d.done, doneItem{index: idx, item: it})
	item := it
	return Event{Type: EventItemDone, ItemID: it.ID, OutputIndex: idx, CallID: it.CallID, Name: it.Name, Item: &item}, step{emit: true}, nil
}

// repeated reports whether it repeats, byte for byte, an item already
// done: a frame a proxy sent twice. It is dropped rather than listed
// twice (which would fail the response closed as a duplicate call id);
// a different item under the same id is kept, and fails closed.
func (d *decoder) repeated(it *Item) bool {
	if it.ID == "" {
		return false
	}
	for i := range d.done {
		if d.done[i].item.ID == it.ID && bytes.Equal(d.done[i].item.Raw, it.Raw) {
			return true
		}
	}
	return false
}

// decodeItem converts one wire output item; Raw keeps a copy of the bytes.
func decodeItem(raw []byte) (Item, error) {
	var w wireOutputItem
	if err := json.Unmarshal(raw, &w); err != nil {
		return Item{}, err
	}
	it := Item{
		Type: ItemType(w.Type), ID: w.ID, Role: w.Role, Phase: w.Phase, Status: w.Status,
		EncryptedContent: w.EncryptedContent, CallID: w.CallID, Name: w.Name,
		Arguments: w.Arguments, Async: w.Async && w.Type == string(ItemFunctionCall), Input: w.Input, Output: string(w.Output),
		Raw: slices.Clone(json.RawMessage(raw)),
	}
	var text, refusal []byte
	for _, c := range w.Content {
		switch c.Type {
		case "output_text", "input_text", "text":
			text = append(text, c.Text...)
		case "refusal":
			refusal = append(refusal, c.Refusal...)
		}
	}
	it.Text, it.Refusal = string(text), string(refusal)
	for _, s := range w.Summary {
		it.Summary = append(it.Summary, s.Text)
	}
	return it, nil
}

// assemble builds the terminal Response: output items from
// output_item.done in output order, else from the response object.
func (d *decoder) assemble(w *wireResponse) *Response {
	r := &Response{ID: w.ID, Model: w.Model, Status: w.Status}
	if w.IncompleteDetails != nil {
		r.IncompleteReason = w.IncompleteDetails.Reason
	}
	if w.Usage != nil {
		u := &Usage{InputTokens: w.Usage.InputTokens, OutputTokens: w.Usage.OutputTokens}
		if w.Usage.InputTokensDetails != nil {
			u.CachedTokens = w.Usage.InputTokensDetails.CachedTokens
		}
		if w.Usage.OutputTokensDetails != nil {
			u.ReasoningTokens = w.Usage.OutputTokensDetails.ReasoningTokens
		}
		r.Usage = u
	}
	if len(d.done) > 0 {
		slices.SortStableFunc(d.done, func(a, b doneItem) int { return a.index - b.index })
		r.Output = make([]Item, 0, len(d.done))
		for _, di := range d.done {
			r.Output = append(r.Output, di.item)
		}
		return r
	}
	for _, raw := range w.Output {
		if it, err := decodeItem(raw); err == nil {
			r.Output = append(r.Output, it)
		}
	}
	return r
}

// frameHeaders converts a WebSocket error frame's headers object (string
// or numeric values) into an http.Header.
func frameHeaders(m map[string]any) http.Header {
	h := http.Header{}
	for k, v := range m {
		switch v := v.(type) {
		case string:
			h.Set(k, v)
		case float64:
			h.Set(k, strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	return h
}

// nowFunc is the clock used for HTTP-date Retry-After values.
var nowFunc = time.Now
