package provider

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/octet-agent/octet/internal/images"
)

// The Anthropic Messages route (WireAnthropic): POST …/messages with
// stream:true, the key in x-api-key and anthropic-version 2023-06-01.
//
// What it maps: the system prompt is the top-level system block; the
// items of one assistant response are one assistant message of thinking,
// redacted_thinking, text and tool_use blocks in output order; user
// messages and function results are one user message whose tool_result
// blocks come first; images are base64 image blocks, in user messages
// and inside tool_result content (view_image's), the newest within the
// API's bounds (an image left out is a note); tools carry
// input_schema (a request without tools whose conversation has tool_use
// blocks declares their names, with tool_choice none, as the API
// requires); tool_choice auto or none; reasoning effort is an extended
// thinking budget. Thinking blocks are sent back exactly as received, with
// their signatures (the API verifies them); their opaque state is kept in
// Item.EncryptedContent tagged with this wire format, so no other route
// is sent it and this route is sent no other's. Prompt caching: a
// cache_control breakpoint on the system block and on the last block of
// the conversation, so each request reads the prefix the one before it
// wrote. What it drops: the Responses phase of assistant messages,
// parallel_tool_calls (Anthropic's default is parallel), prompt_cache_key,
// citations, and server tools.

// AnthropicVersion is the anthropic-version header the route sends.
const AnthropicVersion = "2023-06-01"

// Opaque reasoning tags of the Anthropic route (Item.EncryptedContent).
const (
	anthropicThinking = "anthropic.thinking:"
	anthropicRedacted = "anthropic.redacted_thinking:"
)

// DefaultAnthropicMaxTokens is max_tokens when the request does not bound
// the output (the Messages API requires the field): a model whose limits
// octet does not know.
const DefaultAnthropicMaxTokens = 8192

// foreignReasoning reports whether a reasoning item's opaque state
// belongs to another wire format than w (and so cannot be sent on w).
func foreignReasoning(it *Item, w WireAPI) bool {
	anthropic := strings.HasPrefix(it.EncryptedContent, anthropicThinking) || strings.HasPrefix(it.EncryptedContent, anthropicRedacted)
	return anthropic != (w == WireAnthropic)
}

type anthropicCodec struct{}

func (anthropicCodec) path() string             { return "/messages" }
func (anthropicCodec) keyHeader() string        { return KeyXAPIKey }
func (anthropicCodec) newDecoder() frameDecoder { return &anthropicDecoder{} }
func (anthropicCodec) header(h http.Header)     { h.Set("Anthropic-Version", AnthropicVersion) }

