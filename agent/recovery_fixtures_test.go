package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// The seeds' named deterministic fixtures, each on the real loopback
// scripted server (started outside the synctest bubble, so its sockets
// never hold the bubble's virtual clock) with the Codex recovery policy
// on virtual time.

// TestFixtureFourTerminalEOFsThenSuccess: four terminal EOFs followed by
// success retain durable unknown usage: one usage_uncertain record per
// failed accepted attempt, each durable before its replacement is sent,
// and still there after reopening.
func TestFixtureFourTerminalEOFsThenSuccess(t *testing.T) {
	srv := providertest.New(t)
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		g := newRecRig(t, recRigOpt{server: srv, dir: dir})
		srv.Enqueue(repeatTurn(eofTurn(), 4)...)
		srv.Enqueue(providertest.Text("done"))
		sends := 0
		g.gate = func(*http.Request) error {
			if n := bytes.Count(g.fileBytes(), []byte(`"kind":"usage_uncertain"`)); n != sends {
				t.Errorf("send %d: %d durable usage_uncertain records, want %d", sends+1, n, sends)
			}
			sends++
			return nil
		}
		res, evs := g.run(context.Background(), "hello")
		if res.Outcome != OutcomeCompleted || res.Usage.Complete {
			t.Fatalf("outcome %s complete %v (%v)", res.Outcome, res.Usage.Complete, res.Err)
		}
		if n := len(srv.Requests()); n != 5 {
			t.Fatalf("%d requests, want 5", n)
		}
		retries := eventsOf[*ProviderRetry](evs)
		if len(retries) != 4 {
			t.Fatalf("%d retries, want 4", len(retries))
		}
		for i, e := range retries {
			if e.Reason != "terminal_eof" || e.Attempt != i+1 || *e.MaxAttempts != MaxStreamReplacements {
				t.Fatalf("retry %d = %+v, want a terminal_eof replacement within the stream allowance", i+1, *e)
			}
		}
		g.sess.Close()
	})
	s, err := session.Open(onlySession(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if tot := s.Totals(); !tot.Uncertain || tot.UncertainMarkers != 4 || tot.Own.Input != 100 {
		t.Fatalf("reopened totals %+v, want 4 markers and a 100-token known subtotal", tot)
	}
}

// turn520 is a gateway's HTTP 520 with its HTML body.
func turn520() providertest.Turn {
	return providertest.StatusBody(520, "<html><body>error code: 520</body></html>")
}

// TestFixtureHTTP520Sequences: HTTP 520 (an unknown gateway error) is an
// admission failure with unknown usage: 29 are recovered, the 30th
// exhausts the admission allowance, and mixed with stream failures the
// turn stops at 36 attempts; 520s never consume the stream allowance.
func TestFixtureHTTP520Sequences(t *testing.T) {
	full := providertest.Text("answer after the gateway recovered")
	tests := []struct {
		name     string
		script   []providertest.Turn
		requests int
		budget   string // "" for a completed run
	}{
		{"29 then success", append(repeatTurn(turn520(), 29), full), 30, ""},
		{"30 exhaust", repeatTurn(turn520(), 31), 30, "admission"},
		{"20 then EOF then success", append(repeatTurn(turn520(), 20), eofTurn(), full), 22, ""},
		{"29 then 7 EOFs exhaust at 36", append(repeatTurn(turn520(), 29), repeatTurn(eofTurn(), 8)...), 36, "total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.New(t)
			synctest.Test(t, func(t *testing.T) {
				g := newRecRig(t, recRigOpt{server: srv})
				srv.Enqueue(tt.script...)
				srv.Enqueue(providertest.Text("never reached"))
				res, evs := g.run(context.Background(), "hello")
				if tt.budget != "" {
					checkExhausted(t, g, res, evs, tt.requests, tt.budget)
					return
				}
				if res.Outcome != OutcomeCompleted || res.Usage.Complete {
					t.Fatalf("outcome %s complete %v: %v", res.Outcome, res.Usage.Complete, res.Err)
				}
				if n := len(srv.Requests()); n != tt.requests {
					t.Fatalf("%d requests, want %d", n, tt.requests)
				}
				if m := g.sess.Totals().UncertainMarkers; m != tt.requests-1 {
					t.Fatalf("%d durable markers, want %d (a 520 can hide accepted work)", m, tt.requests-1)
				}
				for _, e := range eventsOf[*ProviderRetry](evs) {
					if e.Reason == "http_520" && !strings.Contains(e.Cause, "HTTP 520") {
						t.Fatalf("retry cause %q does not name the 520", e.Cause)
					}
				}
			})
		})
	}
}

