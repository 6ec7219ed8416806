package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"
)

// Bounds of a model list: an endpoint that lists more, longer names or a
// bigger body than this is cut to them (OpenAI lists about a hundred
// models in a few kilobytes; OpenRouter several hundred with metadata).
const (
	maxListBody     = 8 << 20
	maxListedModels = 2000
	maxModelID      = 200
	listTimeout     = 10 * time.Second
)

// ListModels asks the endpoint which models it serves: GET BaseURL +
// "/models" with the route's headers, key and query parameters (and, on
// the Anthropic route, limit=1000: its list comes in pages), the OpenAI
// list format ({"data": [{"id": …}]}) that OpenAI-compatible servers
// (Azure, OpenRouter, Ollama, LM Studio, vLLM) and Anthropic's Messages
// API also answer. It returns the ids in the endpoint's order, without
// duplicates or names no request could carry (empty, over 200 bytes,
// invalid UTF-8 or control characters). A failure is an [*Error] (an HTTP
// status, say 404 for an endpoint without a list) or the body's decoding
// error; the whole call is bounded by 10 s and ctx.
func (h *HTTP) ListModels(ctx context.Context) ([]string, error) {
	key, aerr := credential(ctx, h.cfg.APIKey, h.cfg.Credential, h.noAuth)
	if aerr != nil {
		return nil, aerr
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	query := h.cfg.Query
	if h.cfg.Wire == WireAnthropic {
		// Anthropic pages its list, 20 models by default: one page of
		// the most it gives.
		query = url.Values{"limit": {"1000"}}
		for k, v := range h.cfg.Query {
			query[k] = v
		}
	}
	listURL := requestURL(h.cfg.BaseURL, "/models", query)
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, listURL, nil)
	if err != nil {
		return nil, &Error{Phase: PreSend, Class: InvalidRequest, Err: scrubErr(fmt.Errorf("build model list request: %w", err), key)}
	}
	h.setHeaders(hr, key)
	hr.Header.Set("Accept", "application/json")
	resp, err := h.client.Do(hr)
	if err != nil {
		class := ResponseHeaders
		if isDialError(err) {
			class = Connect
		}
		return nil, &Error{Phase: Opening, Class: class, Err: scrubErr(err, key)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, statusError(resp, key)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListBody+1))
	if err != nil {
		return nil, fmt.Errorf("read the model list from %s: %w", RedactURL(listURL), scrubErr(err, key))
	}
	if len(body) > maxListBody {
		return nil, fmt.Errorf("the model list from %s is over %d bytes", RedactURL(listURL), maxListBody)
	}
	return parseModelList(body)
}

// parseModelList decodes an OpenAI model list body into its valid ids.
func parseModelList(body []byte) ([]string, error) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("the model list is not the OpenAI list format ({\"data\": [{\"id\": …}]}): %w", err)
	}
	seen := make(map[string]bool, len(list.Data))
	ids := make([]string, 0, min(len(list.Data), maxListedModels))
	for _, m := range list.Data {
		if len(ids) == maxListedModels {
			break
		}
		if !validModelID(m.ID) || seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// validModelID reports whether id can name a model in a request and on
// an editor's or terminal's line: not empty, at most 200 bytes, valid
// UTF-8 without control characters.
func validModelID(id string) bool {
	if id == "" || len(id) > maxModelID || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}
