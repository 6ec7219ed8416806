package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// routeCase is a provider route the real binary is pointed at: the
// global config selecting it (with %s for the scripted server's base
// URL) and the variable its key comes from.
type routeCase struct {
	name, config, keyVar, path string
}

var routeCases = []routeCase{
	{name: "anthropic", path: "/v1/messages", keyVar: "ANTHROPIC_API_KEY", config: `model_provider = "anthropic"
model = "scripted-model"
[model_providers.anthropic]
base_url = "%s"
`},
	{name: "chat", path: "/v1/chat/completions", keyVar: "GW_KEY", config: `model_provider = "gw"
model = "scripted-model"
[model_providers.gw]
base_url = "%s"
wire_api = "chat"
env_key = "GW_KEY"
`},
}

// modelTable declares the scripted model: what octet cannot know of it.
const modelTable = `[models."scripted-model"]
context_window = 200000
max_output_tokens = 8000
reasoning = true
images = true
`

// routeEnv is an exec environment whose provider is route c on the
// scripted server: no OpenAI variable, the route's key in its own.
func routeEnv(t *testing.T, c routeCase, turns ...providertest.Turn) *execEnv {
	t.Helper()
	x := newExecEnv(t, turns...)
	delete(x.vars, "OPENAI_BASE_URL")
	delete(x.vars, "OPENAI_API_KEY")
	x.vars[c.keyVar] = fakeKey
	x.writeGlobalConfig(t, fmt.Sprintf(c.config, x.srv.URL())+modelTable)
	if err := os.WriteFile(filepath.Join(x.ws, "b.txt"), []byte("gamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return x
}

// pngImage is a small real PNG image.
func pngImage(t *testing.T, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	for x := range 3 {
		img.Set(x, 1, c)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writePNG writes a small PNG (pngImage) and returns its path.
func writePNG(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "pic.png")
	if err := os.WriteFile(path, pngImage(t, color.Gray{Y: 128}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// get walks a decoded JSON value by object keys and array indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k < 0 {
				k += len(a)
			}
			if k < 0 || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// TestProviderRoutesEndToEnd drives each route through the real binary
// against a loopback server that streams as the real service does:
// reasoning (thinking), text, two parallel tool calls run and their
// results sent back (one of them view_image's image, in the route's
// shape), an image with the prompt, usage. It checks what the model was sent
// in the route's own shapes, what the user was shown, the accounting,
// and that the key never leaves memory.
func TestProviderRoutesEndToEnd(t *testing.T) {
	for _, c := range routeCases {
		t.Run(c.name, func(t *testing.T) {
			x := routeEnv(t, c,
				providertest.Reply(
					providertest.Reasoning("sig-opaque-1", "Let me read both files."),
					providertest.Message("Reading."),
					providertest.FunctionCall("call_1", "read", `{"path":"notes.txt"}`),
					providertest.FunctionCall("call_2", "view_image", `{"path":"pic.png"}`),
				).WithUsage(provider.Usage{InputTokens: 1200, CachedTokens: 1000, OutputTokens: 40}),
				providertest.Text("notes.txt lists alpha and beta; the picture is grey."),
			)
			img := writePNG(t, x.ws)
			r := runBin(t, x.ws, x.vars, "", "exec", "--json", "--image", img, "what is in the files and the picture?")
			if r.code != exitOK {
				t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
			}
			res := parseResult(t, r.stdout)
			if res.Answer != "notes.txt lists alpha and beta; the picture is grey." {
				t.Errorf("answer = %q", res.Answer)
			}
			if res.Usage.Requests != 2 || res.Usage.Input != 1300 || res.Usage.CachedInput != 1000 || !res.Usage.Complete {
				t.Errorf("usage = %+v, want both responses' known usage, complete", res.Usage)
			}
			_, events := parseJSONLines(t, r.stdout)
			var reasoning string
			for _, ev := range eventsOfKind(events, "output_delta") {
				if ev["channel"] == "reasoning" {
					reasoning += ev["text"].(string)
				}
			}
			if reasoning != "Let me read both files." {
				t.Errorf("reasoning shown = %q", reasoning)
			}
			if n := len(eventsOfKind(events, "tool_finished")); n != 2 {
				t.Errorf("%d tools finished, want both parallel calls run", n)
			}

			reqs := x.srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			for _, q := range reqs {
				if q.Path != c.path {
					t.Errorf("request went to %s, want %s", q.Path, c.path)
				}
			}
			// The transcript names the prompt's image and view_image's.
			show := runBin(t, x.ws, x.vars, "", "sessions", "show", res.SessionID)
			if n := strings.Count(show.stdout, "[image] image/png, "); show.code != exitOK || n != 2 {
				t.Errorf("sessions show: exit %d, %d images named, want 2:\n%s", show.code, n, show.stdout)
			}
			switch c.name {
			case "anthropic":
				checkAnthropicRequests(t, reqs)
			case "chat":
				checkChatRequests(t, reqs)
			}
			assertNoSecret(t, []string{r.stdout, r.stderr}, x.home)
		})
	}
}

func checkAnthropicRequests(t *testing.T, reqs []providertest.Request) {
	t.Helper()
	first, second := reqs[0].Body, reqs[1].Body
	if reqs[0].Header.Get("X-Api-Key") != "[REDACTED]" || reqs[0].Header.Get("Authorization") != "" || reqs[0].Header.Get("Anthropic-Version") != provider.AnthropicVersion {
		t.Errorf("headers = %v, want the key in x-api-key and anthropic-version", reqs[0].Header)
	}
	if get(first, "system", 0, "cache_control", "type") != "ephemeral" || get(first, "max_tokens") != 8000.0 || get(first, "thinking", "type") != "enabled" {
		t.Errorf("request settings: system %v, max_tokens %v, thinking %v", get(first, "system", 0, "cache_control"), get(first, "max_tokens"), get(first, "thinking"))
	}
	if get(first, "tools", 0, "input_schema", "type") != "object" {
		t.Errorf("tools = %v, want input_schema", get(first, "tools"))
	}
	img := get(first, "messages", 0, "content", -1) // after the environment context and the prompt's text
	if get(img, "type") != "image" || get(img, "source", "type") != "base64" || get(img, "source", "media_type") != "image/png" {
		t.Errorf("the image block = %v", img)
	}
	asst := get(second, "messages", 1)
	want := []string{"thinking", "text", "tool_use", "tool_use"}
	for i, typ := range want {
		if get(asst, "content", i, "type") != typ {
			t.Fatalf("assistant message = %v, want blocks %v", asst, want)
		}
	}
	if get(asst, "content", 0, "signature") != "sig-opaque-1" || get(asst, "content", 0, "thinking") != "Let me read both files." {
		t.Errorf("thinking not sent back as received: %v", get(asst, "content", 0))
	}
	if get(asst, "content", 3, "input", "path") != "pic.png" {
		t.Errorf("tool_use input = %v", get(asst, "content", 3))
	}
	results := get(second, "messages", 2)
	for i, id := range []string{"call_1", "call_2"} {
		b := get(results, "content", i)
		if get(b, "type") != "tool_result" || get(b, "tool_use_id") != id {
			t.Errorf("result block %d = %v", i, b)
		}
	}
	if s, _ := get(results, "content", 0, "content").(string); !strings.Contains(s, "alpha") {
		t.Errorf("the first result does not carry the file: %q", s)
	}
	// view_image's result: its text and the image, inside the tool_result.
	viewed := get(results, "content", 1, "content", -1)
	if get(viewed, "type") != "image" || get(viewed, "source", "media_type") != "image/png" || get(viewed, "source", "data") != get(img, "source", "data") {
		t.Errorf("view_image's result = %v, want the picture as an image block", get(results, "content", 1))
	}
	if get(results, "content", -1, "cache_control", "type") != "ephemeral" {
		t.Errorf("no cache breakpoint on the last block: %v", get(results, "content", -1))
	}
}

func checkChatRequests(t *testing.T, reqs []providertest.Request) {
	t.Helper()
	first, second := reqs[0].Body, reqs[1].Body
	if reqs[0].Header.Get("Authorization") != "[REDACTED]" {
		t.Errorf("headers = %v, want the key as a bearer token", reqs[0].Header)
	}
	if get(first, "stream_options", "include_usage") != true || get(first, "max_completion_tokens") != 8000.0 || get(first, "reasoning_effort") != "medium" {
		t.Errorf("request settings: %v %v %v", get(first, "stream_options"), get(first, "max_completion_tokens"), get(first, "reasoning_effort"))
	}
	if get(first, "messages", 0, "role") != "system" || get(first, "tools", 0, "type") != "function" {
		t.Errorf("system prompt or tools: %v, %v", get(first, "messages", 0, "role"), get(first, "tools", 0))
	}
	// messages: system, environment context, the prompt with its image.
	if u, _ := get(first, "messages", 2, "content", 1, "image_url", "url").(string); !strings.HasPrefix(u, "data:image/png;base64,") {
		t.Errorf("the image part = %v", get(first, "messages", 2, "content"))
	}
	msgs := get(second, "messages").([]any)
	asst := msgs[3]
	if get(asst, "role") != "assistant" || get(asst, "content") != "Reading." || get(asst, "tool_calls", 1, "id") != "call_2" || get(asst, "tool_calls", 1, "function", "name") != "view_image" {
		t.Errorf("assistant message = %v", asst)
	}
	for i, id := range []string{"call_1", "call_2"} {
		m := msgs[4+i]
		if get(m, "role") != "tool" || get(m, "tool_call_id") != id {
			t.Errorf("tool message %d = %v", i, m)
		}
	}
	if s, _ := get(msgs[4], "content").(string); !strings.Contains(s, "alpha") {
		t.Errorf("the first result does not carry the file: %q", s)
	}
	// A tool message carries only text: view_image's image follows the
	// tool messages in a user message.
	if len(msgs) != 7 || get(msgs[6], "role") != "user" || get(msgs[6], "content", 1, "image_url", "url") != get(first, "messages", 2, "content", 1, "image_url", "url") {
		t.Errorf("view_image's image after the tool messages = %v", msgs[6:])
	}
	raw, _ := json.Marshal(second)
	if strings.Contains(string(raw), "Let me read both files.") {
		t.Errorf("reasoning was sent back on the chat route: %s", raw)
	}
}

// TestProviderRouteFaults: every fault of an unqualified route ends the
// run with a typed failure named on stderr, after exactly one request (no
// body is ever replayed), with usage marked unknown where the request
// may have been accepted, and the key nowhere.
func TestProviderRouteFaults(t *testing.T) {
	cases := []struct {
		name      string
		turn      providertest.Turn
		stderr    []string
		uncertain bool
	}{
		{"429 retry-after", providertest.Status(429, "rate_limit_error", "", "Number of requests has exceeded your rate limit").WithRetryAfter("7"),
			[]string{"http status 429", "rate-limited the request (HTTP 429); it asks to wait 7s before trying again", "run the prompt again"}, false},
		{"529 overloaded", providertest.Status(529, "overloaded_error", "", "Overloaded"),
			[]string{"http status 529", "is overloaded or failing (HTTP 529)"}, true},
		{"503", providertest.Status(503, "api_error", "", "upstream connect error"), []string{"http status 503"}, true},
		{"cut body", providertest.Text("a long answer that is cut short").DropAfter(4), []string{"body interrupted", "broke off", "run the prompt again"}, true},
		{"malformed chunk", providertest.Text("a long answer with a broken chunk").MalformedAt(3), []string{"stream failure (decode json)", "run the prompt again"}, true},
		{"error event", providertest.FailedAfter("overloaded_error", "Overloaded", providertest.Message("par")), []string{"responses failed", "Overloaded", "run the prompt again"}, true},
		{"no answer", providertest.Refuse(), []string{"did not answer the request", "run the prompt again"}, true},
		{"quota 429", providertest.Status(429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota"),
			[]string{"http status 429", "no quota for this request (insufficient_quota): check the plan and billing of the key in"}, false},
	}
	for _, rc := range routeCases {
		for _, c := range cases {
			t.Run(rc.name+"/"+c.name, func(t *testing.T) {
				x := routeEnv(t, rc, c.turn)
				r := runBin(t, x.ws, x.vars, "", "exec", "hello")
				if r.code != exitFailed {
					t.Fatalf("exit %d, want %d\nstderr: %s", r.code, exitFailed, r.stderr)
				}
				for _, s := range c.stderr {
					if !strings.Contains(r.stderr, s) {
						t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
					}
				}
				if strings.Contains(r.stderr, "↻") {
					t.Errorf("an unqualified route retried:\n%s", r.stderr)
				}
				if n := len(x.srv.Requests()); n != 1 {
					t.Errorf("%d requests, want exactly 1", n)
				}
				if got := strings.Contains(r.stderr, "usage is now uncertain"); got != c.uncertain {
					t.Errorf("usage uncertain = %v, want %v:\n%s", got, c.uncertain, r.stderr)
				}
				assertNoSecret(t, []string{r.stdout, r.stderr}, x.home)
			})
		}
	}
}

// TestLocalPresetsOnTheirDefaultPaths: the ollama and lmstudio presets
// reach a Chat Completions server at their default base URL's path
// (…/v1/chat/completions) with no key at all. The server listens on the
// preset's own port when it is free (the preset is then used unchanged);
// otherwise on another port with only the host and port overridden.
func TestLocalPresetsOnTheirDefaultPaths(t *testing.T) {
	for _, c := range []struct{ name, addr, reasoningField string }{
		{"ollama", "127.0.0.1:11434", "reasoning"},
		{"lmstudio", "127.0.0.1:1234", "reasoning_content"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := providertest.NewAt(t, c.addr)
			config := "model_provider = \"" + c.name + "\"\n"
			if err != nil {
				t.Logf("port of the preset taken (%v): overriding only the host and port", err)
				srv = providertest.New(t)
				config += "[model_providers." + c.name + "]\nbase_url = \"" + srv.URL() + "\"\n"
			}
			srv.Enqueue(providertest.Reply(providertest.Reasoning("", "Thinking locally."), providertest.Message("Hello from a local model.")).ChatReasoningField(c.reasoningField))
			home, ws := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config+"model = \"llama3.2\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := runBin(t, ws, map[string]string{"OCTET_HOME": home}, "", "exec", "hi")
			if r.code != exitOK || r.stdout != "Hello from a local model.\n" {
				t.Fatalf("exit %d, stdout %q\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, "Thinking locally.") {
				t.Errorf("the reasoning is not shown:\n%s", r.stderr)
			}
			if !strings.Contains(r.stderr, `model "llama3.2": context window unknown; assuming 128000 tokens`) {
				t.Errorf("the assumed window is not said:\n%s", r.stderr)
			}
			q := srv.Requests()
			if len(q) != 1 || q[0].Path != "/v1/chat/completions" {
				t.Fatalf("requests = %+v, want one to /v1/chat/completions", q)
			}
			if len(q[0].Header.Values("Authorization")) != 0 {
				t.Errorf("a keyless preset sent Authorization: %v", q[0].Header)
			}
			for _, k := range []string{"max_tokens", "max_completion_tokens"} {
				if _, bounded := q[0].Body[k]; bounded {
					t.Errorf("%s %v sent for a model whose limits are unknown", k, q[0].Body[k])
				}
			}
		})
	}
}

// TestAzureRequest: the azure preset sends the key in api-key, never as
// Authorization, with api-version in the query, to the resource's
// Responses path; the recorded request shows both.
func TestAzureRequest(t *testing.T) {
	x := newExecEnv(t, providertest.Text("hello from azure"))
	delete(x.vars, "OPENAI_BASE_URL")
	delete(x.vars, "OPENAI_API_KEY")
	x.vars["AZURE_OPENAI_API_KEY"] = fakeKey
	base := strings.TrimSuffix(x.srv.URL(), "/v1") + "/openai"
	x.writeGlobalConfig(t, "model_provider = \"azure\"\nmodel = \"gpt-5.1-codex\"\n[model_providers.azure]\nbase_url = \""+base+"\"\n")
	r := runBin(t, x.ws, x.vars, "", "exec", "hi")
	if r.code != exitOK || r.stdout != "hello from azure\n" {
		t.Fatalf("exit %d stdout %q\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	q := x.srv.Requests()[0]
	if q.Path != "/openai/responses" || q.Query.Get("api-version") != "2025-04-01-preview" {
		t.Errorf("request to %s?%s, want /openai/responses?api-version=2025-04-01-preview", q.Path, q.Query.Encode())
	}
	if q.Header.Get("Api-Key") != "[REDACTED]" || len(q.Header.Values("Authorization")) != 0 {
		t.Errorf("headers = %v, want the key in api-key only", q.Header)
	}
	assertNoSecret(t, []string{r.stdout, r.stderr}, x.home)
}

// responsesRoute is the default provider's (qualified) Responses route
// on the scripted server, as routeCases are the others.
var responsesRoute = routeCase{name: "responses", path: "/v1/responses", keyVar: "OPENAI_API_KEY", config: `model = "scripted-model"
[model_providers.openai]
base_url = "%s"
`}

// TestExecLocalServerNotRunning: on every route, a refused connection to
// a loopback endpoint is reported at once, with no retry, on the
// qualified route too (it used to be retried 29 times over about six
// minutes).
func TestExecLocalServerNotRunning(t *testing.T) {
	for _, c := range append([]routeCase{responsesRoute}, routeCases...) {
		t.Run(c.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			closed := "http://" + ln.Addr().String() + "/v1"
			ln.Close()
			x := routeEnv(t, c)
			x.writeGlobalConfig(t, fmt.Sprintf(c.config, closed)+modelTable)
			r := runBin(t, x.ws, x.vars, "", "exec", "hi")
			if r.code != exitFailed || strings.Contains(r.stderr, "↻") || !strings.Contains(r.stderr, "is the server running?") {
				t.Fatalf("exit %d, want a failure without retries asking whether the server runs:\n%s", r.code, r.stderr)
			}
		})
	}
}

// TestExecNotAnEventStream: on every route, a base URL that answers 200
// with an HTML page is a configuration error named with the URL and the
// content type after one request, with no usage uncertainty (it used to
// be replaced eleven times, then reported as possibly billed).
func TestExecNotAnEventStream(t *testing.T) {
	api := map[string]string{"responses": "Responses", "chat": "Chat Completions", "anthropic": "Messages"}
	for _, c := range append([]routeCase{responsesRoute}, routeCases...) {
		t.Run(c.name, func(t *testing.T) {
			x := routeEnv(t, c, providertest.NotEventStream("text/html; charset=utf-8", "<!doctype html><title>Sign in</title>"))
			r := runBin(t, x.ws, x.vars, "", "exec", "hi")
			if r.code != exitFailed {
				t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
			}
			url := strings.TrimSuffix(x.srv.URL(), "/v1") + c.path
			for _, want := range []string{url + ` answered with Content-Type "text/html; charset=utf-8", not an event stream`, "does not look like a " + api[c.name] + " API root"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
			if n := len(x.srv.Requests()); n != 1 || strings.Contains(r.stderr, "↻") || strings.Contains(r.stderr, "uncertain") {
				t.Errorf("%d requests, want 1, no retry and no uncertainty:\n%s", n, r.stderr)
			}
		})
	}
}

// TestExecRetryBoundShown: max_retry_wait_secs bounds all the time a turn
// spends retrying, each retry says when it gives up, and a Retry-After
// that ends past the bound fails the run at once.
func TestExecRetryBoundShown(t *testing.T) {
	x := newExecEnv(t,
		providertest.Status(503, "server_error", "", "busy").WithRetryAfter("1"),
		providertest.Status(503, "server_error", "", "busy").WithRetryAfter("30"),
		providertest.Text("never reached"),
	)
	x.writeGlobalConfig(t, "runtime_profile = \"codex\"\nmax_retry_wait_secs = 5\n")
	r := runBin(t, x.ws, x.vars, "", "exec", "hi")
	if r.code != exitFailed {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "retrying 1/29 in 1000ms (gives up in 5s)") {
		t.Errorf("the retry does not show its bound:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "the next attempt would wait 30s, past the 5s bound (max_retry_wait_secs)") {
		t.Errorf("the bound's end is not explained:\n%s", r.stderr)
	}
	if n := len(x.srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// TestExecImageNeedsAModelThatTakesImages: --image with a model octet
// does not know to accept images is a usage error before anything runs.
func TestExecImageNeedsAModelThatTakesImages(t *testing.T) {
	x := newExecEnv(t)
	img := writePNG(t, x.ws)
	r := runBin(t, x.ws, x.vars, "", "exec", "--model", "local-model", "--image", img, "hi")
	if r.code != exitUsage || !strings.Contains(r.stderr, `declare images = true in [models."local-model"]`) || len(x.srv.Requests()) != 0 {
		t.Fatalf("exit %d, %d requests\nstderr: %s", r.code, len(x.srv.Requests()), r.stderr)
	}
	if err := os.WriteFile(filepath.Join(x.ws, "not.png"), []byte("plain text"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runBin(t, x.ws, x.vars, "", "exec", "--image", "not.png", "hi")
	if r.code != exitUsage || !strings.Contains(r.stderr, "not a PNG, JPEG, GIF or WebP image") {
		t.Fatalf("a text file as an image: exit %d\nstderr: %s", r.code, r.stderr)
	}
}

// TestExecImageMissingFile: --image naming a file that does not exist is
// a usage error saying there is no such file (it said "no such
// directory", which sends the user looking for the wrong thing).
func TestExecImageMissingFile(t *testing.T) {
	x := newExecEnv(t)
	r := runBin(t, x.ws, x.vars, "", "exec", "--image", "shot.png", "hi")
	if r.code != exitUsage || !strings.Contains(r.stderr, `"shot.png" for flag --image: no such file`) || strings.Contains(r.stderr, "directory") {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	r = runBin(t, x.ws, x.vars, "", "exec", "--cd", "nowhere", "hi")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--cd nowhere: no such directory") {
		t.Fatalf("--cd: exit %d\nstderr: %s", r.code, r.stderr)
	}
}

// TestProviderKeysNotInCommandEnvironment: a bash command the model runs
// gets no provider key variable, the selected route's or any other's
// (before, only OPENAI_API_KEY was kept from commands).
func TestProviderKeysNotInCommandEnvironment(t *testing.T) {
	for _, c := range routeCases {
		t.Run(c.name, func(t *testing.T) {
			x := routeEnv(t, c,
				providertest.Reply(providertest.FunctionCall("call_env", "bash", `{"command":"env"}`)),
				providertest.Text("done"),
			)
			x.vars["OPENROUTER_API_KEY"] = "sk-or-not-for-commands"
			x.vars["OCTET_MARKER"] = "visible-marker"
			r := runBin(t, x.ws, x.vars, "", "exec", "--approve", "run env")
			if r.code != exitOK {
				t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
			}
			reqs := x.srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			sent := string(reqs[1].Raw)
			if !strings.Contains(sent, "OCTET_MARKER=visible-marker") {
				t.Fatalf("the env output did not reach the model: %s", sent)
			}
			for _, v := range []string{c.keyVar + "=", "OPENROUTER_API_KEY=", "ANTHROPIC_API_KEY=", "sk-or-not-for-commands"} {
				if strings.Contains(sent, v) {
					t.Errorf("a command saw %s", v)
				}
			}
			assertNoSecret(t, []string{r.stdout, r.stderr, sent}, x.home)
		})
	}
}

// TestProviderRouteOutputLimit: a response that stops at the output limit
// while emitting a tool call (finish_reason length, stop_reason
// max_tokens) is handled as the seeds say on every route: the assistant
// message is kept, the call is answered with an error without running,
// and a corrective continuation asks for it again.
func TestProviderRouteOutputLimit(t *testing.T) {
	for _, c := range routeCases {
		t.Run(c.name, func(t *testing.T) {
			x := routeEnv(t, c,
				providertest.Incomplete("max_output_tokens", providertest.Message("Writing the file."), providertest.FunctionCall("call_w", "write", `{"path":"out.txt","content":"partial`)),
				providertest.Text("I will write it in smaller pieces."),
			)
			r := runBin(t, x.ws, x.vars, "", "exec", "--approve", "write out.txt")
			if r.code != exitOK || !strings.Contains(r.stdout, "I will write it in smaller pieces.") {
				t.Fatalf("exit %d stdout %q\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(x.ws, "out.txt")); err == nil {
				t.Error("the truncated call ran")
			}
			reqs := x.srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			sent := string(reqs[1].Raw)
			for _, want := range []string{"call_w", "reached its output token limit while emitting tool calls", "Reissue the tool calls"} {
				if !strings.Contains(sent, want) {
					t.Errorf("the continuation lacks %q: %s", want, sent)
				}
			}
		})
	}
}

// TestCeilingCountsUnreportedUsage: under max_session_tokens, a route
// whose responses report no usage (a gateway that ignores
// stream_options.include_usage) cannot be counted: the first such
// response makes usage uncertain and the next request is refused, on the
// Responses (qualified) and Chat (unqualified) routes, instead of running
// uncounted past the ceiling. (Anthropic's message_start always carries
// usage.)
func TestCeilingCountsUnreportedUsage(t *testing.T) {
	for _, rc := range []routeCase{{name: "responses"}, routeCases[1]} {
		t.Run(rc.name, func(t *testing.T) {
			turns := []providertest.Turn{
				providertest.Reply(providertest.FunctionCall("call_1", "read", `{"path":"notes.txt"}`)).WithoutUsage(),
				providertest.Text("never reached").WithoutUsage(),
			}
			var x *execEnv
			if rc.name == "responses" {
				x = newExecEnv(t, turns...)
			} else {
				x = routeEnv(t, rc, turns...)
			}
			// A top-level key goes before the route's tables.
			old, _ := os.ReadFile(filepath.Join(x.home, "config.toml"))
			x.writeGlobalConfig(t, "max_session_tokens = 100000\n"+string(old))
			r := runCLI(t, x.ws, x.vars, "exec", "hi")
			if r.code != exitFailed || !strings.Contains(r.stderr, "without reporting its usage") {
				t.Fatalf("exit %d, want a ceiling refusal naming the cause:\n%s", r.code, r.stderr)
			}
			if n := len(x.srv.Requests()); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
		})
	}
}
