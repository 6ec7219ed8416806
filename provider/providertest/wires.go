package providertest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/octet-agent/octet/provider"
)

// wire is the API a request came to, told by its path: the same turn
// plays as each route's real service streams it.
type wire int

const (
	wireResponses wire = iota
	wireChat
	wireAnthropic
)

// wireOf returns the route of a request path: …/responses,
// …/chat/completions or …/messages.
func wireOf(path string) (wire, bool) {
	switch {
	case strings.HasSuffix(path, "/responses"), strings.HasSuffix(path, "/responses/compact"):
		return wireResponses, true
	case strings.HasSuffix(path, "/chat/completions"):
		return wireChat, true
	case strings.HasSuffix(path, "/messages"):
		return wireAnthropic, true
	}
	return 0, false
}

// requestIDHeader is the header the route's service names the request in.
func (w wire) requestIDHeader() string {
	if w == wireAnthropic {
		return "Request-Id"
	}
	return "X-Request-Id"
}

// errorBody is the body of a status turn as the route's service writes
// it: OpenAI's {"error":{message,type,param,code}}, or Anthropic's
// {"type":"error","error":{type,message},"request_id"}. A raw body
// ([StatusBody]) is written as given.
func (w wire) errorBody(t *Turn, n int) []byte {
	if w != wireAnthropic || t.contentType != "" {
		return t.errBody
	}
	var body struct {
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(t.errBody, &body) != nil || body.Error == nil {
		return t.errBody
	}
	b, _ := json.Marshal(map[string]any{"type": "error",
		"error": map[string]any{"type": body.Error.Type, "message": body.Error.Message}, "request_id": "req_" + strconv.Itoa(n)})
	return b
}

// usageOf is the usage a turn reports: its own, or 100 input tokens and
// one output token per delta.
func usageOf(t *Turn, deltas, reasoning int) provider.Usage {
	if t.usage != nil {
		return *t.usage
	}
	return provider.Usage{InputTokens: 100, OutputTokens: int64(max(1, deltas)), ReasoningTokens: int64(reasoning)}
}

// renderChat plays a scripted turn as the Chat Completions API streams
// it (as recorded from OpenAI: see testdata/responses/openai-python__*):
// one chunk per delta with id, object, created, model,
// system_fingerprint and one choice; a first chunk with the role; tool
// calls whose first fragment carries id, type and name and later ones
// only index and arguments; a finish chunk with an empty delta; a usage
// chunk with no choices; "[DONE]". Reasoning streams in
// reasoning_content (or the field [Turn.ChatReasoningField] names), as
// local servers send it. A failed turn ends with an error chunk and no
// [DONE].
func renderChat(t *Turn) []frame {
	var frames []frame
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1727346182,
			"model": "scripted", "system_fingerprint": "fp_scripted",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		})
		frames = append(frames, frame{data: b})
	}
	field := t.chatReasoning
	if field == "" {
		field = "reasoning_content"
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	deltas, reasoning, calls := 0, 0, 0
	for _, o := range t.items {
		switch o.kind {
		case provider.ItemReasoning:
			for _, w := range words(strings.Join(o.summary, "\n\n")) {
				chunk(map[string]any{field: w}, nil)
				deltas++
				reasoning++
			}
		case provider.ItemFunctionCall, provider.ItemCustomToolCall:
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": calls, "id": o.callID, "type": "function",
				"function": map[string]any{"name": o.name, "arguments": ""}}}}, nil)
			for _, p := range pieces(o.args) {
				chunk(map[string]any{"tool_calls": []any{map[string]any{"index": calls, "function": map[string]any{"arguments": p}}}}, nil)
				deltas++
			}
			calls++
		default:
			for _, w := range words(o.text) {
				chunk(map[string]any{"content": w}, nil)
				deltas++
			}
		}
	}
	if t.final == "failed" {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": t.message, "type": t.code, "param": nil, "code": nullable(t.code)}})
		return append(frames, frame{data: b})
	}
	finish := "stop"
	switch {
	case t.final == "incomplete" && t.reason == "max_output_tokens":
		finish = "length"
	case t.final == "incomplete":
		finish = t.reason
	case calls > 0:
		finish = "tool_calls"
	}
	chunk(map[string]any{}, finish)
	if !t.noUsage {
		u := usageOf(t, deltas, reasoning)
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1727346182,
			"model": "scripted", "system_fingerprint": "fp_scripted", "choices": []any{},
			"usage": map[string]any{
				"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens, "total_tokens": u.InputTokens + u.OutputTokens,
				"prompt_tokens_details":     map[string]any{"cached_tokens": u.CachedTokens, "audio_tokens": 0},
				"completion_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
			},
		})
		frames = append(frames, frame{data: b})
	}
	return append(frames, frame{data: []byte("[DONE]")})
}

// renderAnthropic plays a scripted turn as the Messages API streams it
// (as recorded from Anthropic: see testdata/responses/vercel-ai__anthropic-*):
// message_start with usage (cache reads apart from input_tokens), a ping,
// per output item a content block (thinking with thinking_delta and a
// signature_delta carrying the reasoning's encrypted content; text with
// text_delta; tool_use with an empty input and input_json_delta
// fragments), message_delta with the stop reason and output tokens,
// message_stop. A failed turn ends with an error event.
func renderAnthropic(t *Turn) []frame {
	var frames []frame
	add := func(typ string, fields map[string]any) {
		fields["type"] = typ
		b, err := json.Marshal(fields)
		if err != nil {
			panic(fmt.Sprintf("providertest: render %s: %v", typ, err)) // only our own maps are marshalled
		}
		frames = append(frames, frame{typ: typ, data: b})
	}
	deltas, calls := 0, 0
	u := usageOf(t, 0, 0)
	start := map[string]any{"input_tokens": u.InputTokens - u.CachedTokens, "cache_creation_input_tokens": 0,
		"cache_read_input_tokens": u.CachedTokens, "output_tokens": 1}
	add("message_start", map[string]any{"message": map[string]any{"id": "msg_scripted", "type": "message", "role": "assistant",
		"model": "scripted", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start}})
	add("ping", map[string]any{})
	for i, o := range t.items {
		switch o.kind {
		case provider.ItemReasoning:
			add("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, w := range words(strings.Join(o.summary, "\n\n")) {
				add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": w}})
				deltas++
			}
			add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "signature_delta", "signature": o.encrypted}})
		case provider.ItemFunctionCall, provider.ItemCustomToolCall:
			add("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": o.callID, "name": o.name, "input": map[string]any{}}})
			add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
			for _, p := range pieces(o.args) {
				add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
				deltas++
			}
			calls++
		default:
			add("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, w := range words(o.text) {
				add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": w}})
				deltas++
			}
		}
		add("content_block_stop", map[string]any{"index": i})
	}
	if t.final == "failed" {
		add("error", map[string]any{"error": map[string]any{"type": t.code, "message": t.message}})
		return frames
	}
	stop := "end_turn"
	switch {
	case t.final == "incomplete" && t.reason == "max_output_tokens":
		stop = "max_tokens"
	case t.final == "incomplete" && t.reason == "content_filter":
		stop = "refusal"
	case t.final == "incomplete":
		stop = t.reason
	case calls > 0:
		stop = "tool_use"
	}
	usage := map[string]any{"output_tokens": max(1, deltas)}
	if t.usage != nil {
		usage["output_tokens"] = t.usage.OutputTokens
	}
	if t.noUsage {
		usage = map[string]any{"output_tokens": 0}
	}
	add("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": usage})
	add("message_stop", map[string]any{})
	return frames
}
