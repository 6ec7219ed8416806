package providertest

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/octet-agent/octet/provider"
)

// frame is one scripted event: its SSE event name and JSON payload.
type frame struct {
	typ  string
	data []byte
}

// ending says how a turn's body ends.
type ending int

const (
	endComplete ending = iota // all frames, then a clean end
	endDrop                   // abort the connection
	endEOF                    // clean end of body (after a cut)
	endStall                  // write nothing more until the client gives up
)

// Turn is one scripted response, consumed by exactly one request (HTTP POST
// or WebSocket response.create). Build turns with [Text], [Reply],
// [Status], [Failed], [Incomplete], [Stall], [Events] and refine them with
// the With*/After/At methods; every method returns a modified copy.
type Turn struct {
	status  int
	errBody []byte
	// contentType is a status turn's Content-Type (application/json
	// when empty).
	contentType string
	header      http.Header
	frames      []frame
	cut         int // frames written before the ending applies; -1 = all
	end         ending
	refuse      bool
	id          string
	items       []Output
	usage       *provider.Usage
	noUsage     bool
	final       string // "completed", "incomplete", "failed"
	reason      string
	code        string
	message     string
	raw         bool
	rawSSE      []byte
	pace        time.Duration
	hold        <-chan struct{} // the first frame waits until it is closed (nil: no wait)
	match       string
	patches     []patch // frames replaced after rendering for the route
	// chatReasoning is the Chat Completions delta field reasoning
	// streams in ("reasoning_content" unless set).
	chatReasoning string
	// steer makes the turn wait for a response.steer (WebSocket only).
	steer *steerScript
	// compacted is the output of a native compaction turn (Compacted).
	compacted []Output
}

// steerScript is how a steerable turn answers the client's
// response.steer.
type steerScript struct {
	after     int    // frames written before the turn waits for the steer
	fail      string // answer response.steer.failed with this code
	interrupt bool   // end with response.incomplete, reason "steered"
	successor Turn   // the continuation the accepted input asks for
}

// Compacted is the answer to a native compaction (POST
// …/responses/compact): the JSON compaction object whose output is the
// user messages kept, then one compaction item with encrypted, and usage
// (100 input, 10 output tokens unless WithUsage; WithoutUsage omits it).
// Pace delays the body after the headers; DropAfter(n) cuts it after n
// bytes.
func Compacted(encrypted string, kept ...string) Turn {
	out := make([]Output, 0, len(kept)+1)
	for _, k := range kept {
		out = append(out, Output{kind: provider.ItemMessage, text: k})
	}
	out = append(out, Output{kind: provider.ItemCompaction, encrypted: encrypted})
	return Turn{compacted: out, cut: -1}
}

// compactBody renders a Compacted turn's JSON object.
func (t Turn) compactBody() []byte {
	output := make([]any, 0, len(t.compacted))
	for i, o := range t.compacted {
		if o.kind == provider.ItemCompaction {
			output = append(output, map[string]any{"type": "compaction", "id": "cmp_" + strconv.Itoa(i), "encrypted_content": o.encrypted})
			continue
		}
		output = append(output, map[string]any{"type": "message", "role": "user", "id": "msg_" + strconv.Itoa(i),
			"content": []any{map[string]any{"type": "input_text", "text": o.text}}})
	}
	m := map[string]any{"id": cmp.Or(t.id, "resp_compacted"), "object": "response.compaction", "created_at": 1731459200, "output": output}
	if !t.noUsage {
		u := provider.Usage{InputTokens: 100, OutputTokens: 10}
		if t.usage != nil {
			u = *t.usage
		}
		m["usage"] = map[string]any{"input_tokens": u.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": u.CachedTokens},
			"output_tokens": u.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
			"total_tokens": u.InputTokens + u.OutputTokens}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("providertest: render compaction: %v", err)) // only our own maps
	}
	return b
}

// SteerAfter makes the turn, over WebSocket, write its first n frames
// (frame 0 is response.created), then wait for the client's
// response.steer. It answers response.steer.accepted, ends the turn
// (interrupt: the rest of its output, then response.incomplete with
// reason "steered"; else as scripted) and plays successor on the same
// connection as the continuation: at once when the turn calls no
// function; else after response.steer.pending naming the calls, when
// the client's response.create with previous_response_id returns their
// outputs. The successor's id is "resp_successor" unless set. Every
// client event read is recorded as a request.
func (t Turn) SteerAfter(n int, interrupt bool, successor Turn) Turn {
	t.steer = &steerScript{after: n, interrupt: interrupt, successor: successor}
	return t
}

