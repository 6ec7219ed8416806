package nvim

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestDiagnosticsForwarded drives testdata/diagnostics_test.lua: what
// vim.diagnostic holds for an open buffer reaches octet (debounced,
// octet/diagnostics), so the model's diagnostics tool lists it
// (workspace-relative, line:col in the negotiated encoding, severity,
// source, code); after the model's edit of the buffer the linter's fresh
// (empty) list reaches octet and the edit's result says the diagnostic
// went away.
func TestDiagnosticsForwarded(t *testing.T) {
	eachNvim(t, func(t *testing.T, w *world) {
		writeFile(t, filepath.Join(w.ws, "a.go"), "package a\n\nfunc f() { s := \"é\"; _ = s; foo() }\n")
		w.prov.Enqueue(
			providertest.Reply(providertest.FunctionCall("d1", "diagnostics", `{}`)),
			providertest.Reply(providertest.FunctionCall("e1", "edit", `{"path":"a.go","old_text":"foo()","new_text":"println()"}`)),
			providertest.Text("Fixed the undefined call."),
		)
		r := w.run(t, "diagnostics_test.lua")
		// The diagnostic starts at byte 29 (0-based): "é" is two bytes.
		if in := inputText(t, w.prov, 1); !strings.Contains(in, "a.go:3:30: error: undefined: foo [compiler UndeclaredName]") {
			t.Errorf("the diagnostics tool's result: %.3000s", in)
		}
		in := inputText(t, w.prov, 2)
		if !strings.Contains(in, "1 went away") || !strings.Contains(in, "undefined: foo") {
			t.Errorf("the edit's result does not say the diagnostic went away: %.3000s", in)
		}
		if got := r.str("buffer"); !strings.Contains(got, "println()") {
			t.Errorf("buffer after the edit: %q", got)
		}
		if n, _ := r["sent"].(float64); n < 2 || n > 4 {
			t.Errorf("octet/diagnostics sent %v times; want the first list and the one after the edit (debounced)", n)
		}
	})
}
