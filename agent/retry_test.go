package agent

import (
	"testing"

	pt "github.com/octet-agent/octet/provider/providertest"
)

// TestNoRetryUsageJudgement checks that the default policy records usage as
// unknown exactly when accepted work may hide behind the failure: a
// definite refusal status (401, 400) is not billed and leaves the ledger
// certain; a 5xx, a 408 and a body interruption do not.
func TestNoRetryUsageJudgement(t *testing.T) {
	cases := []struct {
		name      string
		turn      pt.Turn
		uncertain bool
	}{
		{"401", pt.Status(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided"), false},
		{"400", pt.Status(400, "invalid_request_error", "unsupported_parameter", "bad"), false},
		{"503", pt.Status(503, "server_error", "", "overloaded"), true},
		{"408", pt.Status(408, "timeout", "", "request timeout"), true},
		{"body interrupted", pt.Text("partial answer that is cut").DropAfter(3), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpt{retry: NoRetry{}})
			h.srv.Enqueue(tc.turn)
			evs := drain(t, h.prompt("hi", PromptOptions{}))
			checkRunEvents(t, evs, OutcomeFailed)
			if got := h.agent.cfg.Session.Totals().Uncertain; got != tc.uncertain {
				t.Fatalf("session usage uncertain = %v, want %v", got, tc.uncertain)
			}
			if n := len(h.srv.Requests()); n != 1 {
				t.Fatalf("%d requests, want exactly one (NoRetry)", n)
			}
		})
	}
}