// SteerRefusedAfter makes the turn wait for the client's response.steer
// after its first n frames like SteerAfter, answer response.steer.failed
// with code, and finish as scripted.
func (t Turn) SteerRefusedAfter(n int, code string) Turn {
	t.steer = &steerScript{after: n, fail: code}
	return t
}

// patch replaces frame n of the rendered turn (appends when n is past
// the end).
type patch struct {
	n    int
	data []byte
}

// Output is one scripted output item; see [Message], [Reasoning],
// [FunctionCall] and [CustomToolCall].
type Output struct {
	kind      provider.ItemType
	text      string
	summary   []string
	encrypted string
	callID    string
	name      string
	args      string
	async     bool
}

// Message is an assistant message with text, streamed as word deltas.
func Message(text string) Output { return Output{kind: provider.ItemMessage, text: text} }

// Reasoning is a reasoning item with summary parts and opaque encrypted
// content, its summaries streamed as word deltas.
func Reasoning(encrypted string, summary ...string) Output {
	return Output{kind: provider.ItemReasoning, encrypted: encrypted, summary: summary}
}

// FunctionCall is a function call whose JSON arguments stream in pieces.
func FunctionCall(callID, name, args string) Output {
	return Output{kind: provider.ItemFunctionCall, callID: callID, name: name, args: args}
}

// AsyncFunctionCall is a function call the model marked async (its tool
// was advertised with async: true): the call item carries "async": true.
func AsyncFunctionCall(callID, name, args string) Output {
	o := FunctionCall(callID, name, args)
	o.async = true
	return o
}

// CustomToolCall is a free-form tool call whose input streams in pieces.
func CustomToolCall(callID, name, input string) Output {
	return Output{kind: provider.ItemCustomToolCall, callID: callID, name: name, args: input}
}

// Text is a turn answering with one assistant message.
func Text(text string) Turn { return Reply(Message(text)) }

// Reply is a healthy turn producing the given output items, then
// response.completed with usage (see [Turn.WithUsage]).
func Reply(outputs ...Output) Turn {
	return Turn{items: outputs, cut: -1, final: "completed"}
}

// Status is a turn answering with an HTTP status and a JSON error body
// {"error":{"type","code","message"}}. Over WebSocket it becomes an error
// frame carrying the status. Add Retry-After with [Turn.WithHeader].
func Status(code int, errType, errCode, message string) Turn {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"type": errType, "code": nullable(errCode), "message": message, "param": nil}})
	return Turn{status: code, errBody: body, cut: -1}
}

// NotEventStream is a turn answering 200 with a body that is not an event
// stream (an HTML page, a JSON document): what a base URL naming the
// wrong server gets.
func NotEventStream(contentType, body string) Turn {
	return Turn{status: 200, contentType: contentType, errBody: []byte(body), cut: -1}
}

// StatusBody is a turn answering with an HTTP status and a raw body.
func StatusBody(code int, body string) Turn {
	return Turn{status: code, errBody: []byte(body), cut: -1}
}

// Failed is a turn that starts, emits the live error event and ends with
// response.failed carrying {code, message}.
func Failed(code, message string) Turn {
	return Turn{cut: -1, final: "failed", code: code, message: message}
}

// FailedAfter is a turn that streams outputs (partial generation) and then
// emits the live error event and response.failed carrying {code, message}.
func FailedAfter(code, message string, outputs ...Output) Turn {
	t := Failed(code, message)
	t.items = outputs
	return t
}

// Incomplete is a turn that streams outputs and ends with
// response.incomplete whose incomplete_details.reason is reason.
func Incomplete(reason string, outputs ...Output) Turn {
	return Turn{items: outputs, cut: -1, final: "incomplete", reason: reason}
}

// Stall is a turn that sends response.created and then nothing, until the
// client gives up or the server closes.
func Stall() Turn { return Text("").StallAfter(1) }

// Refuse is a turn whose request is read and then the connection is closed
// without any response (no status line, no frame).
func Refuse() Turn { return Turn{refuse: true, cut: -1} }