type cacheControl struct {
	Type string `json:"type"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

type anthropicSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// anthropicBlock is one content block of a request message.
type anthropicBlock struct {
	Type      string           `json:"type"`
	Text      *string          `json:"text,omitempty"`
	Thinking  *string          `json:"thinking,omitempty"`
	Signature string           `json:"signature,omitempty"`
	Data      string           `json:"data,omitempty"`
	Source    *anthropicSource `json:"source,omitempty"`
	ID        string           `json:"id,omitempty"`
	Name      string           `json:"name,omitempty"`
	Input     json.RawMessage  `json:"input,omitempty"`
	ToolUseID string           `json:"tool_use_id,omitempty"`
	// Content is a tool_result's: a string, or text and image blocks.
	Content      any           `json:"content,omitempty"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type anthropicMessage struct {
	Role    string           `json:"role"`
	Content []anthropicBlock `json:"content"`
}

type anthropicTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

type anthropicThinkingConfig struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type anthropicRequest struct {
	Model     string                   `json:"model"`
	MaxTokens int                      `json:"max_tokens"`
	System    []anthropicBlock         `json:"system,omitempty"`
	Messages  []anthropicMessage       `json:"messages"`
	Tools     []anthropicTool          `json:"tools,omitempty"`
	Choice    map[string]string        `json:"tool_choice,omitempty"`
	Thinking  *anthropicThinkingConfig `json:"thinking,omitempty"`
	Stream    bool                     `json:"stream"`
}

// thinkingBudgets are the extended-thinking budgets of the reasoning
// efforts; the budget must be at least 1024 and below max_tokens (octet
// keeps it to half of max_tokens).
var thinkingBudgets = map[string]int{"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}

func (anthropicCodec) encode(r *Request) ([]byte, error) {
	tools, choice, err := checkRequest(r)
	if err != nil {
		return nil, err
	}
	w := anthropicRequest{Model: r.Model, MaxTokens: r.MaxOutputTokens, Stream: true, Messages: []anthropicMessage{}}
	if w.MaxTokens <= 0 {
		w.MaxTokens = DefaultAnthropicMaxTokens
	}
	if r.Instructions != "" {
		text := r.Instructions
		w.System = []anthropicBlock{{Type: "text", Text: &text, CacheControl: ephemeral}}
	}
	left := anthropicImageBudget(r)
	for i := range r.Input {
		if w.Messages, err = appendAnthropicItem(w.Messages, &r.Input[i], left); err != nil {
			return nil, fmt.Errorf("encode request: input %d: %w", i, err)
		}
	}
	if n := len(w.Messages); n > 0 {
		blocks := w.Messages[n-1].Content
		for i := len(blocks) - 1; i >= 0; i-- {
			if t := blocks[i].Type; t != "thinking" && t != "redacted_thinking" {
				blocks[i].CacheControl = ephemeral
				break
			}
		}
	}
	for _, t := range tools {
		w.Tools = append(w.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters})
	}
	if len(w.Tools) == 0 {
		w.Tools = historyTools(w.Messages)
		choice = "none"
	}
	if len(w.Tools) > 0 {
		w.Choice = map[string]string{"type": choice}
	}
	if r.Reasoning != nil {
		if b, ok := thinkingBudgets[r.Reasoning.Effort]; ok {
			// At most half the output bound: thinking counts against
			// max_tokens, and a budget just below it left the answer no
			// room (the response stopped at max_tokens, unanswered).
			b = min(b, w.MaxTokens/2)
			if b >= 1024 {
				w.Thinking = &anthropicThinkingConfig{Type: "enabled", BudgetTokens: b}
			}
		}
	}
	return json.Marshal(&w)
}

// historyTools declares the tools the conversation's tool_use blocks
// name, for a request that offers none (a compaction or a gate
// question): the Messages API refuses a request whose messages include
// tool_use or tool_result blocks without tools ("Requests which include
// tool_use or tool_result blocks must define tools"). The caller sends
// them with tool_choice none, so none can be called.
func historyTools(msgs []anthropicMessage) []anthropicTool {
	var out []anthropicTool
	seen := map[string]bool{}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type != "tool_use" || seen[b.Name] {
				continue
			}
			seen[b.Name] = true
			out = append(out, anthropicTool{Name: b.Name, Description: "Not available in this request.",
				InputSchema: json.RawMessage(`{"type":"object"}`)})
		}
	}
	return out
}

