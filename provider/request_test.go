package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// legacyWire is the request body as one struct, the way requests were
// encoded before the input array was spliced from item encodings.
type legacyWire struct {
	Type              string          `json:"type,omitempty"`
	Model             string          `json:"model"`
	Instructions      string          `json:"instructions,omitempty"`
	Input             []wireInputItem `json:"input"`
	Tools             []wireTool      `json:"tools,omitempty"`
	ToolChoice        string          `json:"tool_choice"`
	ParallelToolCalls bool            `json:"parallel_tool_calls,omitempty"`
	Reasoning         *wireReasoning  `json:"reasoning,omitempty"`
	Store             bool            `json:"store"`
	Stream            *bool           `json:"stream,omitempty"`
	Include           []string        `json:"include,omitempty"`
	PromptCacheKey    string          `json:"prompt_cache_key,omitempty"`
	MaxOutputTokens   int             `json:"max_output_tokens,omitempty"`
}

func legacyEncode(t testing.TB, r *Request, ws bool) []byte {
	t.Helper()
	w, err := r.wire()
	if err != nil {
		t.Fatal(err)
	}
	l := legacyWire{Type: w.head.Type, Model: w.head.Model, Instructions: w.head.Instructions,
		Input: []wireInputItem{}, Tools: w.tail.Tools, ToolChoice: w.tail.ToolChoice, ParallelToolCalls: w.tail.ParallelToolCalls,
		Reasoning: w.tail.Reasoning, Include: w.tail.Include, PromptCacheKey: w.tail.PromptCacheKey, MaxOutputTokens: w.tail.MaxOutputTokens}
	for i := range r.Input {
		wi, err := wireItem(&r.Input[i])
		if err != nil {
			t.Fatal(err)
		}
		l.Input = append(l.Input, wi)
	}
	if ws {
		l.Type = "response.create"
	} else {
		yes := true
		l.Stream = &yes
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleItems is every input item shape, with text that JSON escapes.
func sampleItems(n int) []Item {
	odd := "a <b> & \"c\" \\ \u2028 \x00 é \xff 😀\n"
	var items []Item
	for i := range n {
		s := fmt.Sprintf("%d %s", i, odd)
		items = append(items,
			Item{Type: ItemMessage, Role: "user", Text: s},
			Item{Type: ItemMessage, Role: "developer", Text: ""},
			Item{Type: ItemMessage, Role: "assistant", Text: s, Phase: "commentary"},
			Item{Type: ItemMessage, Role: "assistant", Refusal: s},
			Item{Type: ItemMessage, Role: "assistant", Text: s, Refusal: s},
			Item{Type: ItemReasoning, Summary: []string{s, s}, EncryptedContent: "gAAA" + s},
			Item{Type: ItemReasoning},
			Item{Type: ItemFunctionCall, CallID: "call_" + s, Name: "read", Arguments: `{"path":"` + s + `"}`},
			Item{Type: ItemFunctionCallOutput, CallID: "call_" + s, Output: s},
			Item{Type: ItemCustomToolCall, CallID: "c", Name: "patch", Input: s},
			Item{Type: ItemCustomToolCallOutput, CallID: "c", Output: ""},
		)
	}
	return items
}

// TestRequestBytesUnchanged checks that requests encode to exactly the
// bytes of one json.Marshal of the whole body, whether their items carry
// their encoding (Item.Encoded) or not.
func TestRequestBytesUnchanged(t *testing.T) {
	reqs := []*Request{
		{Model: "m", Input: nil},
		{Model: "m <&>", Instructions: "be <brief> & \u2028", Input: sampleItems(3),
			Tools:             []FunctionTool{{Name: "read", Description: "reads <files>", Parameters: json.RawMessage(`{"type":"object"}`), Strict: true}, {Name: "x"}},
			ParallelToolCalls: true, Reasoning: &Reasoning{Effort: "high", Summary: "auto"}, EncryptedReasoning: true, PromptCacheKey: "k", MaxOutputTokens: 100},
		{Model: "m", Input: sampleItems(1), ToolChoice: "none", Reasoning: &Reasoning{}},
	}
	for i, r := range reqs {
		for _, ws := range []bool{false, true} {
			enc := r.EncodeHTTP
			if ws {
				enc = r.EncodeWebSocket
			}
			want := legacyEncode(t, r, ws)
			got, err := enc()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("request %d (ws %v): %v\ngot  %s\nwant %s", i, ws, err, got, want)
			}
			for j := range r.Input {
				if r.Input[j].Encoded, err = EncodeItem(&r.Input[j]); err != nil {
					t.Fatal(err)
				}
			}
			if got, err = enc(); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("request %d (ws %v) with encoded items: %v\ngot  %s\nwant %s", i, ws, err, got, want)
			}
			if !json.Valid(got) {
				t.Fatalf("request %d: invalid JSON", i)
			}
		}
	}
	// An item's encoding is sent as is, not re-encoded.
	r := &Request{Model: "m", Input: []Item{{Type: ItemMessage, Role: "user", Text: "x", Encoded: []byte(`{"cached":1}`)}}}
	if b, _ := r.EncodeHTTP(); !bytes.Contains(b, []byte(`"input":[{"cached":1}]`)) {
		t.Fatalf("Encoded not used: %s", b)
	}
	// An item that cannot be encoded is still an error.
	bad := &Request{Model: "m", Input: []Item{{Type: "web_search_call"}}}
	if _, err := bad.EncodeHTTP(); err == nil || !strings.Contains(err.Error(), "input 0") {
		t.Fatalf("unknown item: %v", err)
	}
}

