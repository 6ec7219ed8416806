package provider_test

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
)

func compactRequest() *provider.Request {
	return &provider.Request{Model: "m", Instructions: "be brief", PromptCacheKey: "sess", Compact: true,
		Input: []provider.Item{{Type: provider.ItemMessage, Role: "user", Text: "first"}, {Type: provider.ItemMessage, Role: "assistant", Text: "answer"}}}
}

// TestCompactEndpoint: a native compaction is a POST to
// …/responses/compact of model, instructions, input and
// prompt_cache_key only; its JSON object is read as its output items
// (the user messages kept, the opaque compaction item) and a completion
// with the usage.
func TestCompactEndpoint(t *testing.T) {
	srv := pt.New(t)
	srv.Enqueue(pt.Compacted("opaque-1", "first").WithUsage(provider.Usage{InputTokens: 4000, OutputTokens: 300}))
	tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey})
	st, err := tr.Open(context.Background(), compactRequest())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var done []provider.Item
	var resp *provider.Response
	for resp == nil {
		ev, err := st.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case provider.EventItemDone:
			done = append(done, *ev.Item)
		case provider.EventCompleted:
			resp = ev.Response
		}
	}
	if _, err := st.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("after the completion: %v", err)
	}
	if len(resp.Output) != 2 || resp.Output[0].Type != provider.ItemMessage || resp.Output[0].Role != "user" || resp.Output[0].Text != "first" ||
		resp.Output[1].Type != provider.ItemCompaction || resp.Output[1].EncryptedContent != "opaque-1" || len(done) != 2 {
		t.Fatalf("output %+v (items done %d)", resp.Output, len(done))
	}
	if resp.Usage == nil || resp.Usage.InputTokens != 4000 || resp.Usage.OutputTokens != 300 {
		t.Fatalf("usage %+v", resp.Usage)
	}
	req := srv.Requests()[0]
	if !strings.HasSuffix(req.Path, "/responses/compact") {
		t.Fatalf("path %s", req.Path)
	}
	var keys []string
	for k := range req.Body {
		keys = append(keys, k)
	}
	if len(keys) != 4 || req.Body["model"] != "m" || req.Body["instructions"] != "be brief" || req.Body["prompt_cache_key"] != "sess" || len(req.Input()) != 2 {
		t.Fatalf("body %v", req.Body)
	}
}

// TestCompactBodyOutlivesTheOpeningDeadline: "outage deadlines cover
// opening/backoff, never a healthy reconnected response body." The
// context bounding Open has expired when the body arrives; the body is
// read whole.
func TestCompactBodyOutlivesTheOpeningDeadline(t *testing.T) {
	srv := pt.New(t)
	srv.Enqueue(pt.Compacted("opaque").Pace(300 * time.Millisecond))
	tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	st, err := tr.Open(ctx, compactRequest())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	<-ctx.Done()
	for {
		ev, err := st.Next(context.Background())
		if err != nil {
			t.Fatalf("the healthy body failed after the opening deadline: %v", err)
		}
		if ev.Type == provider.EventCompleted {
			return
		}
	}
}

// TestCompactFailures: a status is an opening failure as on any request;
// a body cut short is a dispatched body failure; the WebSocket and the
// other wire formats refuse a compaction pre-send.
func TestCompactFailures(t *testing.T) {
	srv := pt.New(t)
	srv.Enqueue(pt.Status(503, "server_error", "", "busy"), pt.Compacted("opaque", "first").DropAfter(20))
	tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey})
	_, err := tr.Open(context.Background(), compactRequest())
	if pe, ok := errors.AsType[*provider.Error](err); !ok || pe.Class != provider.HTTPStatus || pe.Status != 503 {
		t.Fatalf("503: %v", err)
	}
	st, err := tr.Open(context.Background(), compactRequest())
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Next(context.Background())
	st.Close()
	if pe, ok := errors.AsType[*provider.Error](err); !ok || pe.Phase != provider.Body || !pe.Dispatched {
		t.Fatalf("cut body: %v", err)
	}
	for name, tr := range map[string]provider.Transport{
		"websocket": provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), APIKey: testKey}),
		"chat":      provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey, Wire: provider.WireChat}),
	} {
		_, err := tr.Open(context.Background(), compactRequest())
		if pe, ok := errors.AsType[*provider.Error](err); !ok || pe.Class != provider.InvalidRequest || pe.Dispatched || !errors.Is(err, provider.ErrCompactNotResponses) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("%d requests", n)
	}
}

// TestCompactionItemReplays: the opaque compaction item is sent back as
// {type: compaction, encrypted_content}.
func TestCompactionItemReplays(t *testing.T) {
	b, err := provider.EncodeItem(&provider.Item{Type: provider.ItemCompaction, ID: "cmp_1", EncryptedContent: "opaque"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"compaction","encrypted_content":"opaque"}`; string(b) != want {
		t.Fatalf("%s, want %s", b, want)
	}
	if _, err := provider.EncodeItem(&provider.Item{Type: provider.ItemCompaction}); err == nil {
		t.Fatal("a compaction item without content encoded")
	}
	if !reflect.DeepEqual((&provider.Item{Type: provider.ItemCompaction}).Known(), true) {
		t.Fatal("compaction is not a known item")
	}
}