// appendAnthropicItem adds one input item's block to the conversation,
// opening a new message when the role changes (the Messages API
// alternates user and assistant). In a user message, tool_result blocks
// come before any other block, as the API requires.
func appendAnthropicItem(msgs []anthropicMessage, it *Item, left map[*Image]string) ([]anthropicMessage, error) {
	add := func(role string, b ...anthropicBlock) []anthropicMessage {
		if len(b) == 0 {
			return msgs
		}
		n := len(msgs)
		if n == 0 || msgs[n-1].Role != role {
			return append(msgs, anthropicMessage{Role: role, Content: b})
		}
		m := &msgs[n-1]
		if b[0].Type == "tool_result" {
			i := 0
			for i < len(m.Content) && m.Content[i].Type == "tool_result" {
				i++
			}
			m.Content = append(m.Content[:i:i], append(b, m.Content[i:]...)...)
			return msgs
		}
		m.Content = append(m.Content, b...)
		return msgs
	}
	text := func(s string) []anthropicBlock {
		if s == "" {
			return nil // the API refuses empty text blocks
		}
		return []anthropicBlock{{Type: "text", Text: &s}}
	}
	switch it.Type {
	case ItemMessage:
		if err := checkImageRole(it); err != nil {
			return nil, err
		}
		switch it.Role {
		case "user", "developer":
			blocks := appendAnthropicImages(text(it.Text), it.Images, left)
			if len(blocks) == 0 {
				blocks = text("(empty message)")
			}
			return add("user", blocks...), nil
		case "assistant":
			return add("assistant", text(replayedText(it))...), nil
		}
		return nil, fmt.Errorf("message role %q is not user, assistant or developer", it.Role)
	case ItemReasoning:
		switch {
		case strings.HasPrefix(it.EncryptedContent, anthropicThinking):
			t := strings.Join(it.Summary, "")
			return add("assistant", anthropicBlock{Type: "thinking", Thinking: &t, Signature: strings.TrimPrefix(it.EncryptedContent, anthropicThinking)}), nil
		case strings.HasPrefix(it.EncryptedContent, anthropicRedacted):
			return add("assistant", anthropicBlock{Type: "redacted_thinking", Data: strings.TrimPrefix(it.EncryptedContent, anthropicRedacted)}), nil
		}
		return msgs, nil // no state this route can send back
	case ItemFunctionCall:
		if it.CallID == "" || it.Name == "" {
			return nil, errors.New("function_call needs call_id and name")
		}
		return add("assistant", anthropicBlock{Type: "tool_use", ID: it.CallID, Name: it.Name, Input: toolInput(it.Arguments)}), nil
	case ItemFunctionCallOutput:
		if it.CallID == "" {
			return nil, errors.New("function_call_output needs call_id")
		}
		var content any = it.Output
		if len(it.Images) > 0 { // view_image's: text and image blocks
			content = appendAnthropicImages(text(it.Output), it.Images, left)
		}
		return add("user", anthropicBlock{Type: "tool_result", ToolUseID: it.CallID, Content: content}), nil
	}
	return nil, fmt.Errorf("%w on the anthropic route: %q", errUnknownItem, it.Type)
}

// Bounds of the Messages API on images: one image's base64 is at most
// 5 MiB (3.75 MiB of image, where octet takes up to 20 MiB), a request
// carries at most 100 images, and a whole request at most 32 MB, of
// which octet gives images 24 MiB of base64. An image is at most 8000
// pixels on a side, and at most 2000 in a request of more than 20
// images.
const (
	AnthropicMaxImageBase64    = 5 << 20
	AnthropicMaxImages         = 100
	AnthropicMaxImagesBase64   = 24 << 20
	AnthropicMaxImageSide      = 8000
	AnthropicManyImages        = 20
	AnthropicMaxManyImageSide  = 2000
	anthropicImageOverBound    = "the Messages API takes images of at most 3.75 MiB"
	anthropicImagesOverRequest = "the request already carries the newer images the Messages API takes (100, 24 MiB)"
	anthropicImageUnreadable   = "its size in pixels cannot be read from it"
)

