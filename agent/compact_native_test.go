package agent

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// nativeModel grants native compaction (and the prompt cache key) on the
// model side; the scripted endpoint grants every feature.
var nativeModel = provider.Model{Name: "native", ContextWindow: 400_000, MaxOutputTokens: 128_000,
	Features: provider.FeatureNativeCompaction | provider.FeaturePromptCacheKey | provider.FeatureParallelToolCalls}

// lastCompaction returns the branch's latest compaction.
func lastCompaction(h *harness) *session.Compaction {
	var c *session.Compaction
	for _, e := range h.sess.Branch() {
		if e.Compaction != nil {
			c = e.Compaction
		}
	}
	return c
}

// inputSummary renders a request's input as type[:text] items.
func inputSummary(q pt.Request) []string {
	var out []string
	for _, it := range q.Input() {
		m := it.(map[string]any)
		s, _ := m["type"].(string)
		if s == "message" {
			parts, _ := m["content"].([]any)
			if len(parts) > 0 {
				text, _ := parts[0].(map[string]any)["text"].(string)
				s += ":" + text
			}
		}
		if s == "compaction" {
			s += ":" + m["encrypted_content"].(string)
		}
		out = append(out, s)
	}
	return out
}

// TestNativeCompactionManual: where model and endpoint grant native
// compaction, /compact sends the conversation to the provider's compact
// endpoint (instructions, input, prompt_cache_key); the compaction entry
// keeps what it answered — the user messages it kept and its opaque
// item — with the request's usage, and the next request carries those in
// place of the conversation.
func TestNativeCompactionManual(t *testing.T) {
	h := newHarness(t, harnessOpt{model: nativeModel})
	h.srv.Enqueue(pt.Text("EARLIER ANSWER"), pt.Compacted("OPAQUE", "EARLIER QUESTION").WithUsage(provider.Usage{InputTokens: 5000, OutputTokens: 400}), pt.Text("after"))
	h.completed(t, h.prompt("EARLIER QUESTION", PromptOptions{}).Wait())
	r, err := h.agent.Compact(context.Background(), PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := strings.Join(kindsOf(drain(t, r)), " ")
	if res := r.Wait(); res.Outcome != OutcomeCompleted || !strings.Contains(kinds, "compaction_finished") {
		t.Fatalf("compact run %+v: %s", res, kinds)
	}
	reqs := h.srv.Requests()
	cq := reqs[1]
	if !strings.HasSuffix(cq.Path, "/responses/compact") || cq.Body["instructions"] != "You are a test agent." || cq.Body["prompt_cache_key"] != h.sess.Header().ID {
		t.Fatalf("compaction request %s %v", cq.Path, cq.Body)
	}
	if s := string(cq.Raw); !strings.Contains(s, "EARLIER QUESTION") || !strings.Contains(s, "EARLIER ANSWER") {
		t.Errorf("compaction input %s", s)
	}
	c := lastCompaction(h)
	want := []session.Item{{Type: session.ItemUserText, Text: "EARLIER QUESTION"}, {Type: session.ItemCompaction, ID: "cmp_1", EncryptedContent: "OPAQUE"}}
	if c == nil || c.Summary != "" || !reflect.DeepEqual(c.Items, want) {
		t.Fatalf("compaction entry %+v", c)
	}
	var found bool
	for _, u := range recordsOf(t, h, "usage") {
		found = found || u.str("operation") == OperationCompaction && u["input"] == float64(5000) && u["output"] == float64(400)
	}
	if !found {
		t.Error("no usage record of the compaction as reported")
	}
	h.completed(t, h.prompt("next", PromptOptions{}).Wait())
	got := inputSummary(h.srv.Requests()[2])
	if len(got) < 3 || got[0] != "message:EARLIER QUESTION" || got[1] != "compaction:OPAQUE" || got[len(got)-1] != "message:next" || strings.Contains(strings.Join(got, " "), "EARLIER ANSWER") {
		t.Fatalf("the request after the compaction: %v", got)
	}
}

// TestNativeCompactionAutonomous: a request past the window's threshold
// is compacted natively first, and goes out with the provider's items
// and the kept tail.
func TestNativeCompactionAutonomous(t *testing.T) {
	small := nativeModel
	small.ContextWindow = 36_000
	h := newHarness(t, harnessOpt{model: small})
	big := provider.Usage{InputTokens: 20_000, OutputTokens: 10}
	h.srv.Enqueue(pt.Text("first answer").WithUsage(big), pt.Compacted("OPAQUE", "LONG"), pt.Text("done"))
	h.completed(t, h.prompt("LONG "+strings.Repeat("word ", 8000), PromptOptions{}).Wait())
	reqs := h.completed(t, h.prompt("next", PromptOptions{}).Wait())
	if len(reqs) != 3 || !strings.HasSuffix(reqs[1].Path, "/responses/compact") {
		t.Fatalf("%d requests, the second %s", len(reqs), reqs[min(1, len(reqs)-1)].Path)
	}
	got := inputSummary(reqs[2])
	if len(got) < 3 || got[0] != "message:LONG" || got[1] != "compaction:OPAQUE" || got[len(got)-1] != "message:next" {
		t.Fatalf("the compacted request: %v", got)
	}
}

// TestNativeCompactionFallsBackToLocal: a native compaction the provider
// refuses, or answers with an item octet cannot replay (its usage
// recorded all the same), falls back to the local summary.
func TestNativeCompactionFallsBackToLocal(t *testing.T) {
	bad := `{"id":"c1","object":"response.compaction","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]},{"type":"compaction","encrypted_content":"E"}],"usage":{"input_tokens":70,"output_tokens":7}}`
	for name, turn := range map[string]pt.Turn{
		"refused":  pt.Status(400, "invalid_request_error", "unsupported_model", "no compaction for this model"),
		"bad-item": pt.StatusBody(200, bad),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, harnessOpt{model: nativeModel})
			h.srv.Enqueue(pt.Text("EARLIER ANSWER"), turn, pt.Text("THE SUMMARY"))
			h.completed(t, h.prompt("EARLIER QUESTION", PromptOptions{}).Wait())
			r, err := h.agent.Compact(context.Background(), PromptOptions{})
			if err != nil {
				t.Fatal(err)
			}
			drain(t, r)
			if res := r.Wait(); res.Outcome != OutcomeCompleted {
				t.Fatalf("compact run %+v", res)
			}
			if c := lastCompaction(h); c == nil || c.Summary != "THE SUMMARY" || len(c.Items) != 0 {
				t.Fatalf("compaction %+v, want the local summary", c)
			}
			reqs := h.srv.Requests()
			if len(reqs) != 3 || reqs[2].Body["instructions"] != compactionInstructions {
				t.Fatalf("requests %d; the last is not the local summary request", len(reqs))
			}
			if name == "bad-item" {
				n := 0
				for _, u := range recordsOf(t, h, "usage") {
					if u.str("operation") == OperationCompaction {
						n++
					}
				}
				if n != 2 {
					t.Errorf("%d compaction usage records, want the unusable answer's and the summary's", n)
				}
			}
		})
	}
}

