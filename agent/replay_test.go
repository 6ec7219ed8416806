package agent

import (
	"fmt"
	"testing"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// reopenWithLeftovers writes a user prompt and the given assistant
// entries to a new session, as a crashed process leaves them (no results),
// reopens the file and starts an agent on it with a replay-safe Pure probe
// registered as "pure"; New settles the leftovers.
func reopenWithLeftovers(t *testing.T, assistants ...session.Entry) (*session.Session, *probeTool) {
	t.Helper()
	checkLeaks(t)
	sess, err := session.Create(t.TempDir(), session.Header{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.AppendEntry(session.Entry{Type: session.EntryUser, Text: "go"}); err != nil {
		t.Fatal(err)
	}
	for _, e := range assistants {
		if _, err := sess.AppendEntry(e); err != nil {
			t.Fatal(err)
		}
	}
	sess.Close()
	if sess, err = session.Open(sess.Path()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	probe := &probeTool{name: "pure", effect: tools.Pure, replay: tools.ReplaySafe}
	host := tools.NewHost()
	if err := host.Register(probe); err != nil {
		t.Fatal(err)
	}
	srv := pt.New(t)
	if _, err := New(Config{
		Session: sess, Transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL()}),
		Model: provider.Model{Name: "scripted"}, Host: host,
		Broker: tools.NewBroker(tools.BrokerConfig{Policy: tools.UnsafeHost}),
	}); err != nil {
		t.Fatal(err)
	}
	return sess, probe
}

func pureCalls(prefix string, n int) []session.Item {
	items := make([]session.Item, n)
	for i := range items {
		items[i] = session.Item{Type: session.ItemFunctionCall, CallID: fmt.Sprintf("%s%d", prefix, i), Name: "pure", Arguments: fmt.Sprintf(`{"n":%d}`, i)}
	}
	return items
}

// TestReplayAppliesLiveLimits: crash replay admits exactly what the live
// loop admits. The calls of a message that stopped at the output limit
// never run live, so they are not run on replay either (they get the live
// static error and the corrective continuation); of a message with 40
// calls only the first 32 may run, as live.
func TestReplayAppliesLiveLimits(t *testing.T) {
	t.Run("output limit", func(t *testing.T) {
		sess, probe := reopenWithLeftovers(t, session.Entry{Type: session.EntryAssistant, StopReason: "max_output_tokens", Items: pureCalls("t", 2)})
		if n := probe.executed.Load(); n != 0 {
			t.Fatalf("replay executed %d calls of an output-limit-stopped message; live executes none", n)
		}
		var results []*session.ToolResult
		var steering []string
		for _, e := range sess.Branch() {
			switch e.Type {
			case session.EntryToolResult:
				results = append(results, e.Result)
			case session.EntrySteering:
				steering = append(steering, e.Text)
			}
		}
		if len(results) != 2 {
			t.Fatalf("%d results, want 2", len(results))
		}
		for _, r := range results {
			if r.Text != textTruncatedCall || !r.IsError || r.Details["crash_recovery"] != "not_executed" {
				t.Fatalf("result %+v, want the live truncated-call error", r)
			}
		}
		if len(steering) != 1 || steering[0] != textCorrective {
			t.Fatalf("steering %q, want the live corrective continuation", steering)
		}
	})
	t.Run("per-response limit", func(t *testing.T) {
		sess, probe := reopenWithLeftovers(t, session.Entry{Type: session.EntryAssistant, StopReason: "completed", Items: pureCalls("c", 40)})
		if n := probe.executed.Load(); n != DefaultMaxToolCallsPerTurn {
			t.Fatalf("replay executed %d of 40 calls; live executes %d", n, DefaultMaxToolCallsPerTurn)
		}
		states := map[string]int{}
		for _, e := range sess.Branch() {
			if e.Type != session.EntryToolResult {
				continue
			}
			s, _ := e.Result.Details["crash_recovery"].(string)
			states[s]++
			if s == "not_executed" && e.Result.Text != textTooManyCalls {
				t.Fatalf("call %s: %q, want the live too-many-calls error", e.Result.CallID, e.Result.Text)
			}
		}
		if states["replayed"] != 32 || states["not_executed"] != 8 || len(states) != 2 {
			t.Fatalf("states %v, want 32 replayed and 8 not executed", states)
		}
	})
}
