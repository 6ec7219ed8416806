package server

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// diagCaps are docCaps with experimental.octet.diagnostics.
func diagCaps() map[string]any {
	c := docCaps()
	c["experimental"].(map[string]any)["octet"].(map[string]any)["diagnostics"] = true
	return c
}

// lspDiag is an LSP Diagnostic at line (0-based) of severity.
func lspDiag(line, severity int, source, message string) map[string]any {
	return map[string]any{
		"range":    map[string]any{"start": map[string]any{"line": line, "character": 4}, "end": map[string]any{"line": line, "character": 9}},
		"severity": severity, "source": source, "code": "E1", "message": message,
	}
}

// sendDiagnostics is the editor's octet/diagnostics for path.
func (e *fakeEditor) sendDiagnostics(path string, diags ...map[string]any) {
	e.notify("octet/diagnostics", map[string]any{"uri": "file://" + path, "diagnostics": append([]map[string]any{}, diags...)})
}

// offeredTools returns the tool names of the provider's last request.
func offeredTools(st *stack) []string {
	reqs := st.Provider.Requests()
	var out []string
	list, _ := reqs[len(reqs)-1].Body["tools"].([]any)
	for _, t := range list {
		m, _ := t.(map[string]any)
		out = append(out, m["name"].(string))
	}
	return out
}

// TestDiagnosticsTool: an editor that advertises diagnostics forwards
// them; the model's diagnostics tool (a workspace read: no approval)
// lists the latest of every file, workspace-relative, bounded; a file's
// empty list clears it. A client that does not advertise them is never
// offered the tool.
func TestDiagnosticsTool(t *testing.T) {
	for _, tc := range []struct {
		name    string
		caps    map[string]any
		offered bool
	}{{"forwarded", diagCaps(), true}, {"stock", docCaps(), false}} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t, tools.Controlled)
			st.Provider.Enqueue(
				providertest.Reply(providertest.FunctionCall("call_1", "diagnostics", `{}`)),
				providertest.Reply(providertest.FunctionCall("call_2", "diagnostics", `{"path":"b.go"}`)),
				providertest.Text("Seen."),
			)
			e := newEditor(t, Options{Runtime: st.Runtime})
			e.initializeWith(st.Workspace, tc.caps)
			e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
			a, b := filepath.Join(st.Workspace, "a.go"), filepath.Join(st.Workspace, "b.go")
			e.sendDiagnostics(a, lspDiag(11, 1, "compiler", "undefined: foo\nsecond line"), lspDiag(2, 2, "vet", "unused x"))
			e.sendDiagnostics(b, lspDiag(0, 1, "compiler", "gone soon"))
			e.sendDiagnostics(b)
			e.sendDiagnostics("/elsewhere/c.go", lspDiag(0, 1, "compiler", "outside"))
			sid := e.newSession()
			waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "problems?"}))
			if got := slices.Contains(offeredTools(st), "diagnostics"); got != tc.offered {
				t.Fatalf("diagnostics offered: %v, want %v (tools %v)", got, tc.offered, offeredTools(st))
			}
			if !tc.offered {
				return
			}
			out := lastToolOutputs(st)
			want := "2 problems in 1 file (2 files reported by the editor, as its language servers last reported them):\n" +
				"a.go:3:5: warning: unused x [vet E1]\n" +
				"a.go:12:5: error: undefined: foo second line [compiler E1]"
			if len(out) != 2 || out[0] != want {
				t.Errorf("diagnostics {} = %q, want %q", out, want)
			}
			if len(out) == 2 && out[1] != "No problems in b.go (1 file reported by the editor)." {
				t.Errorf("diagnostics {path: b.go} = %q", out[1])
			}
		})
	}
}

// TestDiagnosticsAfterEdit: after an edit of an open document, the tool
// result says which diagnostics appeared and which went away once the
// editor has sent fresh ones for it, waiting at most 1.5 s; an editor
// that sends none in time is named, and a document the editor never
// reported diagnostics for (no language server) is not waited for.
func TestDiagnosticsAfterEdit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reported bool // the editor sent diagnostics for a.txt before
		fresh    bool // and sends fresh ones after the edit
		want     string
	}{
		{"fresh", true, true, "Edited a.txt (1 replacement).\n\nThe editor's diagnostics after this change (" +
			"|s later): 1 appeared, 1 went away.\n  appeared: a.txt:2:5: warning: unused x [vet E1]\n  went away: a.txt:1:5: error: undefined: hello [compiler E1]"},
		{"late", true, false, "Edited a.txt (1 replacement).\n\nThe editor sent no diagnostics for a.txt within 1.5 s of the change (its language server may still be working); call diagnostics to see them later."},
		{"never reported", false, false, "Edited a.txt (1 replacement)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, e, b, file := docEditStack(t, Options{}, diagCaps())
			if tc.reported {
				e.sendDiagnostics(file, lspDiag(0, 1, "compiler", "undefined: hello"))
			}
			e.respond("workspace/applyEdit", func(params json.RawMessage) (any, error) {
				res, err := b.applyEdits(params)
				if tc.fresh {
					go func() {
						time.Sleep(100 * time.Millisecond) // the language server, then the plugin's debounce
						e.sendDiagnostics(file, lspDiag(1, 2, "vet", "unused x"))
					}()
				}
				return res, err
			})
			sid := e.newSession()
			if ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit"})); ans.Outcome != "completed" {
				t.Fatalf("answer %+v", ans)
			}
			out := lastToolOutputs(st)
			before, after, _ := strings.Cut(tc.want, "|")
			if len(out) != 1 || !strings.HasPrefix(out[0], before) || !strings.HasSuffix(out[0], after) {
				t.Errorf("edit result %q, want %q", out, tc.want)
			}
		})
	}
}
