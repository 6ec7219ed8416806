//go:build unix

package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// catalogRow is one model of octet/models or `octet models --json`.
type catalogRow struct {
	ID              string
	ContextWindow   *int
	MaxOutputTokens *int
	Reasoning       *bool
	Images          *bool
	Prices          *struct{ Input string }
	Listed          *bool
}

type catalogResult struct {
	Models    []catalogRow
	Default   string
	ListError string
}

func (c catalogResult) model(t *testing.T, id string) catalogRow {
	t.Helper()
	for _, m := range c.Models {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("model %s not in the catalog %+v", id, c.Models)
	return catalogRow{}
}

// TestModelsCatalogFromEndpoint: `octet models` and octet/models list the
// endpoint's models (GET /v1/models) merged with octet's table: a model
// octet does not know is listed with its limits and capabilities null
// (unknown), a dated snapshot of a known one with the known figures,
// table models the endpoint does not list are marked so; a listed
// unknown model is selectable (session/new, setModel) and the requests
// then name it; an unlisted unknown name is refused saying so.
func TestModelsCatalogFromEndpoint(t *testing.T) {
	srv := providertest.New(t)
	srv.SetModels("gpt-5", "llama-3.3-local", "gpt-5-mini-2025-08-07", "bad\x1bname")
	home, ws := t.TempDir(), t.TempDir()
	vars := map[string]string{"OCTET_HOME": home, "OPENAI_BASE_URL": srv.URL(), "OPENAI_API_KEY": fakeKey}

	r := runBin(t, ws, vars, "", "models", "--json")
	if r.code != 0 {
		t.Fatalf("octet models --json: %d\n%s", r.code, r.stderr)
	}
	var cat catalogResult
	if err := json.Unmarshal([]byte(r.stdout), &cat); err != nil {
		t.Fatalf("octet models --json: %v\n%s", err, r.stdout)
	}
	if ids := catalogIDs(cat); strings.Join(ids[:3], ",") != "gpt-5,llama-3.3-local,gpt-5-mini-2025-08-07" || strings.Contains(strings.Join(ids, ","), "bad") {
		t.Errorf("listed models are not first in the endpoint's order (a name with a control character dropped): %v", ids)
	}
	if m := cat.model(t, "llama-3.3-local"); m.ContextWindow != nil || m.MaxOutputTokens != nil || m.Reasoning != nil || m.Images != nil || m.Prices != nil || m.Listed == nil || !*m.Listed {
		t.Errorf("unknown listed model: %+v, want null limits and capabilities, listed", m)
	}
	if m := cat.model(t, "gpt-5-mini-2025-08-07"); m.ContextWindow == nil || *m.ContextWindow != 400_000 || m.Images == nil || !*m.Images {
		t.Errorf("a dated snapshot of a known model: %+v, want its known figures", m)
	}
	if m := cat.model(t, "gpt-4.1"); m.Listed == nil || *m.Listed || m.ContextWindow == nil {
		t.Errorf("a table model the endpoint does not list: %+v, want listed false", m)
	}
	if srv.ModelListRequests() != 1 || len(srv.Requests()) != 0 {
		t.Errorf("model list requests %d, responses requests %d", srv.ModelListRequests(), len(srv.Requests()))
	}
	r = runBin(t, ws, vars, "", "models")
	if !strings.Contains(r.stdout, "LISTED") || !rowHas(r.stdout, "llama-3.3-local", "unknown  unknown  unknown") || !rowHas(r.stdout, "gpt-4.1", "no") {
		t.Errorf("octet models table:\n%s", r.stdout)
	}

	// The LSP dialect: the same catalog, and the listed model selectable.
	srv.Enqueue(providertest.Text("one"), providertest.Text("two"))
	cmd := lspCommand(t, 60*time.Second)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+srv.URL(), "OPENAI_API_KEY="+fakeKey)
	c, stdin, stderr := startLSP(t, cmd)
	defer func() { stdin.Close(); cmd.Wait() }()
	c.call("initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws,
		"capabilities": map[string]any{"experimental": map[string]any{"octet": map[string]any{"events": false}}}}, nil, nil)
	c.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	// Before any listing: session/new names a model only the endpoint knows.
	sid, _ := c.call("octet/session/new", map[string]any{"cwd": ws, "model": "llama-3.3-local"}, nil, nil)["sessionId"].(string)
	if res := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "hi"}, nil, nil); res["outcome"] != "completed" {
		t.Fatalf("prompt: %v\n%s", res, stderr)
	}
	raw, _ := json.Marshal(c.call("octet/models", map[string]any{}, nil, nil))
	var lsp catalogResult
	json.Unmarshal(raw, &lsp)
	if m := lsp.model(t, "llama-3.3-local"); m.ContextWindow != nil || m.Listed == nil || !*m.Listed {
		t.Errorf("octet/models: %+v", m)
	}
	c.call("octet/setModel", map[string]any{"sessionId": sid, "model": "gpt-5-mini-2025-08-07"}, nil, nil)
	if res := c.call("octet/prompt", map[string]any{"sessionId": sid, "text": "again"}, nil, nil); res["outcome"] != "completed" {
		t.Fatalf("prompt: %v", res)
	}
	if err := c.callError("octet/session/new", map[string]any{"cwd": ws, "model": "gpt-nonesuch"}); err["code"] != float64(-32602) ||
		!strings.Contains(err["message"].(string), `unknown model "gpt-nonesuch"`) {
		t.Errorf("session/new of a name nobody knows: %v", err)
	}
	if err := c.callError("octet/setModel", map[string]any{"sessionId": sid, "model": "gpt-nonesuch"}); err["code"] != float64(-32602) ||
		!strings.Contains(err["message"].(string), "the endpoint does not list it either") {
		t.Errorf("setModel of a name nobody knows: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Body["model"] != "llama-3.3-local" || reqs[1].Body["model"] != "gpt-5-mini-2025-08-07" {
		t.Errorf("requests name %v, %v", reqs[0].Body["model"], reqs[len(reqs)-1].Body["model"])
	}
	if _, ok := reqs[0].Body["reasoning"]; ok {
		t.Errorf("a model octet knows nothing of was sent reasoning controls: %v", reqs[0].Body["reasoning"])
	}
}