// anthropicImageBudget decides which images of a request are sent: the
// newest first, each within AnthropicMaxImageBase64 and
// AnthropicMaxImageSide, until AnthropicMaxImages or
// AnthropicMaxImagesBase64 is reached; then, while more than
// AnthropicManyImages are sent, the oldest one over
// AnthropicMaxManyImageSide is left out. It returns why each image left
// out is (keyed by its address in r.Input).
func anthropicImageBudget(r *Request) map[*Image]string {
	var out map[*Image]string
	skip := func(im *Image, why string) {
		if out == nil {
			out = map[*Image]string{}
		}
		out[im] = why
	}
	var large []*Image // sent, over AnthropicMaxManyImageSide: newest first
	n, total := 0, 0
	for i := len(r.Input) - 1; i >= 0; i-- {
		imgs := r.Input[i].Images
		for j := len(imgs) - 1; j >= 0; j-- {
			im := &imgs[j]
			size := base64.StdEncoding.EncodedLen(len(im.Data))
			if size > AnthropicMaxImageBase64 {
				skip(im, anthropicImageOverBound)
				continue
			}
			w, h, err := images.Size(im.Data)
			switch {
			case err != nil:
				skip(im, anthropicImageUnreadable)
			case max(w, h) > AnthropicMaxImageSide:
				skip(im, fmt.Sprintf("the Messages API takes images of at most %d×%d pixels, and this one is %d×%d", AnthropicMaxImageSide, AnthropicMaxImageSide, w, h))
			case n == AnthropicMaxImages || total+size > AnthropicMaxImagesBase64:
				skip(im, anthropicImagesOverRequest)
			default:
				n, total = n+1, total+size
				if max(w, h) > AnthropicMaxManyImageSide {
					large = append(large, im)
				}
			}
		}
	}
	for ; n > AnthropicManyImages && len(large) > 0; n-- {
		oldest := large[len(large)-1]
		large = large[:len(large)-1]
		w, h, _ := images.Size(oldest.Data)
		skip(oldest, fmt.Sprintf("in a request of more than %d images the Messages API takes images of at most %d×%d pixels, and this one is %d×%d", AnthropicManyImages, AnthropicMaxManyImageSide, AnthropicMaxManyImageSide, w, h))
	}
	return out
}

// appendAnthropicImages appends a base64 image block per image, or for
// an image the budget leaves out a text block saying why: it is kept in
// the session and sent with every later request, and one refused image
// would fail them all.
func appendAnthropicImages(blocks []anthropicBlock, imgs []Image, left map[*Image]string) []anthropicBlock {
	for i := range imgs {
		im := &imgs[i]
		if why, ok := left[im]; ok {
			note := fmt.Sprintf("[a %s image of %d bytes is not shown: %s]", im.MimeType, len(im.Data), why)
			blocks = append(blocks, anthropicBlock{Type: "text", Text: &note})
			continue
		}
		blocks = append(blocks, anthropicBlock{Type: "image", Source: &anthropicSource{Type: "base64",
			MediaType: im.MimeType, Data: base64.StdEncoding.EncodeToString(im.Data)}})
	}
	return blocks
}

// toolInput is a tool call's arguments as the JSON object tool_use.input
// must be; arguments that are not one (the model's malformed call, which
// octet answered with an error) are sent as the string they were, so the
// conversation stays what it was.
func toolInput(args string) json.RawMessage {
	b := bytes.TrimSpace([]byte(args))
	if len(b) > 0 && b[0] == '{' && json.Valid(b) {
		return b
	}
	raw, _ := json.Marshal(map[string]string{"arguments": args})
	return raw
}

