package provider

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// The OpenAI Chat Completions route (WireChat): POST …/chat/completions
// with stream:true and stream_options.include_usage, as OpenAI, vLLM,
// llama.cpp, LM Studio, Ollama and most gateways serve it.
//
// What it maps: the system prompt is the first message (role system);
// user messages with images carry image_url parts (data URLs), and the
// images of function call outputs (view_image's) follow the tool messages
// in a user message of image_url parts, since a tool message carries only
// text; the
// assistant items of one response (text, function calls) are one
// assistant message with tool_calls; function_call_output items are
// role tool messages; tools are {type:function, function:{…}};
// tool_choice, parallel_tool_calls (only when set), the output bound
// (only when the request has one: max_completion_tokens for a reasoning
// model, which OpenAI refuses max_tokens for, max_tokens otherwise, which
// every server knows) and reasoning_effort (only for a reasoning model).
// What it drops: reasoning items (the route has no opaque reasoning state
// to send back; reasoning_content is shown, not replayed), refusal text
// of replayed messages (sent as content), prompt_cache_key, and the phase
// of assistant messages.

type chatCodec struct{}

func (chatCodec) path() string             { return "/chat/completions" }
func (chatCodec) header(http.Header)       {}
func (chatCodec) keyHeader() string        { return KeyAuthorization }
func (chatCodec) newDecoder() frameDecoder { return &chatDecoder{} }

type chatToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function chatFunctionCall `json:"function"`
}

type chatFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatPart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
}

type chatImageURL struct {
	URL string `json:"url"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, an array of parts, or null (an assistant
	// message of tool calls only).
	Content    any            `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatTool struct {
	Type     string          `json:"type"`
	Function chatFunctionDef `json:"function"`
}

type chatFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict,omitempty"`
}

