package provider_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "responses", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// splitResponses splits a multi-response .jsonl fixture after each
// terminal event, one turn per response.
func splitResponses(t *testing.T, data []byte) []providertest.Turn {
	t.Helper()
	var turns []providertest.Turn
	var cur [][]byte
	for _, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		cur = append(cur, line)
		var v struct{ Type string }
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatal(err)
		}
		if v.Type == "response.completed" || v.Type == "response.failed" || v.Type == "response.incomplete" {
			turns = append(turns, providertest.Events(cur...))
			cur = nil
		}
	}
	if len(cur) > 0 {
		turns = append(turns, providertest.Events(cur...))
	}
	return turns
}

// jsonArrayTurn turns a Codex JSON-array fixture into a turn.
func jsonArrayTurn(t *testing.T, data []byte) providertest.Turn {
	t.Helper()
	var events []json.RawMessage
	if err := json.Unmarshal(data, &events); err != nil {
		t.Fatal(err)
	}
	var payloads [][]byte
	for _, e := range events {
		var buf bytes.Buffer
		if err := json.Compact(&buf, e); err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, buf.Bytes())
	}
	return providertest.Events(payloads...)
}

// itemView is the comparable part of an item.
type itemView struct {
	Type                           provider.ItemType
	Text, Phase                    string
	Summary                        []string
	HasEncrypted                   bool
	CallID, Name, Arguments, Input string
}

func view(items []provider.Item) []itemView {
	var out []itemView
	for _, it := range items {
		out = append(out, itemView{Type: it.Type, Text: it.Text, Phase: it.Phase, Summary: it.Summary,
			HasEncrypted: it.EncryptedContent != "", CallID: it.CallID, Name: it.Name, Arguments: it.Arguments, Input: it.Input})
	}
	return out
}

type fixtureWant struct {
	items []itemView
	usage *provider.Usage
	// text is the concatenated text deltas; reasoning the reasoning deltas;
	// args the tool-call deltas.
	text, reasoning, args string
}