// TestModelsWithoutEndpointList: an endpoint without a model list (404)
// leaves octet's own table, and says why on stderr.
func TestModelsWithoutEndpointList(t *testing.T) {
	srv := providertest.New(t)
	vars := map[string]string{"OCTET_HOME": t.TempDir(), "OPENAI_BASE_URL": srv.URL(), "OPENAI_API_KEY": fakeKey}
	r := runBin(t, t.TempDir(), vars, "", "models")
	if r.code != 0 || !rowHas(r.stdout, "gpt-5-mini", "400K") || strings.Contains(r.stdout, "LISTED") ||
		!strings.Contains(r.stderr, "did not list its models") || !strings.Contains(r.stderr, "404") {
		t.Errorf("octet models without a list: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func catalogIDs(c catalogResult) []string {
	var ids []string
	for _, m := range c.Models {
		ids = append(ids, m.ID)
	}
	return ids
}

// rowHas reports whether the table row of model holds want.
func rowHas(table, model, want string) bool {
	for l := range strings.Lines(table) {
		if strings.HasPrefix(l, model+" ") && strings.Contains(l, want) {
			return true
		}
	}
	return false
}

// callError sends a request that must fail and returns its error object.
func (c *lspClient) callError(method string, params any) map[string]any {
	c.t.Helper()
	m := c.exchange(method, params, nil, nil)
	e, _ := m["error"].(map[string]any)
	if e == nil {
		c.t.Fatalf("%s succeeded: %v", method, m["result"])
	}
	return e
}

// TestModelsFromTheProvidersEndpoint: octet models lists what the
// selected provider's endpoint serves, asked the way its route asks
// (Anthropic's key in x-api-key with anthropic-version, a chat gateway's
// bearer key, Azure's api-key and api-version), merged with the
// [models."NAME"] tables: a declared model with what its table says, a
// listed model nobody describes with its facts unknown.
func TestModelsFromTheProvidersEndpoint(t *testing.T) {
	azure := routeCase{name: "azure", keyVar: "AZURE_OPENAI_API_KEY", config: `model_provider = "azure"
model = "scripted-model"
[model_providers.azure]
base_url = "%s"
`}
	for _, c := range append(routeCases[:len(routeCases):len(routeCases)], azure) {
		t.Run(c.name, func(t *testing.T) {
			x := routeEnv(t, c)
			x.srv.SetModels("scripted-model", "served-only")
			r := runBin(t, x.ws, x.vars, "", "models", "--json")
			var cat catalogResult
			if err := json.Unmarshal([]byte(r.stdout), &cat); r.code != 0 || err != nil || cat.ListError != "" {
				t.Fatalf("octet models --json: exit %d, %v, listError %q\nstderr: %s", r.code, err, cat.ListError, r.stderr)
			}
			if m := cat.model(t, "scripted-model"); cat.Default != "scripted-model" || m.ContextWindow == nil || *m.ContextWindow != 200000 ||
				m.Images == nil || !*m.Images || m.Listed == nil || !*m.Listed {
				t.Errorf("the declared model: %+v (default %q), want its table's facts, listed", m, cat.Default)
			}
			if m := cat.model(t, "served-only"); m.ContextWindow != nil || m.Images != nil || m.Listed == nil || !*m.Listed {
				t.Errorf("a model only the endpoint lists: %+v, want unknown facts, listed", m)
			}
			lists := x.srv.ModelLists()
			if len(lists) != 1 {
				t.Fatalf("%d model list requests, want 1", len(lists))
			}
			h, q := lists[0].Header, lists[0].Query
			switch c.name {
			case "anthropic":
				if h.Get("X-Api-Key") != "[REDACTED]" || h.Get("Anthropic-Version") != provider.AnthropicVersion || h.Get("Authorization") != "" {
					t.Errorf("anthropic list request headers %v", h)
				}
				if q.Get("limit") != "1000" { // a page holds 20 models by default
					t.Errorf("anthropic list request query %v, want limit=1000", q)
				}
			case "chat":
				if h.Get("Authorization") != "[REDACTED]" {
					t.Errorf("chat list request headers %v", h)
				}
			case "azure":
				if h.Get("Api-Key") != "[REDACTED]" || h.Get("Authorization") != "" || q.Get("api-version") != "2025-04-01-preview" {
					t.Errorf("azure list request headers %v, query %v", h, q)
				}
			}
			assertNoSecret(t, []string{r.stdout, r.stderr}, x.home)
		})
	}
}
