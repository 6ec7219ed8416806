package provider_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// sdkDir holds the official SDKs, pinned (npm ci there; .ci/run does).
var sdkDir = filepath.Join("testdata", "sdk")

// seen is what a client made of one response, in terms both octet and
// the official SDKs can be compared in.
type seen struct {
	OK         bool
	Text       string
	Reasoning  string
	Signatures []string
	Calls      []seenCall
	Stop       string
	Usage      *provider.Usage
	Status     int
	RetryAfter string
	Type       string
}

type seenCall struct {
	ID, Name string
	Input    any // the arguments, decoded
}

// sdkCase is one response a route's server sends.
type sdkCase struct {
	name  string
	turn  func(t *testing.T) providertest.Turn
	wires []provider.WireAPI
	// streamFault: both must fail; how each names the failure differs.
	streamFault bool
}

func sdkCases() []sdkCase {
	all := provider.WireAPIs
	fixture := func(name string) func(t *testing.T) providertest.Turn {
		return func(t *testing.T) providertest.Turn {
			data := readFixture(t, name)
			var turn providertest.Turn
			var err error
			if strings.HasSuffix(name, ".sse") {
				turn, err = providertest.RawSSE(data)
			} else {
				turn, err = providertest.FromJSONL(data)
			}
			if err != nil {
				t.Fatal(err)
			}
			return turn
		}
	}
	scripted := func(turn providertest.Turn) func(*testing.T) providertest.Turn {
		return func(*testing.T) providertest.Turn { return turn }
	}
	return []sdkCase{
		{name: "every output", turn: scripted(scriptedReply()), wires: all},
		{name: "text only", turn: scripted(providertest.Text("Hello, world. How are you?")), wires: all},
		{name: "no-argument call", turn: scripted(providertest.Reply(providertest.FunctionCall("call_n", "now", "{}"))), wires: all},
		{name: "output limit", turn: scripted(providertest.Incomplete("max_output_tokens", providertest.Message("cut he"))), wires: []provider.WireAPI{provider.WireChat, provider.WireAnthropic}},
		{name: "429 retry-after", turn: scripted(providertest.Status(429, "rate_limit_error", "rate_limit_exceeded", "slow down").WithRetryAfter("7")), wires: all},
		{name: "529 overloaded", turn: scripted(providertest.Status(529, "overloaded_error", "", "Overloaded")), wires: all},
		{name: "500", turn: scripted(providertest.Status(500, "api_error", "", "Internal server error")), wires: all},
		{name: "error in the stream", turn: scripted(providertest.FailedAfter("overloaded_error", "Overloaded", providertest.Message("par"))), wires: all, streamFault: true},
		{name: "malformed chunk", turn: scripted(scriptedReply().MalformedAt(3)), wires: all, streamFault: true},
		{name: "cut body", turn: scripted(scriptedReply().DropAfter(5)), wires: all, streamFault: true},
		{name: "recorded chat tool call", turn: fixture("openai-python__chat-stream-tool-call.sse"), wires: []provider.WireAPI{provider.WireChat}},
		{name: "recorded chat length", turn: fixture("openai-python__chat-stream-finish-length.sse"), wires: []provider.WireAPI{provider.WireChat}},
		{name: "recorded anthropic tool", turn: fixture("vercel-ai__anthropic-json-tool.2.jsonl"), wires: []provider.WireAPI{provider.WireAnthropic}},
		{name: "recorded anthropic thinking", turn: fixture("vercel-ai__anthropic-clear-thinking.1.jsonl"), wires: []provider.WireAPI{provider.WireAnthropic}},
		{name: "recorded responses reasoning", turn: func(t *testing.T) providertest.Turn {
			return splitResponses(t, readFixture(t, "vercel-ai__openai-reasoning-encrypted-content.1.jsonl"))[0]
		}, wires: []provider.WireAPI{provider.WireResponses}},
	}
}