func TestRecordedFixtures(t *testing.T) {
	calc := func(id, args string) itemView {
		return itemView{Type: provider.ItemFunctionCall, CallID: id, Name: "calculator", Arguments: args}
	}
	const summary = "**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7, then multiply the result by 3, and finally multiply that by 10, reporting the final product."
	phase := readFixture(t, "vercel-ai__openai-phase.1.jsonl")
	var phaseFinal string
	for _, line := range bytes.Split(phase, []byte("\n")) {
		var v struct {
			Type string
			Item struct {
				Phase   string
				Content []struct{ Text string }
			}
		}
		if json.Unmarshal(line, &v) == nil && v.Type == "response.output_item.done" && v.Item.Phase == "final_answer" {
			phaseFinal = v.Item.Content[0].Text
		}
	}
	if len(phaseFinal) < 100 {
		t.Fatalf("fixture final answer not found")
	}
	const phaseCommentary = "Got it — I’ll quickly check reliable, up-to-date sources for AI headlines from **today (February 25, 2026)** and then summarize the key items with links."

	cases := []struct {
		name  string
		turns func(t *testing.T) []providertest.Turn
		want  []fixtureWant
	}{
		{
			name: "reasoning-encrypted-content (4 recorded responses)",
			turns: func(t *testing.T) []providertest.Turn {
				return splitResponses(t, readFixture(t, "vercel-ai__openai-reasoning-encrypted-content.1.jsonl"))
			},
			want: []fixtureWant{
				{items: []itemView{{Type: provider.ItemReasoning, Summary: []string{summary}, HasEncrypted: true}, calc("call_AB6AaRZ1FYZB2RwS6A5vbdqn", `{"a":12,"b":7,"op":"add"}`)},
					usage: &provider.Usage{InputTokens: 134, OutputTokens: 28}, reasoning: summary, args: `{"a":12,"b":7,"op":"add"}`},
				{items: []itemView{calc("call_Q6pW65MUgW9vF59BmItYGos3", `{"a":19,"b":3,"op":"multiply"}`)},
					usage: &provider.Usage{InputTokens: 221, OutputTokens: 26}, args: `{"a":19,"b":3,"op":"multiply"}`},
				{items: []itemView{calc("call_Zl5vIMnD7dVAjgU6FkhmiCZh", `{"a":57,"b":10,"op":"multiply"}`)},
					usage: &provider.Usage{InputTokens: 260, OutputTokens: 26}, args: `{"a":57,"b":10,"op":"multiply"}`},
				{items: []itemView{{Type: provider.ItemMessage, Text: "The final result is **570**."}},
					usage: &provider.Usage{InputTokens: 299, OutputTokens: 12}, text: "The final result is **570**."},
			},
		},
		{
			name:  "phase (commentary then final_answer)",
			turns: func(t *testing.T) []providertest.Turn { return splitResponses(t, phase) },
			want: []fixtureWant{{
				items: []itemView{{Type: provider.ItemMessage, Text: phaseCommentary, Phase: "commentary"}, {Type: provider.ItemMessage, Text: phaseFinal, Phase: "final_answer"}},
				usage: &provider.Usage{InputTokens: 7112, CachedTokens: 3072, OutputTokens: 463, ReasoningTokens: 64},
				// The recording kept only the first deltas of each part (sequence
				// numbers jump); output_item.done is authoritative regardless.
				text: "Got it" + "Here are a few **AI",
			}},
		},
		{
			name: "local-shell-tool (provider-hosted item passed up raw)",
			turns: func(t *testing.T) []providertest.Turn {
				return splitResponses(t, readFixture(t, "vercel-ai__openai-local-shell-tool.1.jsonl"))
			},
			want: []fixtureWant{{
				items: []itemView{{Type: provider.ItemReasoning}, {Type: "local_shell_call", CallID: "call_h3nm8hUG0KO9tVNuRACkL1ri"}},
				usage: &provider.Usage{InputTokens: 407, OutputTokens: 151, ReasoningTokens: 128},
			}},
		},
		{
			name: "custom-tool",
			turns: func(t *testing.T) []providertest.Turn {
				return splitResponses(t, readFixture(t, "vercel-ai__openai-custom-tool.1.jsonl"))
			},
			want: []fixtureWant{{
				items: []itemView{{Type: provider.ItemCustomToolCall, CallID: "call_custom_sql_001", Name: "write_sql", Input: "SELECT * FROM users WHERE age > 25"}},
				usage: &provider.Usage{InputTokens: 50, OutputTokens: 20},
				args:  "SELECT * FROM users WHERE age > 25",
			}},
		},
		{
			name: "codex cli_responses_fixture.sse (raw SSE, no usage)",
			turns: func(t *testing.T) []providertest.Turn {
				tu, err := providertest.RawSSE(readFixture(t, "codex__cli_responses_fixture.sse"))
				if err != nil {
					t.Fatal(err)
				}
				return []providertest.Turn{tu}
			},
			want: []fixtureWant{{items: []itemView{{Type: provider.ItemMessage, Text: "fixture hello"}}}},
		},
		{
			name: "codex sse_response_completed.json (null usage details)",
			turns: func(t *testing.T) []providertest.Turn {
				return []providertest.Turn{jsonArrayTurn(t, readFixture(t, "codex__sse_response_completed.json"))}
			},
			want: []fixtureWant{{usage: &provider.Usage{}}},
		},
		{
			name: "codex sse_apply_patch_add.json",
			turns: func(t *testing.T) []providertest.Turn {
				return []providertest.Turn{jsonArrayTurn(t, readFixture(t, "codex__sse_apply_patch_add.json"))}
			},
			want: []fixtureWant{{
				items: []itemView{{Type: provider.ItemCustomToolCall, CallID: "__ID__", Name: "apply_patch", Input: "*** Begin Patch\n*** Add File: test.md\n+Hello world\n*** End Patch"}},
				usage: &provider.Usage{},
			}},
		},
	}
	for _, tc := range cases {
		for _, tr := range transports {
			t.Run(tc.name+"/"+tr.name, func(t *testing.T) {
				srv := providertest.New(t)
				turns := tc.turns(t)
				if len(turns) != len(tc.want) {
					t.Fatalf("fixture has %d responses, want %d", len(turns), len(tc.want))
				}
				srv.Enqueue(turns...)
				transport := tr.make(t, srv)
				for i, want := range tc.want {
					evs, err := run(t, transport, simpleRequest())
					if err != nil {
						t.Fatalf("response %d: %v", i, err)
					}
					resp := completed(t, evs)
					if diff := cmp.Diff(want.items, view(resp.Output), cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("response %d output (-want +got):\n%s", i, diff)
					}
					if diff := cmp.Diff(want.usage, resp.Usage); diff != "" {
						t.Errorf("response %d usage (-want +got):\n%s", i, diff)
					}
					if got := deltas(evs, provider.EventTextDelta); got != want.text {
						t.Errorf("response %d text deltas = %q, want %q", i, got, want.text)
					}
					if got := deltas(evs, provider.EventReasoningDelta); got != want.reasoning {
						t.Errorf("response %d reasoning deltas = %q, want %q", i, got, want.reasoning)
					}
					if got := deltas(evs, provider.EventToolCallDelta); got != want.args {
						t.Errorf("response %d tool deltas = %q, want %q", i, got, want.args)
					}
					checkItemEvents(t, evs, resp)
				}
			})
		}
	}
}

