package provider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestListModels: GET /models with the key, the ids in the endpoint's
// order without duplicates or names no line could show; a status is a
// typed error.
func TestListModels(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		if r.URL.Path != "/v1/models" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"object":"list","data":[{"id":"b"},{"id":"a"},{"id":"b"},{"id":""},{"id":"x\u001b[2J"},{"id":"` + strings.Repeat("z", 201) + `"},{"id":"c\u0085"},{"id":"ünï"}]}`))
	}))
	defer srv.Close()
	ids, err := NewHTTP(HTTPConfig{BaseURL: srv.URL + "/v1/", APIKey: "sk-k"}).ListModels(context.Background())
	if err != nil || !slices.Equal(ids, []string{"b", "a", "ünï"}) || auth != "Bearer sk-k" {
		t.Errorf("ListModels = %q, %v (auth %q)", ids, err, auth)
	}
	_, err = NewHTTP(HTTPConfig{BaseURL: srv.URL + "/nope", APIKey: "sk-k"}).ListModels(context.Background())
	if pe, ok := errors.AsType[*Error](err); !ok || pe.Status != 404 || strings.Contains(err.Error(), "sk-k") {
		t.Errorf("404: %v", err)
	}
	if _, err := parseModelList([]byte(`<html>`)); err == nil || !strings.Contains(err.Error(), "OpenAI list format") {
		t.Errorf("HTML body: %v", err)
	}
}
