package provider

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// Request is a provider-neutral Responses request. The agent fills it from a
// session; the transports encode it. Requests are always sent with
// store:false (octet keeps its own ledger) and, over HTTP, stream:true.
type Request struct {
	// Model is the model name sent on the wire.
	Model string
	// Instructions is the system prompt.
	Instructions string
	// Input is the replayed conversation, oldest first.
	Input []Item
	// Tools are the function tools advertised to the model.
	Tools []FunctionTool
	// ToolChoice is "auto" or "none". Empty means "auto" when Tools is
	// non-empty and "none" otherwise (tool-free requests).
	ToolChoice string
	// ParallelToolCalls lets the model emit several calls in one response.
	ParallelToolCalls bool
	// Reasoning, when set, selects reasoning effort and summaries.
	Reasoning *Reasoning
	// EncryptedReasoning makes the request include
	// "reasoning.encrypted_content" so reasoning can be replayed without
	// server-side storage.
	EncryptedReasoning bool
	// PromptCacheKey groups requests that share a prefix for prompt caching.
	PromptCacheKey string
	// MaxOutputTokens bounds the response; zero omits the field.
	MaxOutputTokens int
	// Warmup makes the request a warm-up (FeaturePrewarm): the WebSocket
	// frame carries "generate": false, so the server prepares the
	// request's state (its prompt prefix) and completes without
	// generating output. Only the WebSocket sends it; HTTP refuses to
	// encode a warm-up (InvalidRequest, pre-send).
	Warmup bool
	// Compact makes the request a native compaction (FeatureNativeCompaction):
	// HTTP posts model, instructions, input and prompt_cache_key to
	// …/responses/compact and reads the JSON compaction object as a
	// stream of its output items and a completion. Only the HTTP
	// Responses route sends it.
	Compact bool
	// PreviousResponseID continues a response on the same WebSocket
	// connection; octet sends it only to return the tool results an
	// accepted steering input waits for ([SteeringStream.Continue]).
	// HTTP refuses to encode it: every other request is self-contained.
	PreviousResponseID string
}

// ErrWarmupNotWebSocket is the encoding error of a warm-up request on a
// transport other than the Responses WebSocket.
var ErrWarmupNotWebSocket = errors.New("encode request: a warm-up (generate: false) is sent only over the Responses WebSocket")

// ErrCompactNotResponses is the encoding error of a native compaction on
// a transport other than the HTTP Responses route.
var ErrCompactNotResponses = errors.New("encode request: native compaction (…/responses/compact) is sent only over HTTP on the Responses route")

// EncodeCompact returns the body of a native compaction: the fields the
// compact endpoint takes (model, instructions, input, prompt_cache_key).
func (r *Request) EncodeCompact() ([]byte, error) {
	w, err := r.wire()
	if err != nil {
		return nil, err
	}
	tail, err := json.Marshal(struct {
		PromptCacheKey string `json:"prompt_cache_key,omitempty"`
	}{r.PromptCacheKey})
	if err != nil {
		return nil, err
	}
	return w.splice(tail)
}

// ErrContinuationNotWebSocket is the encoding error of a request with a
// previous_response_id on a transport other than the Responses WebSocket.
var ErrContinuationNotWebSocket = errors.New("encode request: previous_response_id is sent only on the Responses WebSocket connection that holds the response")

// FunctionTool is a function tool with a JSON-schema parameter object.
type FunctionTool struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the arguments object.
	Parameters json.RawMessage
	// Strict asks the provider to enforce the schema exactly.
	Strict bool
	// Async advertises the tool as async (FeatureAsyncTools): the model
	// may go on working after calling it, before its output arrives.
	Async bool
}

// Reasoning selects reasoning effort ("minimal", "low", "medium", "high",
// "xhigh") and summary mode ("auto", "concise", "detailed"); empty fields are
// omitted.
type Reasoning struct {
	Effort  string
	Summary string
}

// ItemType names the kind of an input or output item.
type ItemType string

// Item types octet sends and receives. Output items of any other type (for
// example a provider-hosted tool call) are passed up with their wire type and
// Raw JSON so the agent can fail closed on them; they cannot be sent back.
const (
	ItemMessage            ItemType = "message"
	ItemReasoning          ItemType = "reasoning"
	ItemFunctionCall       ItemType = "function_call"
	ItemFunctionCallOutput ItemType = "function_call_output"
	// ItemCustomToolCall is a free-form tool call whose Input is raw text.
	ItemCustomToolCall ItemType = "custom_tool_call"
	// ItemCustomToolCallOutput answers an ItemCustomToolCall.
	ItemCustomToolCallOutput ItemType = "custom_tool_call_output"
	// ItemCompaction is the opaque item of a native compaction
	// (EncryptedContent): it stands for the conversation it compacted.
	ItemCompaction ItemType = "compaction"
)

