package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// writeGlobalConfig writes $OCTET_HOME/config.toml.
func (x *execEnv) writeGlobalConfig(t *testing.T, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(x.home, "config.toml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// eventsOfKind returns the JSON events of one kind.
func eventsOfKind(events []map[string]any, kind string) []map[string]any {
	var out []map[string]any
	for _, ev := range events {
		if ev["kind"] == kind {
			out = append(out, ev)
		}
	}
	return out
}

// TestExecUsageIsPriced: known usage is priced in integer picodollars from
// the built-in table, a [prices.<model>] table overrides it, and a model
// without a price reports no cost (never a made-up one).
func TestExecUsageIsPriced(t *testing.T) {
	usage := provider.Usage{InputTokens: 1000, CachedTokens: 200, OutputTokens: 2000, ReasoningTokens: 500}
	for _, tc := range []struct {
		name, config string
		args         []string
		wantMicros   any // float64 micro-dollars, or nil when unpriced
	}{
		// gpt-5.1-codex list price: 800 × $1.25/M + 200 × $0.125/M + 2000 × $10/M = $0.021025.
		{name: "built-in price", wantMicros: float64(21025)},
		// 800 × $2/M + 200 × $1/M + 2000 × $3/M = $0.0078.
		{name: "configured price", config: "[prices.\"gpt-5.1-codex\"]\ninput = \"2\"\ncached_input = \"1\"\noutput = \"3\"\n", wantMicros: float64(7800)},
		{name: "unpriced model", args: []string{"--model", "local-model"}, wantMicros: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newExecEnv(t, providertest.Text("priced answer").WithUsage(usage))
			x.writeGlobalConfig(t, tc.config)
			r := runCLI(t, x.ws, x.vars, append(append([]string{"exec", "--json"}, tc.args...), "hi")...)
			if r.code != exitOK {
				t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
			}
			_, events := parseJSONLines(t, r.stdout)
			us := eventsOfKind(events, "usage")
			if len(us) != 1 {
				t.Fatalf("%d usage events in %s", len(us), r.stdout)
			}
			u := us[0]
			if u["input"] != float64(1000) || u["cachedInput"] != float64(200) || u["output"] != float64(2000) || u["reasoning"] != float64(500) || u["complete"] != true {
				t.Errorf("usage event = %v", u)
			}
			if got := u["costMicros"]; got != tc.wantMicros {
				t.Errorf("costMicros = %v, want %v (event %v)", got, tc.wantMicros, u)
			}
		})
	}
}

// TestExecCeilingRefusesUncertainSession: with a hard token ceiling, a
// session whose usage became uncertain (a stream that ended before
// completion, after dispatch) refuses the next request without sending
// it, on both routes, when continued by a later command. Without the
// ceiling the same continuation is sent.
func TestExecCeilingRefusesUncertainSession(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		ceiling      bool
	}{
		{"unqualified route", "runtime_profile = \"none\"\nmax_session_tokens = 1000000\n", true},
		{"codex route", "runtime_profile = \"codex\"\nmax_session_tokens = 1000000\n", true},
		{"cost ceiling", "runtime_profile = \"none\"\nmax_session_cost_usd = \"10\"\n", true},
		{"no ceiling", "runtime_profile = \"none\"\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newExecEnv(t, providertest.Text("a partial answer that never completes").EOFAfter(4))
			x.writeGlobalConfig(t, tc.config)
			first := runCLI(t, x.ws, x.vars, "exec", "--json", "start")
			if first.code != exitFailed {
				t.Fatalf("first exec: exit %d, want %d\nstderr: %s", first.code, exitFailed, first.stderr)
			}
			lines, events := parseJSONLines(t, first.stdout)
			if len(eventsOfKind(events, "provider_usage_uncertain")) != 1 {
				t.Fatalf("no provider_usage_uncertain event: %s", first.stdout)
			}
			if n := len(x.srv.Requests()); n != 1 {
				t.Fatalf("first exec made %d requests, want 1 (uncertain usage under a ceiling is never retried)", n)
			}
			x.srv.Enqueue(providertest.Text("continued"))
			second := runCLI(t, x.ws, x.vars, "exec", "--json", "--session", lines[0].SessionID, "continue")
			reqs := len(x.srv.Requests())
			if !tc.ceiling {
				if second.code != exitOK || reqs != 2 {
					t.Fatalf("without a ceiling: exit %d, %d requests\nstderr: %s", second.code, reqs, second.stderr)
				}
				return
			}
			if second.code != exitFailed || reqs != 1 {
				t.Fatalf("under a ceiling: exit %d, %d requests (want %d, 1)\nstderr: %s", second.code, reqs, exitFailed, second.stderr)
			}
			// The refusal says what happened and what the user can do.
			for _, want := range []string{"hard usage ceiling", "a request failed after it may have been sent (terminal", "in run " + lines[0].RunID,
				"start a new session", "remove the hard ceiling (max_session_tokens, max_session_cost_usd)"} {
				if !strings.Contains(second.stderr, want) {
					t.Errorf("stderr does not explain the refusal (%q missing):\n%s", want, second.stderr)
				}
			}
			_, events = parseJSONLines(t, second.stdout)
			if len(eventsOfKind(events, "provider_usage_uncertain")) != 1 {
				t.Errorf("a run on an uncertain session must say so at its start: %s", second.stdout)
			}
		})
	}
}

// TestExecCostCeilingReached: the cost ceiling counts priced known usage;
// once reached, the next request is refused.
func TestExecCostCeilingReached(t *testing.T) {
	// 1000 input + 1000 output tokens of gpt-5.1-codex cost $0.01125.
	x := newExecEnv(t, providertest.Text("first").WithUsage(provider.Usage{InputTokens: 1000, OutputTokens: 1000}))
	x.writeGlobalConfig(t, "max_session_cost_usd = \"0.01\"\n")
	first := runCLI(t, x.ws, x.vars, "exec", "--json", "start")
	if first.code != exitOK {
		t.Fatalf("first exec: exit %d\nstderr: %s", first.code, first.stderr)
	}
	lines, _ := parseJSONLines(t, first.stdout)
	x.srv.Enqueue(providertest.Text("second"))
	second := runCLI(t, x.ws, x.vars, "exec", "--session", lines[0].SessionID, "more")
	if second.code != exitFailed || len(x.srv.Requests()) != 1 {
		t.Fatalf("exit %d, %d requests\nstderr: %s", second.code, len(x.srv.Requests()), second.stderr)
	}
	if !strings.Contains(second.stderr, "hard cost ceiling reached: $0.01125 of $0.01") {
		t.Errorf("stderr = %s", second.stderr)
	}
}

// TestExecCostCeilingUnpricedModel: under a cost ceiling a model without a
// price is refused before anything is sent, since its cost could not be
// counted.
func TestExecCostCeilingUnpricedModel(t *testing.T) {
	x := newExecEnv(t, providertest.Text("never sent"))
	x.writeGlobalConfig(t, "max_session_cost_usd = \"1\"\n")
	r := runCLI(t, x.ws, x.vars, "exec", "--model", "local-model", "hi")
	if r.code != exitFailed || len(x.srv.Requests()) != 0 {
		t.Fatalf("exit %d, %d requests\nstderr: %s", r.code, len(x.srv.Requests()), r.stderr)
	}
	if !strings.Contains(r.stderr, "hard cost ceiling: some usage has no known price") {
		t.Errorf("stderr = %s", r.stderr)
	}
}