// Events is a turn replaying raw JSON event payloads verbatim (for example a
// recorded fixture); each payload's "type" names its SSE event.
func Events(payloads ...[]byte) Turn {
	t := Turn{cut: -1, raw: true}
	for _, p := range payloads {
		t.frames = append(t.frames, frame{typ: eventType(p), data: bytes.Clone(p)})
	}
	return t
}

// RawSSE is a turn whose HTTP body is exactly body (for example a recorded
// .sse fixture). Over WebSocket each dispatched SSE event's data becomes one
// frame. Cutting modifiers do not apply to the HTTP body.
func RawSSE(body []byte) (Turn, error) {
	t := Turn{cut: -1, raw: true, rawSSE: bytes.Clone(body)}
	r := provider.NewSSEReader(bytes.NewReader(body), 0)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return t, nil
		}
		if err != nil {
			return Turn{}, fmt.Errorf("parse sse: %w", err)
		}
		t.frames = append(t.frames, frame{typ: string(ev.Event), data: bytes.Clone(ev.Data)})
	}
}

// FromJSONL is a turn replaying one JSON event per non-empty line (the
// recorded-fixture .jsonl format).
func FromJSONL(data []byte) (Turn, error) {
	var payloads [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) {
			return Turn{}, fmt.Errorf("jsonl line %d is not valid JSON", n)
		}
		payloads = append(payloads, bytes.Clone(line))
	}
	if err := sc.Err(); err != nil {
		return Turn{}, fmt.Errorf("read jsonl: %w", err)
	}
	return Events(payloads...), nil
}

func eventType(p []byte) string {
	var v struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(p, &v) == nil {
		return v.Type
	}
	return ""
}

// WithUsage sets the usage reported by response.completed/incomplete.
func (t Turn) WithUsage(u provider.Usage) Turn { t.usage = &u; t.noUsage = false; return t }

// WithoutUsage makes the terminal response carry "usage": null.
func (t Turn) WithoutUsage() Turn { t.usage = nil; t.noUsage = true; return t }

// WithResponseID sets the response id (default "resp_<n>").
func (t Turn) WithResponseID(id string) Turn { t.id = id; return t }

// WithHeader adds a response header (HTTP) or, for status turns over
// WebSocket, an entry of the error frame's headers object.
func (t Turn) WithHeader(key, value string) Turn {
	h := t.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add(key, value)
	t.header = h
	return t
}

// WithRetryAfter adds a Retry-After header (seconds or an HTTP-date).
func (t Turn) WithRetryAfter(v string) Turn { return t.WithHeader("Retry-After", v) }

// ForRequestContaining makes the turn serve only a request whose raw body
// contains s; requests without it take the next turn that fits.
func (t Turn) ForRequestContaining(s string) Turn { t.match = s; return t }

// Pace waits d before each frame (virtual time under testing/synctest with
// the in-process RoundTripper), for slow but healthy bodies.
func (t Turn) Pace(d time.Duration) Turn { t.pace = d; return t }

// HoldUntil makes the turn's first frame wait until ready is closed, so a
// test can order the turn after something it did (a policy change) rather
// than after a guessed delay.
func (t Turn) HoldUntil(ready <-chan struct{}) Turn { t.hold = ready; return t }

// DropAfter aborts the connection after n frames (no clean end).
func (t Turn) DropAfter(n int) Turn { t.cut, t.end = n, endDrop; return t }

// EOFAfter ends the body cleanly after n frames, before any completion.
func (t Turn) EOFAfter(n int) Turn { t.cut, t.end = n, endEOF; return t }

// StallAfter sends n frames and then nothing until the client gives up.
// Over WebSocket the stalled response never ends but the connection is
// still served: a later response.create on it is the next request.
func (t Turn) StallAfter(n int) Turn { t.cut, t.end = n, endStall; return t }

// MalformedAt replaces frame n (0-based) with truncated JSON, whichever
// route plays the turn.
func (t Turn) MalformedAt(n int) Turn {
	return t.replaceAt(n, []byte(`{"type":"response.output_text.delta","delta":"trunc`))
}

// InvalidUTF8At replaces frame n (0-based) with a frame whose delta holds
// bytes that are not UTF-8.
func (t Turn) InvalidUTF8At(n int) Turn {
	return t.replaceAt(n, []byte("{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_bad\",\"output_index\":0,\"delta\":\"\xff\xfe\xfd\"}"))
}

