package nvim

import (
	"strings"
	"testing"
)

// TestCheckhealth: :checkhealth octet reports the binary with its
// version, the protocol version, the key present without its value, the
// policy mode and the Neovim version; with a missing binary it says so
// and how to fix it.
func TestCheckhealth(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		rep := w.run(t, "health_test.lua").str("report")
		for _, want := range []string{"/octet: octet ", "protocol version 2", "OPENAI_API_KEY is set (its value is not shown)",
			"configuration loads", "new sessions start in mode ask", "Neovim 0."} {
			if !strings.Contains(rep, want) {
				t.Errorf("healthy report lacks %q:\n%s", want, rep)
			}
		}
		for _, bad := range []string{"test-not-a-key", "ERROR", "degraded: the server lacks"} {
			if strings.Contains(rep, bad) {
				t.Errorf("healthy report contains %q:\n%s", bad, rep)
			}
		}
		rep = w.run(t, "health_test.lua", "OCTET_TEST_MISSING=1").str("report")
		if !strings.Contains(rep, "ERROR") || !strings.Contains(rep, "no-such-octet") || !strings.Contains(rep, "was not found") ||
			!strings.Contains(rep, "go install") {
			t.Errorf("report with a missing binary:\n%s", rep)
		}
	})
}