// bigRequest is a 1.6 MB request (about a full 400K-token context) of
// message, reasoning, call and output items, each item encoded once.
func bigRequest(tb testing.TB) *Request {
	var items []Item
	text := strings.Repeat("func main() { fmt.Println(\"hello, <world>\") }\n", 20) // ~1 KB
	for i := 0; len(items) < 4*450; i++ {
		id := fmt.Sprintf("call_%06d", i)
		items = append(items,
			Item{Type: ItemMessage, Role: "user", Text: text[:200]},
			Item{Type: ItemReasoning, Summary: []string{text[:100]}, EncryptedContent: strings.Repeat("gAAAAB", 40)},
			Item{Type: ItemFunctionCall, CallID: id, Name: "read", Arguments: `{"path":"main.go"}`},
			Item{Type: ItemFunctionCallOutput, CallID: id, Output: text[:len(text)*3/4] + text[:len(text)*3/4] + text[:len(text)*3/4]},
		)
	}
	for i := range items {
		enc, err := EncodeItem(&items[i])
		if err != nil {
			tb.Fatal(err)
		}
		items[i].Encoded = enc
	}
	return &Request{Model: "gpt-5", Instructions: "You are octet.", Input: items, Tools: []FunctionTool{{Name: "read"}}, Reasoning: &Reasoning{Effort: "medium"}}
}

// BenchmarkEncodeRequest encodes a 1.6 MB request whose items carry their
// encoding (as the agent's entry cache provides them) against
// json.Marshal of the same wire items (what every request cost before),
// in the same run.
func BenchmarkEncodeRequest(b *testing.B) {
	r := bigRequest(b)
	body, _ := r.EncodeHTTP()
	b.Logf("request %d bytes, %d items", len(body), len(r.Input))
	b.Run("cached", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := r.EncodeHTTP(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			legacyEncode(b, r, false)
		}
	})
}

// TestCachedRequestEncodingIsFast checks the cached path's point: a
// 1.6 MB request whose items carry their encoding takes a fraction of
// json.Marshal of the same items (it used to take as long: every request
// encoded every item again).
func TestCachedRequestEncodingIsFast(t *testing.T) {
	r := bigRequest(t)
	best := func(f func()) time.Duration {
		d := time.Duration(1 << 62)
		for range 20 {
			start := time.Now()
			f()
			d = min(d, time.Since(start))
		}
		return d
	}
	cached := best(func() { _, _ = r.EncodeHTTP() })
	full := best(func() { legacyEncode(t, r, false) })
	if cached*2 > full {
		t.Fatalf("1.6 MB request: %v with encoded items, %v with json.Marshal: the item encodings are not reused", cached, full)
	}
}

// TestEncodeImages: a user message's images follow its text as
// input_image parts with data URLs; a function call output with images
// is an array of its text and the images; an assistant message cannot
// carry one.
func TestEncodeImages(t *testing.T) {
	img := Image{MimeType: "image/png", Data: []byte("\x89PNG")}
	got, err := EncodeItem(&Item{Type: ItemMessage, Role: "user", Text: "look", Images: []Image{img, img}})
	want := `{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw=="},{"type":"input_image","image_url":"data:image/png;base64,iVBORw=="}]}`
	if err != nil || string(got) != want {
		t.Errorf("user message:\n%s, %v\nwant\n%s", got, err, want)
	}
	got, err = EncodeItem(&Item{Type: ItemFunctionCallOutput, CallID: "c1", Output: "a.png (image/png)", Images: []Image{img}})
	want = `{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"a.png (image/png)"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw=="}]}`
	if err != nil || string(got) != want {
		t.Errorf("call output:\n%s, %v\nwant\n%s", got, err, want)
	}
	if got, err := EncodeItem(&Item{Type: ItemFunctionCallOutput, CallID: "c1", Output: "plain"}); err != nil || string(got) != `{"type":"function_call_output","call_id":"c1","output":"plain"}` {
		t.Errorf("call output without images: %s, %v", got, err)
	}
	if _, err := EncodeItem(&Item{Type: ItemMessage, Role: "assistant", Text: "x", Images: []Image{img}}); err == nil {
		t.Error("an assistant message with an image was encoded")
	}
}