func (t Turn) replaceAt(n int, data []byte) Turn {
	t.patches = append(append([]patch(nil), t.patches...), patch{n: n, data: data})
	return t
}

// ChatReasoningField makes a Chat Completions turn stream reasoning in
// the delta field name: "reasoning_content" (llama.cpp, vLLM, LM Studio,
// DeepSeek; the default) or "reasoning" (Ollama, OpenRouter).
func (t Turn) ChatReasoningField(name string) Turn { t.chatReasoning = name; return t }

// rendered returns the turn's frames as the Responses route plays them;
// the default response id is "resp_scripted".
func (t Turn) rendered() []frame { return t.framesFor(wireResponses) }

// framesFor returns the turn's frames as route w plays them, patched.
func (t Turn) framesFor(w wire) []frame {
	var fr []frame
	switch {
	case t.raw:
		fr = t.frames
	case w == wireChat:
		fr = renderChat(&t)
	case w == wireAnthropic:
		fr = renderAnthropic(&t)
	default:
		fr = render(&t)
	}
	if len(t.patches) == 0 {
		return fr
	}
	fr = append([]frame(nil), fr...)
	for _, p := range t.patches {
		n := p.n
		if n < 0 || n >= len(fr) {
			n = len(fr)
			fr = append(fr, frame{})
		}
		typ := "response.output_text.delta"
		switch w {
		case wireChat:
			typ = ""
		case wireAnthropic:
			typ = "content_block_delta"
		}
		fr[n] = frame{typ: typ, data: p.data}
	}
	return fr
}

// FrameCount is the number of frames the turn writes when not cut.
func (t Turn) FrameCount() int { return len(t.rendered()) }

// SSE renders the turn's frames as an SSE body (for fixtures and fuzz seeds).
func (t Turn) SSE() []byte {
	var b bytes.Buffer
	for _, f := range t.rendered() {
		writeSSE(&b, f)
	}
	return b.Bytes()
}

func writeSSE(b *bytes.Buffer, f frame) {
	if f.typ != "" {
		b.WriteString("event: ")
		b.WriteString(f.typ)
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	b.Write(f.data)
	b.WriteString("\n\n")
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// words splits text into word deltas keeping separators: "a b" → "a", " b".
func words(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] == ' ' && s[i-1] != ' ' {
			out = append(out, s[start:i])
			start = i
		}
	}
	return append(out, s[start:])
}

// pieces splits tool arguments into deltas of at most 8 bytes, on rune
// boundaries.
func pieces(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(8, len(s))
		for n < len(s) && !isRuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// renderer builds the frames of a scripted turn.
type renderer struct {
	seq    int
	frames []frame
}

func (r *renderer) add(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = r.seq
	r.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		panic(fmt.Sprintf("providertest: render %s: %v", typ, err)) // only our own maps are marshalled
	}
	r.frames = append(r.frames, frame{typ: typ, data: b})
}

func render(t *Turn) []frame {
	r := &renderer{}
	id := t.id
	if id == "" {
		id = "resp_scripted"
	}
	resp := func(status string, output []any) map[string]any {
		m := map[string]any{"id": id, "object": "response", "status": status, "model": "scripted",
			"output": output, "usage": nil, "error": nil, "incomplete_details": nil}
		return m
	}
	r.add("response.created", map[string]any{"response": resp("in_progress", []any{})})
	r.add("response.in_progress", map[string]any{"response": resp("in_progress", []any{})})
	var done []any
	var textDeltas, reasonDeltas int
	for i, o := range t.items {
		item, nd, nr := renderItem(r, i, o)
		textDeltas += nd
		reasonDeltas += nr
		done = append(done, item)
	}
	if done == nil {
		done = []any{}
	}
	usage := any(nil)
	if !t.noUsage {
		u := provider.Usage{InputTokens: 100, OutputTokens: int64(max(1, textDeltas+reasonDeltas)), ReasoningTokens: int64(reasonDeltas)}
		if t.usage != nil {
			u = *t.usage
		}
		usage = map[string]any{
			"input_tokens":          u.InputTokens,
			"input_tokens_details":  map[string]any{"cached_tokens": u.CachedTokens},
			"output_tokens":         u.OutputTokens,
			"output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
			"total_tokens":          u.InputTokens + u.OutputTokens,
		}
	}
	switch t.final {
	case "failed":
		r.add("error", map[string]any{"error": map[string]any{"type": t.code, "code": nullable(t.code), "message": t.message, "param": nil}})
		m := resp("failed", done)
		m["error"] = map[string]any{"code": t.code, "message": t.message}
		r.add("response.failed", map[string]any{"response": m})
	case "incomplete":
		m := resp("incomplete", done)
		m["incomplete_details"] = map[string]any{"reason": t.reason}
		m["usage"] = usage
		r.add("response.incomplete", map[string]any{"response": m})
	default:
		m := resp("completed", done)
		m["usage"] = usage
		r.add("response.completed", map[string]any{"response": m})
	}
	return r.frames
}