// Item is one conversation item. Which fields are meaningful depends on Type.
type Item struct {
	Type ItemType
	// ID is the provider's item id on output items. It is never sent back
	// (requests use store:false, so the server keeps no items to refer to).
	ID string
	// Role is "user", "assistant" or "developer" for messages.
	Role string
	// Text is the message text (all output_text parts, concatenated).
	Text string
	// Refusal is the concatenated refusal parts of an assistant message.
	Refusal string
	// Phase is the assistant message phase the provider reported
	// ("commentary", "final_answer"), if any.
	Phase string
	// Summary holds the reasoning summary texts, in order.
	Summary []string
	// EncryptedContent is the opaque reasoning state to replay.
	EncryptedContent string
	// CallID pairs a call with its output.
	CallID string
	// Name is the called tool's name.
	Name string
	// Arguments is the function call's arguments as a JSON string.
	Arguments string
	// Async marks a function call the model made async (its tool was
	// advertised async): the model went on without its output, which a
	// later request carries. Replayed as the call's "async": true.
	Async bool
	// Input is a custom tool call's free-form input.
	Input string
	// Output is a call output's text.
	Output string
	// Images are images after the text of a user message or of a
	// function call's output, sent as input_image parts (a data URL).
	Images []Image
	// Status is the provider's item status ("completed", "incomplete"), if any.
	Status string
	// Raw is the item's wire JSON on output items; nil on items built locally.
	Raw json.RawMessage
	// Encoded, when set, is the item's input encoding as [EncodeItem]
	// returned it for exactly these fields, and requests send it as is
	// instead of encoding the item again. A caller that replays an
	// immutable item in every request keeps it, so that building a
	// request costs a copy of what did not change. Whoever changes a
	// field must clear it.
	Encoded []byte
}

// Image is an image input: its MIME type and bytes.
type Image struct {
	MimeType string
	Data     []byte
}

// dataURL is the image as a data URL (data:image/png;base64,…).
func (im Image) dataURL() string {
	return "data:" + im.MimeType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)
}

// EncodeItem returns the JSON an item is sent as in a request's input on
// the Responses route, or nil for an item the route leaves out (the
// opaque reasoning state of another wire format, which the Responses API
// cannot read).
func EncodeItem(it *Item) ([]byte, error) {
	if it.Type == ItemReasoning && foreignReasoning(it, WireResponses) {
		return nil, nil
	}
	w, err := wireItem(it)
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// Known reports whether the item's type is one octet can replay.
func (it *Item) Known() bool {
	switch it.Type {
	case ItemMessage, ItemReasoning, ItemFunctionCall, ItemFunctionCallOutput,
		ItemCustomToolCall, ItemCustomToolCallOutput, ItemCompaction:
		return true
	}
	return false
}

// errUnknownItem is wrapped when a request contains an item octet cannot send.
var errUnknownItem = errors.New("item type cannot be sent")

// wireContent is one content part of an input message: input_text and
// output_text parts carry "text", a refusal part carries "refusal", an
// input_image part "image_url".
type wireContent struct {
	Type     string  `json:"type"`
	Text     *string `json:"text,omitempty"`
	Refusal  *string `json:"refusal,omitempty"`
	ImageURL string  `json:"image_url,omitempty"`
}

type wireSummary struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type wireInputItem struct {
	Type             ItemType       `json:"type"`
	Role             string         `json:"role,omitempty"`
	Content          []wireContent  `json:"content,omitempty"`
	Phase            string         `json:"phase,omitempty"`
	Summary          *[]wireSummary `json:"summary,omitempty"`
	EncryptedContent string         `json:"encrypted_content,omitempty"`
	CallID           string         `json:"call_id,omitempty"`
	Name             string         `json:"name,omitempty"`
	Arguments        *string        `json:"arguments,omitempty"`
	Async            bool           `json:"async,omitempty"`
	Input            *string        `json:"input,omitempty"`
	// Output is a call output: a string, or content parts (text and
	// images).
	Output any `json:"output,omitempty"`
}

type wireTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
	Async       bool            `json:"async,omitempty"`
}

type wireReasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// wireRequest is the request body. It is marshaled in two parts around
// the input array, which is spliced in from the items' encodings: the
// fields of wireHead, then "input", then those of wireTail, in the order
// one struct of all of them would have.
type wireRequest struct {
	head  wireHead
	input [][]byte
	tail  wireTail
}

type wireHead struct {
	Type               string `json:"type,omitempty"`
	Model              string `json:"model"`
	Instructions       string `json:"instructions,omitempty"`
	PreviousResponseID string `json:"previous_response_id,omitempty"`
}

type wireTail struct {
	Tools             []wireTool     `json:"tools,omitempty"`
	ToolChoice        string         `json:"tool_choice"`
	ParallelToolCalls bool           `json:"parallel_tool_calls,omitempty"`
	Reasoning         *wireReasoning `json:"reasoning,omitempty"`
	Store             bool           `json:"store"`
	Stream            *bool          `json:"stream,omitempty"`
	Include           []string       `json:"include,omitempty"`
	PromptCacheKey    string         `json:"prompt_cache_key,omitempty"`
	MaxOutputTokens   int            `json:"max_output_tokens,omitempty"`
	Generate          *bool          `json:"generate,omitempty"`
}

// marshal returns the body: {head fields,"input":[items],tail fields}.
func (w *wireRequest) marshal() ([]byte, error) {
	tail, err := json.Marshal(&w.tail)
	if err != nil {
		return nil, err
	}
	return w.splice(tail)
}