// TestSDKsParseWhatOctetParses plays every route's scripted responses
// and recorded fixtures to the official SDKs' stream parsers (npm openai
// and @anthropic-ai/sdk, pinned in testdata/sdk) and to octet's, and
// requires the same reading: the scripted server streams as the real
// services do (else the SDK would not accept it), and octet decodes what
// the SDK decodes.
func TestSDKsParseWhatOctetParses(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed: the SDK check needs Node 20")
	}
	for _, pkg := range []string{"openai", "@anthropic-ai/sdk"} {
		if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", pkg)); err != nil {
			t.Skipf("%s not installed: run npm ci in provider/testdata/sdk", pkg)
		}
	}
	type run struct {
		c sdkCase
		w provider.WireAPI
	}
	var runs []run
	sdkSrv := providertest.New(t)
	var args []string
	for _, c := range sdkCases() {
		for _, w := range c.wires {
			runs = append(runs, run{c, w})
			sdkSrv.Enqueue(c.turn(t))
			args = append(args, string(w))
		}
	}
	cmd := exec.Command(node, append([]string{"check.mjs", sdkSrv.URL()}, args...)...)
	cmd.Dir = sdkDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node check.mjs: %v\n%s", err, stderr.Bytes())
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if len(lines) != len(runs) {
		t.Fatalf("the SDKs answered %d of %d requests:\n%s\n%s", len(lines), len(runs), out, stderr.Bytes())
	}
	for i, r := range runs {
		t.Run(string(r.w)+"/"+r.c.name, func(t *testing.T) {
			sdk := sdkSeen(t, r.w, lines[i])
			srv := providertest.New(t)
			srv.Enqueue(r.c.turn(t))
			evs, err := runOn(t, routeTransport(srv, r.w))
			mine := octetSeen(t, evs, err)
			if r.c.streamFault {
				if sdk.OK || mine.OK {
					t.Errorf("a broken stream was accepted: sdk %+v, octet %+v", sdk, mine)
				}
				return
			}
			if diff := cmp.Diff(sdk, mine); diff != "" {
				t.Errorf("the SDK and octet read the response differently (-sdk +octet):\n%s\nsdk line: %s", diff, lines[i])
			}
		})
	}
}

// runOn is run with a simple request.
func runOn(t *testing.T, tr provider.Transport) ([]provider.Event, error) {
	return run(t, tr, simpleRequest())
}

// octetSeen is octet's reading of a response: the completed response
// (or the partial one of an incomplete response) and its deltas.
func octetSeen(t *testing.T, evs []provider.Event, err error) seen {
	var s seen
	var resp *provider.Response
	if err != nil {
		pe := asError(t, err)
		if pe.Class != provider.ResponsesIncomplete {
			s.Status, s.Type = pe.Status, pe.Type
			if pe.HasRetryAfter {
				s.RetryAfter = strconv.Itoa(int(pe.RetryAfter / time.Second))
			}
			return s
		}
		resp, s.Stop = pe.Response, pe.IncompleteReason
	} else {
		resp, s.Stop = completed(t, evs), "completed"
	}
	s.OK = true
	s.Reasoning = deltas(evs, provider.EventReasoningDelta)
	for _, it := range resp.Output {
		switch it.Type {
		case provider.ItemMessage:
			s.Text += it.Text
		case provider.ItemReasoning:
			if sig, ok := strings.CutPrefix(it.EncryptedContent, "anthropic.thinking:"); ok {
				s.Signatures = append(s.Signatures, sig)
			}
		case provider.ItemFunctionCall:
			var in any
			if err := json.Unmarshal([]byte(it.Arguments), &in); err != nil {
				t.Errorf("call %s arguments are not JSON: %q", it.CallID, it.Arguments)
			}
			s.Calls = append(s.Calls, seenCall{ID: it.CallID, Name: it.Name, Input: in})
		}
	}
	if u := resp.Usage; u != nil {
		s.Usage = &provider.Usage{InputTokens: u.InputTokens, CachedTokens: u.CachedTokens, OutputTokens: u.OutputTokens, ReasoningTokens: u.ReasoningTokens}
	}
	return s
}