// checkItemEvents asserts that every EventItemDone matches the assembled
// output and that tool-call deltas name the call that started.
func checkItemEvents(t *testing.T, evs []provider.Event, resp *provider.Response) {
	t.Helper()
	var done []provider.Item
	started := map[string]string{}
	for _, e := range evs {
		switch e.Type {
		case provider.EventItemDone:
			done = append(done, *e.Item)
		case provider.EventToolCallStarted:
			started[e.ItemID] = e.CallID
		case provider.EventToolCallDelta:
			if e.CallID == "" || started[e.ItemID] != e.CallID {
				t.Errorf("tool delta for item %s has call id %q, started with %q", e.ItemID, e.CallID, started[e.ItemID])
			}
		}
	}
	if len(done) > 0 && len(done) != len(resp.Output) {
		t.Errorf("%d item_done events but %d output items", len(done), len(resp.Output))
	}
	for _, it := range resp.Output {
		if len(it.Raw) == 0 || !json.Valid(it.Raw) {
			t.Errorf("output item %s has no valid Raw JSON", it.ID)
		}
		if !it.Known() && it.Type != "local_shell_call" {
			t.Errorf("unexpected unknown item type %q", it.Type)
		}
	}
}

func TestRecordedErrorFixtures(t *testing.T) {
	for _, tr := range transports {
		t.Run("stream/"+tr.name, func(t *testing.T) {
			srv := providertest.New(t)
			srv.Enqueue(splitResponses(t, readFixture(t, "vercel-ai__openai-error.1.jsonl"))...)
			_, err := run(t, tr.make(t, srv), simpleRequest())
			pe := asError(t, err)
			if pe.Class != provider.ResponsesFailed || pe.Phase != provider.Body || !pe.Dispatched {
				t.Fatalf("got %v, want body ResponsesFailed dispatched", pe)
			}
			if pe.Code != "insufficient_quota" || pe.Type != "insufficient_quota" || !pe.Permanent() {
				t.Errorf("code=%q type=%q permanent=%v", pe.Code, pe.Type, pe.Permanent())
			}
			if pe.Message == "" {
				t.Error("message lost")
			}
		})
		t.Run("http-body/"+tr.name, func(t *testing.T) {
			srv := providertest.New(t)
			srv.Enqueue(providertest.StatusBody(429, string(readFixture(t, "vercel-ai__openai-error.1.http-body.json"))))
			_, err := run(t, tr.make(t, srv), simpleRequest())
			pe := asError(t, err)
			if pe.Class != provider.HTTPStatus || pe.Status != 429 || pe.Code != "insufficient_quota" || !pe.Permanent() || !pe.Dispatched {
				t.Fatalf("got %+v", pe)
			}
		})
	}
}

// TestRepeatedItemFramesDropped: the first recorded response of the
// encrypted-reasoning fixture with every output_item.added and
// output_item.done frame sent twice (same sequence_number: a proxy's
// retransmission) decodes as the original: one reasoning item and one
// function call, each started and done once.
func TestRepeatedItemFramesDropped(t *testing.T) {
	var lines [][]byte
	for _, line := range bytes.Split(readFixture(t, "vercel-ai__openai-reasoning-encrypted-content.1.jsonl"), []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) == 0 {
			continue
		}
		lines = append(lines, line)
		if bytes.Contains(line, []byte(`"type":"response.output_item.`)) {
			lines = append(lines, line)
		}
		if bytes.Contains(line, []byte(`"type":"response.completed"`)) {
			break
		}
	}
	srv := providertest.New(t)
	srv.Enqueue(providertest.Events(lines...))
	evs, err := run(t, httpTransport(t, srv), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	var started, done int
	for _, e := range evs {
		switch e.Type {
		case provider.EventToolCallStarted:
			started++
		case provider.EventItemDone:
			done++
		}
	}
	out := completed(t, evs).Output
	if started != 1 || done != 2 || len(out) != 2 || out[1].CallID != "call_AB6AaRZ1FYZB2RwS6A5vbdqn" {
		t.Fatalf("%d started, %d done, output %+v; want the call started once and two items done once", started, done, out)
	}
}