// TestNativeContextNeedsTheGrant: a context compacted natively is not
// sent where native compaction is not granted (another model here): the
// run fails before any request, saying what to do.
func TestNativeContextNeedsTheGrant(t *testing.T) {
	h := newHarness(t, harnessOpt{model: nativeModel})
	h.srv.Enqueue(pt.Text("EARLIER ANSWER"), pt.Compacted("OPAQUE", "EARLIER QUESTION"))
	h.completed(t, h.prompt("EARLIER QUESTION", PromptOptions{}).Wait())
	r, err := h.agent.Compact(context.Background(), PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, r)
	if err := h.agent.SetModel(provider.Model{Name: "plain", ContextWindow: 400_000}); err != nil {
		t.Fatal(err)
	}
	res := h.prompt("next", PromptOptions{}).Wait()
	if res.Outcome != OutcomeFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "compacted by the provider") {
		t.Fatalf("run %+v", res)
	}
	if n := len(h.srv.Requests()); n != 2 {
		t.Fatalf("%d requests, want none after the compaction", n)
	}
}

// TestNativeCompactionOpeningBoundedBodyHealthy: "Native compaction uses
// the AI client's explicit HTTP-header opening boundary for both manual
// and autonomous calls: credential and header opening remain
// outage-bounded, while a healthy reconnected body uses its provider body
// deadlines." Manual (/compact) and autonomous: an outage at the compact
// endpoint's opening longer than the one-minute bound ends the run with
// NetworkWaitLimit and nothing of the compaction committed (no local
// fallback: the envelope ended); one that ends within the bound is
// followed by a healthy body slower than the bound, which completes. The
// outage is at the connection (HTTP headers) or, for "credential", in
// getting the key.
func TestNativeCompactionOpeningBoundedBodyHealthy(t *testing.T) {
	for _, mode := range []string{"manual", "autonomous", "credential"} {
		for _, healthy := range []bool{true, false} {
			name := mode + "/cut"
			if healthy {
				name = mode + "/healthy"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					model := codexModel
					model.Features |= provider.FeatureNativeCompaction
					first, text := pt.Text("first answer"), "first"
					if mode == "autonomous" {
						model.ContextWindow = 36_000
						first = first.WithUsage(provider.Usage{InputTokens: 20_000, OutputTokens: 10})
						text = "first " + strings.Repeat("word ", 8000)
					}
					// The compaction's body is one JSON object: the body
					// deadline (idle timeout) covers it whole.
					var keyless atomic.Bool
					var start time.Time
					credential := func(context.Context) (string, error) {
						if keyless.Load() && (!healthy || time.Since(start) < 30*time.Second) {
							return "", errors.New("the keychain is locked")
						}
						return "test-key", nil
					}
					var hooked atomic.Int32 // retry hooks told of a compaction network wait
					hook := func(_ context.Context, rc ProviderRetryContext) RetryHookResult {
						if rc.Operation != nil && *rc.Operation == OperationCompaction && rc.Kind == RetryWaitingForNetwork && rc.MaxAttempts == nil {
							hooked.Add(1)
						}
						return RetryHookResult{}
					}
					g := newRecRig(t, recRigOpt{model: model, native: true, idle: 5 * time.Minute, credential: credential, hook: hook})
					g.srv.Enqueue(first)
					if res, _ := g.run(context.Background(), text); res.Outcome != OutcomeCompleted {
						t.Fatalf("first run %s: %v", res.Outcome, res.Err)
					}
					g.policy.SetMaxNetworkWait(time.Minute)
					start = time.Now()
					if mode == "credential" {
						keyless.Store(true)
					} else {
						g.gate = func(req *http.Request) error {
							if !strings.HasSuffix(req.URL.Path, "/responses/compact") {
								return nil
							}
							if !healthy || time.Since(start) < 30*time.Second {
								return netUnreachable()
							}
							return nil
						}
					}
					g.srv.Enqueue(pt.Compacted("OPAQUE", "first").Pace(2 * time.Minute))
					var res RunResult
					var evs []Event
					if mode != "autonomous" {
						res, evs = g.compact()
					} else {
						g.srv.Enqueue(pt.Text("done"))
						res, evs = g.run(context.Background(), "next")
					}
					waits := eventsOf[*ProviderRetry](evs)
					if len(waits) == 0 || waits[0].Operation == nil || *waits[0].Operation != OperationCompaction || waits[0].RetryKind != RetryWaitingForNetwork {
						t.Fatalf("retries %+v, want compaction-scoped network waits", waits)
					}
					if hooked.Load() == 0 { // "Manual native-compaction calls also use bounded recovery and retry hooks."
						t.Fatal("the retry hook was not asked about the compaction's waits")
					}
					var committed bool
					for _, rec := range readFile(t, g.sess.Path()) {
						committed = committed || (rec.str("kind") == session.KindUsage && rec.str("operation") == OperationCompaction && rec.str("run_id") == res.RunID)
					}
					if !healthy {
						if _, ok := errors.AsType[*NetworkWaitLimit](res.Err); res.Outcome != OutcomeFailed || !ok || committed {
							t.Fatalf("run %s: %v (committed %v), want NetworkWaitLimit and nothing committed", res.Outcome, res.Err, committed)
						}
						if g.sess.Totals().Uncertain { // nothing was sent
							t.Fatal("pre-send waiting invented unknown usage")
						}
						return
					}
					if res.Outcome != OutcomeCompleted || !committed {
						t.Fatalf("run %s: %v (committed %v)", res.Outcome, res.Err, committed)
					}
					if time.Since(start) < 2*time.Minute {
						t.Fatal("the body did not outlive the outage bound; the test proves nothing")
					}
					var c *session.Compaction
					for _, e := range g.sess.Branch() {
						if e.Compaction != nil {
							c = e.Compaction
						}
					}
					if c == nil || len(c.Items) != 2 {
						t.Fatalf("compaction %+v, want the provider's", c)
					}
				})
			})
		}
	}
}