// splice returns {head fields,"input":[items],tail's fields}; tail is a
// marshaled object (maybe empty).
func (w *wireRequest) splice(tail []byte) ([]byte, error) {
	head, err := json.Marshal(&w.head)
	if err != nil {
		return nil, err
	}
	n := len(head) + len(tail) + len(`,"input":[],`) + len(w.input)
	for _, it := range w.input {
		n += len(it)
	}
	b := make([]byte, 0, n)
	b = append(b, head[:len(head)-1]...) // without '}': model is never omitted
	b = append(b, `,"input":[`...)
	for i, it := range w.input {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	b = append(b, ']')
	if len(tail) > 2 { // not {}
		b = append(b, ',')
	}
	b = append(b, tail[1:]...) // without '{'
	return b, nil
}

// EncodeHTTP returns the JSON body of a streaming HTTP request.
func (r *Request) EncodeHTTP() ([]byte, error) {
	if r.Warmup {
		return nil, ErrWarmupNotWebSocket
	}
	if r.PreviousResponseID != "" {
		return nil, ErrContinuationNotWebSocket
	}
	w, err := r.wire()
	if err != nil {
		return nil, err
	}
	t := true
	w.tail.Stream = &t
	return w.marshal()
}

// EncodeWebSocket returns the response.create frame for the WebSocket
// transport: the same body as [Request.EncodeHTTP] with "type" added and
// "stream" omitted (streaming is implicit on the socket).
func (r *Request) EncodeWebSocket() ([]byte, error) {
	w, err := r.wire()
	if err != nil {
		return nil, err
	}
	w.head.Type = "response.create"
	if r.Warmup {
		f := false
		w.tail.Generate = &f
	}
	return w.marshal()
}

func (r *Request) wire() (*wireRequest, error) {
	tools, choice, err := checkRequest(r)
	if err != nil {
		return nil, err
	}
	w := &wireRequest{
		head:  wireHead{Model: r.Model, Instructions: r.Instructions, PreviousResponseID: r.PreviousResponseID},
		input: make([][]byte, 0, len(r.Input)),
		tail: wireTail{
			ToolChoice:        choice,
			ParallelToolCalls: r.ParallelToolCalls,
			PromptCacheKey:    r.PromptCacheKey,
			MaxOutputTokens:   r.MaxOutputTokens,
		},
	}
	t := &w.tail
	for i := range r.Input {
		it := &r.Input[i]
		enc := it.Encoded
		if enc == nil {
			var err error
			if enc, err = EncodeItem(it); err != nil {
				return nil, fmt.Errorf("encode request: input %d: %w", i, err)
			}
			if enc == nil {
				continue
			}
		}
		w.input = append(w.input, enc)
	}
	for _, ft := range tools {
		t.Tools = append(t.Tools, wireTool{Type: "function", Name: ft.Name, Description: ft.Description, Parameters: ft.Parameters, Strict: ft.Strict, Async: ft.Async})
	}
	if r.Reasoning != nil {
		t.Reasoning = &wireReasoning{Effort: r.Reasoning.Effort, Summary: r.Reasoning.Summary}
	}
	if r.EncryptedReasoning {
		t.Include = []string{"reasoning.encrypted_content"}
	}
	return w, nil
}

// checkRequest checks what every route needs of a request: a model, tools
// with names and parameters that are valid JSON (an empty object schema
// when none), tool_choice auto or none. It returns the tools and the
// tool choice to send.
func checkRequest(r *Request) ([]FunctionTool, string, error) {
	if r.Model == "" {
		return nil, "", errors.New("encode request: empty model")
	}
	choice := r.ToolChoice
	if choice == "" {
		choice = "none"
		if len(r.Tools) > 0 {
			choice = "auto"
		}
	}
	if choice != "auto" && choice != "none" {
		return nil, "", fmt.Errorf("encode request: tool_choice %q is not auto or none", choice)
	}
	out := make([]FunctionTool, 0, len(r.Tools))
	for i, ft := range r.Tools {
		if ft.Name == "" {
			return nil, "", fmt.Errorf("encode request: tool %d has no name", i)
		}
		if len(ft.Parameters) == 0 {
			ft.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !json.Valid(ft.Parameters) {
			return nil, "", fmt.Errorf("encode request: tool %s: parameters are not valid JSON", ft.Name)
		}
		out = append(out, ft)
	}
	return out, choice, nil
}

// checkImageRole refuses images on a message that is not the user's:
// on every route only user messages carry images.
func checkImageRole(it *Item) error {
	if len(it.Images) > 0 && it.Role != "user" {
		return fmt.Errorf("images in a %s message (only user messages carry images)", it.Role)
	}
	return nil
}

// replayedText is the text an assistant message is sent back as on a
// route without refusal parts: its text, or its refusal when it has none.
func replayedText(it *Item) string {
	if it.Text == "" {
		return it.Refusal
	}
	return it.Text
}

// appendImageParts appends an input_image part per image.
func appendImageParts(parts []wireContent, imgs []Image) []wireContent {
	for _, im := range imgs {
		parts = append(parts, wireContent{Type: "input_image", ImageURL: im.dataURL()})
	}
	return parts
}

func wireItem(it *Item) (wireInputItem, error) {
	w := wireInputItem{Type: it.Type}
	switch it.Type {
	case ItemMessage:
		part := "input_text"
		switch it.Role {
		case "user", "developer":
		case "assistant":
			part = "output_text"
			w.Phase = it.Phase
		default:
			return w, fmt.Errorf("message role %q is not user, assistant or developer", it.Role)
		}
		w.Role = it.Role
		text, refusal := it.Text, it.Refusal
		if it.Role != "assistant" || text != "" || refusal == "" {
			w.Content = []wireContent{{Type: part, Text: &text}}
		}
		if err := checkImageRole(it); err != nil {
			return w, err
		}
		w.Content = appendImageParts(w.Content, it.Images)
		if it.Role == "assistant" && refusal != "" {
			w.Content = append(w.Content, wireContent{Type: "refusal", Refusal: &refusal})
		}
	case ItemCompaction:
		if it.EncryptedContent == "" {
			return w, errors.New("compaction item without encrypted_content")
		}
		w.EncryptedContent = it.EncryptedContent
	case ItemReasoning:
		s := make([]wireSummary, 0, len(it.Summary))
		for _, t := range it.Summary {
			s = append(s, wireSummary{Type: "summary_text", Text: t})
		}
		w.Summary = &s
		w.EncryptedContent = it.EncryptedContent
	case ItemFunctionCall:
		if it.CallID == "" || it.Name == "" {
			return w, errors.New("function_call needs call_id and name")
		}
		w.CallID, w.Name, w.Async = it.CallID, it.Name, it.Async
		args := it.Arguments
		w.Arguments = &args
	case ItemCustomToolCall:
		if it.CallID == "" || it.Name == "" {
			return w, errors.New("custom_tool_call needs call_id and name")
		}
		w.CallID, w.Name = it.CallID, it.Name
		in := it.Input
		w.Input = &in
	case ItemFunctionCallOutput, ItemCustomToolCallOutput:
		if it.CallID == "" {
			return w, fmt.Errorf("%s needs call_id", it.Type)
		}
		w.CallID = it.CallID
		out := it.Output
		w.Output = &out
		if len(it.Images) > 0 {
			if it.Type != ItemFunctionCallOutput {
				return w, errors.New("a custom tool call output cannot carry images")
			}
			w.Output = appendImageParts([]wireContent{{Type: "input_text", Text: &out}}, it.Images)
		}
	default:
		return w, fmt.Errorf("%w: %q", errUnknownItem, it.Type)
	}
	return w, nil
}