type chatRequest struct {
	Model             string        `json:"model"`
	Messages          []chatMessage `json:"messages"`
	Tools             []chatTool    `json:"tools,omitempty"`
	ToolChoice        string        `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool         `json:"parallel_tool_calls,omitempty"`
	MaxTokens         int           `json:"max_tokens,omitempty"`
	// MaxCompletionTokens bounds a reasoning model's output: OpenAI
	// refuses max_tokens for its reasoning models ("unsupported_parameter").
	MaxCompletionTokens int    `json:"max_completion_tokens,omitempty"`
	ReasoningEffort     string `json:"reasoning_effort,omitempty"`
	Stream              bool   `json:"stream"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// encode builds the Chat Completions body.
func (chatCodec) encode(r *Request) ([]byte, error) {
	tools, choice, err := checkRequest(r)
	if err != nil {
		return nil, err
	}
	w := chatRequest{Model: r.Model, Stream: true, ToolChoice: choice}
	if r.Reasoning != nil {
		w.MaxCompletionTokens = r.MaxOutputTokens
	} else {
		w.MaxTokens = r.MaxOutputTokens
	}
	w.StreamOptions.IncludeUsage = true
	if r.Instructions != "" {
		w.Messages = append(w.Messages, chatMessage{Role: "system", Content: r.Instructions})
	}
	var toolImages []chatPart // images of the tool messages just added
	for i := range r.Input {
		it := &r.Input[i]
		if it.Type != ItemFunctionCallOutput && len(toolImages) > 0 {
			w.Messages = append(w.Messages, chatMessage{Role: "user", Content: toolImages})
			toolImages = nil
		}
		if w.Messages, err = appendChatItem(w.Messages, it); err != nil {
			return nil, fmt.Errorf("encode request: input %d: %w", i, err)
		}
		if it.Type == ItemFunctionCallOutput && len(it.Images) > 0 {
			toolImages = append(toolImages, chatPart{Type: "text", Text: "The images of tool call " + it.CallID + ":"})
			toolImages = appendChatImages(toolImages, it.Images)
		}
	}
	if len(toolImages) > 0 {
		w.Messages = append(w.Messages, chatMessage{Role: "user", Content: toolImages})
	}
	for _, t := range tools {
		w.Tools = append(w.Tools, chatTool{Type: "function", Function: chatFunctionDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
	}
	if len(w.Tools) > 0 && r.ParallelToolCalls {
		t := true
		w.ParallelToolCalls = &t
	}
	if len(w.Tools) == 0 {
		w.ToolChoice = "" // "none" without tools is refused by some servers
	}
	if r.Reasoning != nil && r.Reasoning.Effort != "" && r.Reasoning.Effort != "none" {
		w.ReasoningEffort = r.Reasoning.Effort
	}
	return json.Marshal(&w)
}

// appendChatImages appends an image_url part (a data URL) per image.
func appendChatImages(parts []chatPart, imgs []Image) []chatPart {
	for _, im := range imgs {
		parts = append(parts, chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: im.dataURL()}})
	}
	return parts
}

// appendChatItem appends the message(s) one input item becomes. A
// function call output's images are not among them: a tool message
// carries only text, so encode sends them in a user message after the
// tool messages of the response. The
// items of one assistant response join one assistant message.
func appendChatItem(msgs []chatMessage, it *Item) ([]chatMessage, error) {
	last := func() *chatMessage {
		if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
			return &msgs[n-1]
		}
		return nil
	}
	switch it.Type {
	case ItemMessage:
		if err := checkImageRole(it); err != nil {
			return nil, err
		}
		switch it.Role {
		case "user", "developer":
			role := "user"
			if it.Role == "developer" {
				role = "system"
			}
			if len(it.Images) == 0 {
				return append(msgs, chatMessage{Role: role, Content: it.Text}), nil
			}
			parts := appendChatImages([]chatPart{{Type: "text", Text: it.Text}}, it.Images)
			return append(msgs, chatMessage{Role: role, Content: parts}), nil
		case "assistant":
			text := replayedText(it)
			if m := last(); m != nil && len(m.ToolCalls) == 0 {
				s, _ := m.Content.(string)
				m.Content = s + text
				return msgs, nil
			}
			return append(msgs, chatMessage{Role: "assistant", Content: text}), nil
		}
		return nil, fmt.Errorf("message role %q is not user, assistant or developer", it.Role)
	case ItemReasoning:
		return msgs, nil // no reasoning state to send back on this route
	case ItemFunctionCall:
		if it.CallID == "" || it.Name == "" {
			return nil, errors.New("function_call needs call_id and name")
		}
		tc := chatToolCall{ID: it.CallID, Type: "function", Function: chatFunctionCall{Name: it.Name, Arguments: it.Arguments}}
		if m := last(); m != nil {
			m.ToolCalls = append(m.ToolCalls, tc)
			if s, _ := m.Content.(string); s == "" {
				m.Content = nil
			}
			return msgs, nil
		}
		return append(msgs, chatMessage{Role: "assistant", ToolCalls: []chatToolCall{tc}}), nil
	case ItemFunctionCallOutput:
		if it.CallID == "" {
			return nil, errors.New("function_call_output needs call_id")
		}
		return append(msgs, chatMessage{Role: "tool", ToolCallID: it.CallID, Content: it.Output}), nil
	}
	return nil, fmt.Errorf("%w on the chat route: %q", errUnknownItem, it.Type)
}