// renderItem emits one output item's events and returns its final form and
// its text and reasoning delta counts.
func renderItem(r *renderer, idx int, o Output) (map[string]any, int, int) {
	itemID := func(prefix string) string { return prefix + "_" + strconv.Itoa(idx) }
	switch o.kind {
	case provider.ItemReasoning:
		id := itemID("rs")
		summ := []any{}
		r.add("response.output_item.added", map[string]any{"output_index": idx,
			"item": map[string]any{"id": id, "type": "reasoning", "summary": []any{}, "encrypted_content": o.encrypted}})
		n := 0
		for si, s := range o.summary {
			part := map[string]any{"type": "summary_text", "text": ""}
			r.add("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": idx, "summary_index": si, "part": part})
			for _, w := range words(s) {
				r.add("response.reasoning_summary_text.delta", map[string]any{"item_id": id, "output_index": idx, "summary_index": si, "delta": w})
				n++
			}
			r.add("response.reasoning_summary_text.done", map[string]any{"item_id": id, "output_index": idx, "summary_index": si, "text": s})
			r.add("response.reasoning_summary_part.done", map[string]any{"item_id": id, "output_index": idx, "summary_index": si,
				"part": map[string]any{"type": "summary_text", "text": s}})
			summ = append(summ, map[string]any{"type": "summary_text", "text": s})
		}
		item := map[string]any{"id": id, "type": "reasoning", "summary": summ, "encrypted_content": o.encrypted}
		r.add("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		return item, 0, n
	case provider.ItemFunctionCall, provider.ItemCustomToolCall:
		id := itemID("fc")
		field, delta := "arguments", "response.function_call_arguments.delta"
		if o.kind == provider.ItemCustomToolCall {
			id = itemID("ctc")
			field, delta = "input", "response.custom_tool_call_input.delta"
		}
		r.add("response.output_item.added", map[string]any{"output_index": idx,
			"item": map[string]any{"id": id, "type": string(o.kind), "status": "in_progress", "call_id": o.callID, "name": o.name, field: ""}})
		n := 0
		for _, p := range pieces(o.args) {
			r.add(delta, map[string]any{"item_id": id, "output_index": idx, "delta": p})
			n++
		}
		if o.kind == provider.ItemFunctionCall {
			r.add("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": idx, "arguments": o.args})
		}
		item := map[string]any{"id": id, "type": string(o.kind), "status": "completed", "call_id": o.callID, "name": o.name, field: o.args}
		if o.async {
			item["async"] = true
		}
		r.add("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		return item, n, 0
	default:
		id := itemID("msg")
		r.add("response.output_item.added", map[string]any{"output_index": idx,
			"item": map[string]any{"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
		r.add("response.content_part.added", map[string]any{"item_id": id, "output_index": idx, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		n := 0
		for _, w := range words(o.text) {
			r.add("response.output_text.delta", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "delta": w, "logprobs": []any{}})
			n++
		}
		r.add("response.output_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "text": o.text})
		part := map[string]any{"type": "output_text", "text": o.text, "annotations": []any{}}
		r.add("response.content_part.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "part": part})
		item := map[string]any{"id": id, "type": "message", "status": "completed", "role": "assistant", "content": []any{part}}
		r.add("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		return item, n, 0
	}
}

// String describes the turn for test failure messages.
func (t Turn) String() string {
	var b strings.Builder
	switch {
	case t.refuse:
		b.WriteString("refuse")
	case t.status != 0:
		fmt.Fprintf(&b, "status %d", t.status)
	default:
		fmt.Fprintf(&b, "%d frames", t.FrameCount())
	}
	if t.cut >= 0 {
		fmt.Fprintf(&b, ", ending %d after %d", t.end, t.cut)
	}
	return b.String()
}