// The Messages stream's wire shapes.
type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string          `json:"id"`
		Model string          `json:"model"`
		Usage *anthropicUsage `json:"usage"`
	} `json:"message"`
	Index        *int `json:"index"`
	ContentBlock *struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Name      string `json:"name"`
		Text      string `json:"text"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
		Data      string `json:"data"`
		// Input is a tool_use block's arguments as the block starts:
		// {} from the Messages API, which streams them as deltas; the
		// arguments when a server sends no deltas.
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
	Error *wireError      `json:"error"`
}

// anthropicBlockState is one content block being assembled.
type anthropicBlockState struct {
	index     int
	typ       string
	id, name  string
	text      strings.Builder
	signature strings.Builder
	data      string
	input     json.RawMessage // a tool_use block's input at its start
	done      bool
}

// anthropicDecoder assembles a Messages stream: message_start,
// content_block_start/delta/stop per block, message_delta (stop reason,
// usage), message_stop; ping is skipped; an error event fails the stream.
type anthropicDecoder struct {
	started   bool
	id, model string
	blocks    []*anthropicBlockState
	done      []Item
	stop      string
	input     int64 // input_tokens (not cached)
	cacheW    int64
	cacheR    int64
	output    int64
	hasUsage  bool
}

func (d *anthropicDecoder) frame(ev *SSEEvent, out []Event) ([]Event, bool, *Error) {
	data := ev.Data
	if !utf8.Valid(data) {
		return out, false, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeInvalidUTF8, Dispatched: true,
			Err: fmt.Errorf("frame of %d bytes is not valid UTF-8", len(data))}
	}
	var e anthropicEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return out, false, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeJSON, Dispatched: true, Err: fmt.Errorf("decode event: %w", err)}
	}
	switch e.Type {
	case "message_start":
		if e.Message == nil {
			return out, false, violation("message_start without a message")
		}
		d.started = true
		d.id, d.model = e.Message.ID, e.Message.Model
		d.addUsage(e.Message.Usage)
		return append(out, Event{Type: EventCreated, Response: &Response{ID: d.id, Model: d.model}}), false, nil
	case "content_block_start":
		return d.blockStart(&e, out)
	case "content_block_delta":
		return d.blockDelta(&e, out)
	case "content_block_stop":
		return d.blockStop(&e, out)
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			d.stop = e.Delta.StopReason
		}
		d.addUsage(e.Usage)
		return out, false, nil
	case "message_stop":
		return d.complete(out)
	case "error", "": // "": {"error":{…}} without a type, a gateway's error frame
		if e.Type == "" && e.Error == nil {
			return out, false, nil
		}
		pe := &Error{Phase: Body, Class: ResponsesFailed, Dispatched: true, Response: d.response("failed")}
		if e.Error != nil {
			pe.Type, pe.Code, pe.Message = string(e.Error.Type), string(e.Error.Type), string(e.Error.Message)
		}
		return out, false, pe
	}
	return out, false, nil // ping, and events this version does not know
}

// addUsage records usage; message_delta's counts are cumulative and
// replace message_start's.
func (d *anthropicDecoder) addUsage(u *anthropicUsage) {
	if u == nil {
		return
	}
	d.hasUsage = true
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&d.input, u.InputTokens)
	set(&d.cacheW, u.CacheCreationInputTokens)
	set(&d.cacheR, u.CacheReadInputTokens)
	set(&d.output, u.OutputTokens)
}

func (d *anthropicDecoder) block(e *anthropicEvent) (*anthropicBlockState, *Error) {
	if e.Index == nil {
		return nil, violation(e.Type + " without an index")
	}
	for _, b := range d.blocks {
		if b.index == *e.Index {
			return b, nil
		}
	}
	return nil, violation(fmt.Sprintf("%s for block %d, which was never started", e.Type, *e.Index))
}

func (d *anthropicDecoder) blockStart(e *anthropicEvent, out []Event) ([]Event, bool, *Error) {
	if e.Index == nil || e.ContentBlock == nil {
		return out, false, violation("content_block_start without an index or a block")
	}
	cb := e.ContentBlock
	b := &anthropicBlockState{index: *e.Index, typ: cb.Type, id: cb.ID, name: cb.Name, data: cb.Data, input: cb.Input}
	b.text.WriteString(cb.Text)
	b.text.WriteString(cb.Thinking)
	b.signature.WriteString(cb.Signature)
	d.blocks = append(d.blocks, b)
	if cb.Type == "tool_use" {
		if cb.ID == "" || cb.Name == "" {
			return out, false, violation("tool_use block without an id or a name")
		}
		out = append(out, Event{Type: EventToolCallStarted, OutputIndex: b.index, CallID: cb.ID, Name: cb.Name})
	}
	return out, false, nil
}

func (d *anthropicDecoder) blockDelta(e *anthropicEvent, out []Event) ([]Event, bool, *Error) {
	b, err := d.block(e)
	if err != nil {
		return out, false, err
	}
	if e.Delta == nil {
		return out, false, violation("content_block_delta without a delta")
	}
	switch dl := e.Delta; dl.Type {
	case "text_delta":
		b.text.WriteString(dl.Text)
		if dl.Text != "" {
			out = append(out, Event{Type: EventTextDelta, OutputIndex: b.index, Delta: dl.Text})
		}
	case "thinking_delta":
		b.text.WriteString(dl.Thinking)
		if dl.Thinking != "" {
			out = append(out, Event{Type: EventReasoningDelta, OutputIndex: b.index, Delta: dl.Thinking})
		}
	case "signature_delta":
		b.signature.WriteString(dl.Signature)
	case "input_json_delta":
		b.text.WriteString(dl.PartialJSON)
		if dl.PartialJSON != "" {
			out = append(out, Event{Type: EventToolCallDelta, OutputIndex: b.index, CallID: b.id, Name: b.name, Delta: dl.PartialJSON})
		}
	}
	return out, false, nil
}

func (d *anthropicDecoder) blockStop(e *anthropicEvent, out []Event) ([]Event, bool, *Error) {
	b, err := d.block(e)
	if err != nil {
		return out, false, err
	}
	if b.done {
		return out, false, violation(fmt.Sprintf("content_block_stop for block %d twice", b.index))
	}
	b.done = true
	it, ok := b.item()
	if !ok {
		return out, false, nil // a block octet has no item for (server tool results, …)
	}
	d.done = append(d.done, it)
	item := it
	return append(out, Event{Type: EventItemDone, OutputIndex: b.index, CallID: it.CallID, Name: it.Name, Item: &item}), false, nil
}

// item is the block's output item.
func (b *anthropicBlockState) item() (Item, bool) {
	switch b.typ {
	case "text":
		return Item{Type: ItemMessage, Role: "assistant", Text: b.text.String(), Status: "completed"}, true
	case "thinking":
		return Item{Type: ItemReasoning, Summary: []string{b.text.String()}, EncryptedContent: anthropicThinking + b.signature.String()}, true
	case "redacted_thinking":
		return Item{Type: ItemReasoning, EncryptedContent: anthropicRedacted + b.data}, true
	case "tool_use":
		// The arguments streamed as deltas; without any, those the
		// block started with (as the SDKs read a block).
		args := b.text.String()
		if strings.TrimSpace(args) == "" {
			args = "{}"
			if in := bytes.TrimSpace(b.input); len(in) > 0 && in[0] == '{' {
				args = string(in)
			}
		}
		return Item{Type: ItemFunctionCall, CallID: b.id, Name: b.name, Arguments: args, Status: "completed"}, true
	}
	return Item{Type: ItemType(b.typ)}, b.typ != ""
}

// complete ends the stream at message_stop by its stop_reason:
// "max_tokens" is the output limit (an incomplete response with reason
// max_output_tokens, as the Responses route reports it), "refusal" an
// incomplete response with reason content_filter, any other reason a
// completed response.
func (d *anthropicDecoder) complete(out []Event) ([]Event, bool, *Error) {
	if !d.started {
		return out, false, violation("message_stop without message_start")
	}
	reason := ""
	switch d.stop {
	case "max_tokens":
		reason = "max_output_tokens"
	case "refusal":
		reason = "content_filter"
	case "model_context_window_exceeded":
		reason = d.stop
	}
	if reason != "" {
		r := d.response("incomplete")
		r.IncompleteReason = reason
		return out, false, &Error{Phase: Body, Class: ResponsesIncomplete, Dispatched: true, IncompleteReason: reason, Response: r}
	}
	return append(out, Event{Type: EventCompleted, Response: d.response("completed")}), true, nil
}

func (d *anthropicDecoder) response(status string) *Response {
	r := &Response{ID: d.id, Model: d.model, Status: status, Output: d.done}
	if d.hasUsage {
		// Anthropic counts cache reads and writes apart from input_tokens;
		// octet's input is all of them, of which the reads are cached.
		r.Usage = &Usage{InputTokens: d.input + d.cacheW + d.cacheR, CachedTokens: d.cacheR, OutputTokens: d.output, CacheWriteTokens: d.cacheW}
	}
	return r
}

// end reports a Messages stream that ended before message_stop.
func (d *anthropicDecoder) end(out []Event) ([]Event, *Error) {
	return out, &Error{Phase: Body, Class: TerminalEOF, Dispatched: true, Message: "stream ended without message_stop"}
}