// TestFixtureUnknownTerminalAfterPartialGeneration: an unknown
// response.failed code or response.incomplete reason after partial text is
// a stream failure: the partial text is recovered output (never the
// answer), usage is unknown, the twelfth attempt may still complete and a
// thirteenth is never made.
func TestFixtureUnknownTerminalAfterPartialGeneration(t *testing.T) {
	const partial = "half of an answer"
	terminals := map[string]providertest.Turn{
		"failed":     providertest.FailedAfter("upstream_mystery", "something went wrong", providertest.Message(partial)),
		"incomplete": providertest.Incomplete("upstream_mystery", providertest.Message(partial)),
	}
	for name, bad := range terminals {
		for _, recover := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s recover=%v", name, recover), func(t *testing.T) {
				srv := providertest.New(t)
				synctest.Test(t, func(t *testing.T) {
					g := newRecRig(t, recRigOpt{server: srv})
					srv.Enqueue(repeatTurn(bad, MaxStreamReplacements)...)
					if recover {
						srv.Enqueue(providertest.Text("the whole answer"))
					} else {
						srv.Enqueue(bad, providertest.Text("never reached"))
					}
					res, evs := g.run(context.Background(), "hello")
					if !recover {
						checkExhausted(t, g, res, evs, MaxStreamReplacements+1, "stream")
						return
					}
					if res.Outcome != OutcomeCompleted || res.Usage.Complete {
						t.Fatalf("outcome %s complete %v: %v", res.Outcome, res.Usage.Complete, res.Err)
					}
					if n := len(srv.Requests()); n != MaxStreamReplacements+1 {
						t.Fatalf("%d requests, want 12", n)
					}
					rec := eventsOf[*RecoveredOutput](evs)
					if len(rec) != MaxStreamReplacements {
						t.Fatalf("%d recovered_output events, want one per failed attempt", len(rec))
					}
					for _, e := range rec {
						if e.Channel != ChannelText || !strings.Contains(e.Text, "half of") {
							t.Fatalf("recovered output %+v", *e)
						}
					}
					if m := g.sess.Totals().UncertainMarkers; m != MaxStreamReplacements {
						t.Fatalf("%d markers, want 11", m)
					}
					for _, e := range entries(readFile(t, g.sess.Path())) {
						if e.str("type") == "assistant" && strings.Contains(fmt.Sprint(e["items"]), partial) {
							t.Fatal("partial generation of a failed attempt was committed")
						}
					}
				})
			})
		}
	}
}