// The chat stream's wire shapes.
type chatChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string `json:"content"`
			Refusal          *string `json:"refusal"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string  `json:"name"`
					Arguments *string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		// PromptCacheHitTokens is DeepSeek's count of cached prompt
		// tokens, for a server that has no prompt_tokens_details.
		PromptCacheHitTokens    int64 `json:"prompt_cache_hit_tokens"`
		CompletionTokensDetails *struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Error *wireError `json:"error"`
}

// chatCall is one tool call being assembled from its deltas.
type chatCall struct {
	index  int
	callID string
	name   string
	args   strings.Builder
}

// chatDecoder assembles a Chat Completions stream. The stream ends with
// "data: [DONE]"; a server that ends the body cleanly after finish_reason
// without it is accepted too (usage is then whatever it sent).
type chatDecoder struct {
	started   bool
	id, model string
	text      strings.Builder
	refusal   strings.Builder
	reasoning strings.Builder
	calls     []*chatCall
	finish    string
	finished  bool
	usage     *Usage
}

func (d *chatDecoder) frame(ev *SSEEvent, out []Event) ([]Event, bool, *Error) {
	data := ev.Data
	if !utf8.Valid(data) {
		return out, false, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeInvalidUTF8, Dispatched: true,
			Err: fmt.Errorf("frame of %d bytes is not valid UTF-8", len(data))}
	}
	if string(data) == "[DONE]" {
		if !d.finished {
			return out, false, &Error{Phase: Body, Class: TerminalEOF, Dispatched: true, Message: "[DONE] before a finish_reason"}
		}
		return d.complete(out)
	}
	var c chatChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return out, false, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeJSON, Dispatched: true, Err: fmt.Errorf("decode chunk: %w", err)}
	}
	if c.Error == nil && string(ev.Event) == "error" {
		// The frame is the error object itself (llama.cpp's "error:" field).
		c.Error = new(wireError)
		if err := json.Unmarshal(data, c.Error); err != nil {
			return out, false, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeJSON, Dispatched: true, Err: fmt.Errorf("decode error event: %w", err)}
		}
	}
	if c.Error != nil {
		return out, false, &Error{Phase: Body, Class: ResponsesFailed, Dispatched: true,
			Type: string(c.Error.Type), Code: string(c.Error.Code), Message: string(c.Error.Message), Response: d.response("failed")}
	}
	if !d.started && c.ID == "" && len(c.Choices) == 0 && c.Usage == nil {
		return out, false, nil // Azure's prompt_filter_results chunk: no id, nothing of the response
	}
	if !d.started {
		d.started = true
		d.id, d.model = c.ID, c.Model
		out = append(out, Event{Type: EventCreated, Response: &Response{ID: c.ID, Model: c.Model}})
	}
	if c.Usage != nil {
		u := &Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
		if c.Usage.PromptTokensDetails != nil {
			u.CachedTokens = c.Usage.PromptTokensDetails.CachedTokens
		} else if h := c.Usage.PromptCacheHitTokens; h > 0 && h <= u.InputTokens {
			u.CachedTokens = h
		}
		if c.Usage.CompletionTokensDetails != nil {
			u.ReasoningTokens = c.Usage.CompletionTokensDetails.ReasoningTokens
		}
		d.usage = u
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // octet asks for one choice
		}
		dl := &ch.Delta
		if r := dl.ReasoningContent; r != nil && *r != "" {
			d.reasoning.WriteString(*r)
			out = append(out, Event{Type: EventReasoningDelta, OutputIndex: 0, Delta: *r})
		} else if r := dl.Reasoning; r != nil && *r != "" {
			d.reasoning.WriteString(*r)
			out = append(out, Event{Type: EventReasoningDelta, OutputIndex: 0, Delta: *r})
		}
		if t := dl.Content; t != nil && *t != "" {
			d.text.WriteString(*t)
			out = append(out, Event{Type: EventTextDelta, OutputIndex: 1, Delta: *t})
		}
		if t := dl.Refusal; t != nil && *t != "" {
			d.refusal.WriteString(*t)
			out = append(out, Event{Type: EventTextDelta, OutputIndex: 1, Delta: *t})
		}
		for j := range dl.ToolCalls {
			tc := &dl.ToolCalls[j]
			idx := j
			if tc.Index != nil {
				idx = *tc.Index
			}
			call := d.call(idx, tc.ID)
			if call.name == "" && tc.Function.Name != "" {
				call.name = tc.Function.Name
				if call.callID == "" {
					call.callID = newCallID()
				}
				out = append(out, Event{Type: EventToolCallStarted, OutputIndex: 2 + idx, CallID: call.callID, Name: call.name})
			}
			if a := tc.Function.Arguments; a != nil && *a != "" {
				call.args.WriteString(*a)
				out = append(out, Event{Type: EventToolCallDelta, OutputIndex: 2 + idx, CallID: call.callID, Name: call.name, Delta: *a})
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" && !d.finished {
			d.finish, d.finished = *ch.FinishReason, true
			for _, it := range d.items() {
				item := it
				out = append(out, Event{Type: EventItemDone, CallID: it.CallID, Name: it.Name, Item: &item})
			}
		}
	}
	return out, false, nil
}

// call returns the call at index idx, a new one when there is none or
// when a different id arrives at the same index (servers that send every
// call whole at index 0).
func (d *chatDecoder) call(idx int, id string) *chatCall {
	for i := len(d.calls) - 1; i >= 0; i-- {
		c := d.calls[i]
		if c.index != idx {
			continue
		}
		if id == "" || c.callID == "" || c.callID == id {
			if c.callID == "" {
				c.callID = id
			}
			return c
		}
		break
	}
	c := &chatCall{index: idx, callID: id}
	d.calls = append(d.calls, c)
	return c
}

// end accepts a clean end of the body after finish_reason.
func (d *chatDecoder) end(out []Event) ([]Event, *Error) {
	if !d.finished {
		return out, &Error{Phase: Body, Class: TerminalEOF, Dispatched: true, Message: "stream ended before a finish_reason"}
	}
	out, _, err := d.complete(out)
	return out, err
}

// complete ends the stream by its finish_reason: "length" is the output
// limit (an incomplete response with reason max_output_tokens, as the
// Responses route reports it), "content_filter" an incomplete response
// with that reason, a reason that says the server cut the generation
// short a failed response (code: the reason), anything else a completed
// response.
func (d *chatDecoder) complete(out []Event) ([]Event, bool, *Error) {
	if interruptedFinish[d.finish] {
		return out, false, &Error{Phase: Body, Class: ResponsesFailed, Dispatched: true, Code: d.finish,
			Message: "the server ended the response with finish_reason " + d.finish, Response: d.response("failed")}
	}
	switch d.finish {
	case "length":
		r := d.response("incomplete")
		r.IncompleteReason = "max_output_tokens"
		return out, false, &Error{Phase: Body, Class: ResponsesIncomplete, Dispatched: true, IncompleteReason: r.IncompleteReason, Response: r}
	case "content_filter":
		r := d.response("incomplete")
		r.IncompleteReason = "content_filter"
		return out, false, &Error{Phase: Body, Class: ResponsesIncomplete, Dispatched: true, IncompleteReason: r.IncompleteReason, Response: r}
	}
	return append(out, Event{Type: EventCompleted, Response: d.response("completed")}), true, nil
}

// interruptedFinish are finish reasons with which a server ends a
// generation it could not finish: "abort" and "error" (vLLM's engine,
// OpenRouter) and DeepSeek's "insufficient_system_resource". The output
// is partial, not an answer.
var interruptedFinish = map[string]bool{"error": true, "abort": true, "insufficient_system_resource": true}

func (d *chatDecoder) response(status string) *Response {
	return &Response{ID: d.id, Model: d.model, Status: status, Output: d.items(), Usage: d.usage}
}

// items are the assembled output: the reasoning (shown only: it has no
// opaque state), the message, then the tool calls in index order.
func (d *chatDecoder) items() []Item {
	var out []Item
	if d.reasoning.Len() > 0 {
		out = append(out, Item{Type: ItemReasoning, Summary: []string{d.reasoning.String()}})
	}
	if d.text.Len() > 0 || d.refusal.Len() > 0 {
		out = append(out, Item{Type: ItemMessage, Role: "assistant", Text: d.text.String(), Refusal: d.refusal.String(), Status: "completed"})
	}
	for _, c := range d.calls {
		if c.name == "" {
			continue // deltas without a name never made a call
		}
		args := c.args.String()
		if strings.TrimSpace(args) == "" {
			args = "{}" // a call of a tool without parameters
		}
		out = append(out, Item{Type: ItemFunctionCall, CallID: c.callID, Name: c.name, Arguments: args, Status: "completed"})
	}
	return out
}

// newCallID names a tool call whose server gave it no id. The id pairs
// the call with its result in later requests, so it must be unique in the
// conversation, not only in the response.
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