// sdkSeen reads one line check.mjs printed.
func sdkSeen(t *testing.T, w provider.WireAPI, line []byte) seen {
	var r struct {
		OK    bool            `json:"ok"`
		Final json.RawMessage `json:"final"`
		Error struct {
			Status     int    `json:"status"`
			Type       string `json:"type"`
			RetryAfter string `json:"retryAfter"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatalf("check.mjs printed %q: %v", line, err)
	}
	if !r.OK {
		return seen{Status: r.Error.Status, Type: r.Error.Type, RetryAfter: r.Error.RetryAfter}
	}
	s := seen{OK: true}
	switch w {
	case provider.WireChat:
		sdkChat(t, r.Final, &s)
	case provider.WireAnthropic:
		sdkAnthropic(t, r.Final, &s)
	default:
		sdkResponses(t, r.Final, &s)
	}
	return s
}

func sdkChat(t *testing.T, final json.RawMessage, s *seen) {
	var c struct {
		Reasoning string `json:"reasoning"`
		Choices   []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			CompletionTokens    int64 `json:"completion_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
			CompletionTokensDetails *struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(final, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("chat final %s: %v", final, err)
	}
	ch := c.Choices[0]
	s.Reasoning = c.Reasoning
	if ch.Message.Content != nil {
		s.Text = *ch.Message.Content
	}
	for _, tc := range ch.Message.ToolCalls {
		var in any
		if err := json.Unmarshal([]byte(cmpOr(tc.Function.Arguments, "{}")), &in); err != nil {
			t.Errorf("SDK call arguments %q are not JSON", tc.Function.Arguments)
		}
		s.Calls = append(s.Calls, seenCall{ID: tc.ID, Name: tc.Function.Name, Input: in})
	}
	s.Stop = map[string]string{"length": "max_output_tokens", "content_filter": "content_filter"}[ch.FinishReason]
	if s.Stop == "" {
		s.Stop = "completed"
	}
	if u := c.Usage; u != nil {
		s.Usage = &provider.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
		if u.PromptTokensDetails != nil {
			s.Usage.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
		if u.CompletionTokensDetails != nil {
			s.Usage.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
		}
	}
}

func sdkAnthropic(t *testing.T, final json.RawMessage, s *seen) {
	var m struct {
		Content []struct {
			Type      string `json:"type"`
			Text      string `json:"text"`
			Thinking  string `json:"thinking"`
			Signature string `json:"signature"`
			ID        string `json:"id"`
			Name      string `json:"name"`
			Input     any    `json:"input"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			InputTokens              int64 `json:"input_tokens"`
			CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
			CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
			OutputTokens             int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(final, &m); err != nil {
		t.Fatalf("anthropic final %s: %v", final, err)
	}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			s.Text += b.Text
		case "thinking":
			s.Reasoning += b.Thinking
			s.Signatures = append(s.Signatures, b.Signature)
		case "tool_use":
			s.Calls = append(s.Calls, seenCall{ID: b.ID, Name: b.Name, Input: b.Input})
		}
	}
	s.Stop = map[string]string{"max_tokens": "max_output_tokens", "refusal": "content_filter"}[m.StopReason]
	if s.Stop == "" {
		s.Stop = "completed"
	}
	u := m.Usage
	s.Usage = &provider.Usage{InputTokens: u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens, CachedTokens: u.CacheReadInputTokens, OutputTokens: u.OutputTokens}
}

func sdkResponses(t *testing.T, final json.RawMessage, s *seen) {
	var r struct {
		Output []struct {
			Type      string `json:"type"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Content   []struct {
				Text string `json:"text"`
			} `json:"content"`
			Summary []struct {
				Text string `json:"text"`
			} `json:"summary"`
		} `json:"output"`
		Usage *struct {
			InputTokens        int64 `json:"input_tokens"`
			OutputTokens       int64 `json:"output_tokens"`
			InputTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			OutputTokensDetails struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(final, &r); err != nil {
		t.Fatalf("responses final %s: %v", final, err)
	}
	s.Stop = "completed"
	for _, o := range r.Output {
		switch o.Type {
		case "message":
			for _, c := range o.Content {
				s.Text += c.Text
			}
		case "reasoning":
			for _, p := range o.Summary {
				s.Reasoning += p.Text
			}
		case "function_call":
			var in any
			if err := json.Unmarshal([]byte(o.Arguments), &in); err != nil {
				t.Errorf("SDK call arguments %q are not JSON", o.Arguments)
			}
			s.Calls = append(s.Calls, seenCall{ID: o.CallID, Name: o.Name, Input: in})
		}
	}
	if u := r.Usage; u != nil {
		s.Usage = &provider.Usage{InputTokens: u.InputTokens, CachedTokens: u.InputTokensDetails.CachedTokens, OutputTokens: u.OutputTokens, ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
