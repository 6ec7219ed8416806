package nvim

import (
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestStatuslineSessionTotals: the statusline's cost is the session's
// total, not the last run's: each prompt of 160,000 input tokens ($0.20
// at gpt-5.1-codex's list price of $1.25 a million) adds to it, and a restarted
// Neovim resuming the session goes on from the session's total.
func TestStatuslineSessionTotals(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		usage := provider.Usage{InputTokens: 160_000}
		for range 3 {
			w.prov.Enqueue(providertest.Text("Answered.").WithUsage(usage))
		}
		first := w.run(t, "totals_test.lua")
		second := w.run(t, "totals_test.lua", "OCTET_TEST_CASE=resumed")
		for _, c := range []struct {
			r      result
			k, val string
		}{{first, "first", "$0.20"}, {first, "second", "$0.40"}, {second, "resumed", "$0.40"}, {second, "third", "$0.60"}} {
			if st := c.r.str(c.k); !strings.Contains(st, " · "+c.val) {
				t.Errorf("statusline %s: %q, want the session's %s", c.k, st, c.val)
			}
		}
	})
}