// TestFixtureWebSocketToHTTPWithCredentialOutage: the seeds' loopback
// WebSocket→HTTP fixture. The first request over the WebSocket is
// interrupted; then the credential is unavailable for 20,200 attempts
// (about two weeks of capped waits, on virtual time), which neither spend
// the finite inference budget nor touch the ledger; then the stream keeps
// failing, the route falls back to HTTP after five WebSocket replacements,
// and the twelfth accepted request completes — or, when it fails too, the
// turn is exhausted with no thirteenth request.
func TestFixtureWebSocketToHTTPWithCredentialOutage(t *testing.T) {
	const outage = 20_200
	for _, recover := range []bool{true, false} {
		t.Run(fmt.Sprintf("recover=%v", recover), func(t *testing.T) {
			srv := providertest.New(t)
			cut := providertest.Text("words that stop before the response completes").DropAfter(5)
			srv.Enqueue(repeatTurn(cut, MaxStreamReplacements)...)
			if recover {
				srv.Enqueue(providertest.Text("answer on the twelfth accepted request"))
			} else {
				srv.Enqueue(cut, providertest.Text("never reached"))
			}
			synctest.Test(t, func(t *testing.T) {
				f := newCredentialFallbackRig(t, srv, outage)
				start := time.Now()
				r, err := f.agent.Prompt(context.Background(), "hi", PromptOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var evs []Event
				for e := range r.Events() {
					evs = append(evs, e)
				}
				res := r.Wait()
				if f.ledgerChanged {
					t.Fatal("the session ledger changed during the credential outage")
				}
				if f.spentDuringOutage != [2]int{1, 0} {
					t.Fatalf("budget spent during the outage %v, want the initial interruption only", f.spentDuringOutage)
				}
				if days := time.Since(start).Hours() / 24; days < 13 {
					t.Fatalf("the outage lasted %.1f virtual days, want about two weeks of capped waits", days)
				}
				var waits, replacements int
				for _, e := range eventsOf[*ProviderRetry](evs) {
					switch e.RetryKind {
					case RetryWaitingForNetwork:
						waits++
						if e.MaxAttempts != nil || e.Reason != "auth_unavailable" || e.DelayMs > 60_000 {
							t.Fatalf("credential wait %+v", *e)
						}
					case RetryInterruptedInference:
						replacements++
					}
				}
				if waits != outage || replacements != MaxStreamReplacements {
					t.Fatalf("%d waits and %d replacements, want %d and %d", waits, replacements, outage, MaxStreamReplacements)
				}
				var transports []string
				for _, q := range srv.Requests() {
					transports = append(transports, q.Transport)
				}
				want := strings.TrimSpace(strings.Repeat("websocket ", WebSocketRetryBudget+1) + strings.Repeat("http ", MaxStreamReplacements-WebSocketRetryBudget))
				if got := strings.Join(transports, " "); got != want {
					t.Fatalf("transports %s, want %s", got, want)
				}
				if recover {
					if res.Outcome != OutcomeCompleted {
						t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
					}
				} else if ex, ok := errors.AsType[*ExhaustedError](res.Err); !ok || ex.Budget != "stream" || ex.Attempts != MaxStreamReplacements+1 {
					t.Fatalf("outcome %s err %v, want stream exhaustion after 12 attempts", res.Outcome, res.Err)
				}
				wantMarkers := MaxStreamReplacements
				if !recover {
					wantMarkers++
				}
				if m := f.sess.Totals().UncertainMarkers; m != wantMarkers {
					t.Fatalf("%d durable markers, want %d (one per accepted failure, none for waits)", m, wantMarkers)
				}
			})
		})
	}
}

// credentialFallbackRig is an agent whose WebSocket transport falls back
// to HTTP, both on the loopback server, sharing one credential source
// that is unavailable for a number of attempts after the first request.
type credentialFallbackRig struct {
	agent  *Agent
	sess   *session.Session
	policy *CodexRecovery
	// Observed by the credential source during the outage.
	ledgerChanged     bool
	spentDuringOutage [2]int
}

func newCredentialFallbackRig(t *testing.T, srv *providertest.Server, outage int) *credentialFallbackRig {
	t.Helper()
	f := &credentialFallbackRig{}
	dir := t.TempDir()
	var err error
	if f.sess, err = session.Create(dir, session.Header{Cwd: dir}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.sess.Close() })
	var asked int
	var ledger []byte
	cred := func(context.Context) (string, error) {
		asked++
		switch {
		case asked == 1:
			return "sk-test-not-a-secret", nil
		case asked <= 1+outage:
			b, err := os.ReadFile(f.sess.Path())
			if err != nil {
				t.Errorf("read ledger: %v", err)
			}
			if ledger == nil {
				ledger = b
				f.spentDuringOutage[0], f.spentDuringOutage[1] = f.policy.Spent()
			} else if asked%1000 == 0 || asked == 1+outage {
				f.ledgerChanged = f.ledgerChanged || !bytes.Equal(ledger, b)
				if s, a := f.policy.Spent(); s != f.spentDuringOutage[0] || a != f.spentDuringOutage[1] {
					f.spentDuringOutage = [2]int{-1, -1}
				}
			}
			return "", errors.New("keychain locked")
		}
		return "sk-test-not-a-secret", nil
	}
	ws := provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), Features: provider.FeatureCodexProfile | provider.FeatureWebSocket, Credential: cred})
	t.Cleanup(func() { ws.Close() })
	hc := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), Features: provider.FeatureCodexProfile, Credential: cred,
		RoundTripper: &http.Transport{DisableKeepAlives: true}})
	fb := NewFallbackTransport(ws, hc)
	f.policy = NewCodexRecovery(RecoveryConfig{Profile: ProfileCodex, Wire: provider.WireResponses, Model: codexModel, Endpoint: fb.EndpointFeatures(), WebSocket: true, Seed: 11})
	f.agent, err = New(Config{Session: f.sess, Transport: fb, Model: codexModel, Host: tools.NewHost(), Broker: tools.NewBroker(tools.BrokerConfig{}), Retry: f.policy, Principal: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}
