package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/octet-agent/octet/internal/heaptest"
	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
)

// TestIdleAgentHoldsNoEncodedContext: an agent whose run ended keeps no
// encoded copy of its context (it was 41% of an idle server's heap): its
// live heap after a run on a 2 MB branch grows by far less than the
// context, and the cache is empty. (The provider is a loopback server
// that keeps nothing of the requests, so the heap is octet's; the test
// runs in a process of its own, where no other test's goroutines
// allocate while it measures — in the package's run they added up to
// 4.6 MB.)
func TestIdleAgentHoldsNoEncodedContext(t *testing.T) {
	if !heaptest.OwnProcess(t) {
		return
	}
	h := loopbackHarness(t)
	const size = 2 << 20
	longBranch(t, h.sess, size)
	before := heaptest.Live()
	if res := h.prompt("go on", PromptOptions{}).Wait(); res.Outcome != OutcomeCompleted {
		t.Fatalf("run: %+v", res)
	}
	grew := int64(heaptest.Live()) - int64(before)
	t.Logf("live heap after a run on a %d-byte branch: %+d bytes", size, grew)
	if grew > size/4 {
		t.Errorf("an idle agent holds %d more bytes of heap after a run on a %d-byte branch: its encoded context", grew, size)
	}
	h.agent.encoded.mu.Lock()
	cached := len(h.agent.encoded.byID)
	h.agent.encoded.mu.Unlock()
	if cached != 0 {
		t.Errorf("an idle agent caches %d entries' items", cached)
	}
}

// loopbackHarness is a harness whose provider is a loopback server that
// answers every request with text and keeps nothing of it, so the heap
// is octet's.
func loopbackHarness(t *testing.T) *harness {
	answer := pt.Text("done").SSE()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return newHarness(t, harnessOpt{
		model:     provider.Model{Name: "scripted", ContextWindow: 1_000_000, MaxOutputTokens: 128_000},
		transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL + "/v1"}),
	})
}
