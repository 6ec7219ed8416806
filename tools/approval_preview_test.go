//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApprovalShowsWholeCommand is the reported bypass: "echo ok", 8,200
// spaces and "; touch pwned" used to reach the approver clipped to 8 KiB
// with its "truncated" marker cut too, so "touch pwned" was approved
// unseen. Through the real broker and bash, the approver now sees the tail
// (the spaces made visible as a count); approving it is an informed
// decision.
func TestApprovalShowsWholeCommand(t *testing.T) {
	ws := t.TempDir()
	b := newBash(t, Config{Root: ws})
	ap := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: false, Digest: r.Digest}, nil
	}}
	br := NewBroker(BrokerConfig{Policy: ControlledBashApproval, Approver: ap})
	cmd := "echo ok" + strings.Repeat(" ", 8200) + "; touch pwned"
	_, d := br.Dispatch(t.Context(), mustHost(t, b), DispatchRequest{CallID: "c", Tool: "bash",
		Arguments: argsJSON(t, map[string]any{"command": cmd})}, DispatchObserver{})
	if d.Reason != ReasonApprovalDenied {
		t.Fatalf("decision %+v", d)
	}
	reqs := ap.requests()
	if len(reqs) != 1 || reqs[0].Detail != "echo ok⟨8200 spaces⟩; touch pwned" {
		t.Fatalf("approver saw %q", reqs[0].Detail)
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned")); err == nil {
		t.Fatal("a denied command ran")
	}
}

// TestApprovalRefusesWhatCannotBeShownWhole: a command or diff whose
// rendering exceeds the prompt's bound is refused before any approver is
// asked (even one that approves everything), with the static
// model-visible text telling the model to split it; nothing runs.
func TestApprovalRefusesWhatCannotBeShownWhole(t *testing.T) {
	ws := t.TempDir()
	writeTestFile(t, filepath.Join(ws, "a.txt"), "one\n")
	b := newBash(t, Config{Root: ws})
	ed, err := NewEdit(Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	wr, err := NewWrite(Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	host := mustHost(t, b, ed, wr)
	ap := approveAll()
	br := NewBroker(BrokerConfig{Policy: ControlledBashApproval, Approver: ap})
	big := strings.Repeat("x\n", 200<<10) // 400 KiB of new lines
	for _, tt := range []struct {
		name, tool string
		args       map[string]any
	}{
		{"long command", "bash", map[string]any{"command": "touch pwned; echo " + strings.Repeat("a", MaxPreviewDetail)}},
		// Short in bytes, long once its hidden characters are spelled out.
		{"invisible-heavy command", "bash", map[string]any{"command": "touch pwned; echo " + strings.Repeat("a\u200b", 1000)}},
		{"big edit", "edit", map[string]any{"path": "a.txt", "old_text": "one", "new_text": big}},
		{"big write", "write", map[string]any{"path": "b.txt", "content": big}},
		{"big overwrite", "write", map[string]any{"path": "a.txt", "content": "one\n" + big}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := ap.count()
			res, d := br.Dispatch(t.Context(), host, DispatchRequest{CallID: "c-" + tt.name, Tool: tt.tool,
				Arguments: argsJSON(t, tt.args)}, DispatchObserver{})
			if d.Reason != ReasonPreviewTooLarge || !res.IsError || !strings.Contains(res.Text, "Split it into smaller calls") {
				t.Fatalf("decision %+v, result %q", d, res.Text)
			}
			if ap.count() != before {
				t.Error("the approver was asked to approve what it could not see")
			}
		})
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned")); err == nil {
		t.Error("a refused command ran")
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(data) != "one\n" {
		t.Errorf("a.txt changed: %d bytes", len(data))
	}
	if _, err := os.Stat(filepath.Join(ws, "b.txt")); err == nil {
		t.Error("a refused write ran")
	}
}

// TestApprovalDiffIsWhole: a write whose diff fits the bound (100 KiB,
// which used to be cut at 50 KiB with "[diff truncated]") is shown whole.
func TestApprovalDiffIsWhole(t *testing.T) {
	ws := t.TempDir()
	wr, err := NewWrite(Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	ap := approveAll()
	br := NewBroker(BrokerConfig{Policy: Controlled, Approver: ap})
	content := strings.Repeat("line\n", 20<<10) + "LAST LINE\n"
	_, d := br.Dispatch(t.Context(), mustHost(t, wr), DispatchRequest{CallID: "w", Tool: "write",
		Arguments: argsJSON(t, map[string]any{"path": "big.txt", "content": content})}, DispatchObserver{})
	if d.Decision != DecisionAllowed {
		t.Fatalf("decision %+v", d)
	}
	diff := ap.requests()[0].Diff
	if !strings.Contains(diff, "+LAST LINE") || strings.Contains(diff, "truncated") || strings.Count(diff, "+line") != 20<<10 {
		t.Errorf("diff not whole: %d bytes, ends %q", len(diff), diff[max(0, len(diff)-40):])
	}
}

// TestPreviewFallbackIsBounded: a tool without a Previewer shows its
// canonical arguments, under the same whole-or-refuse rule.
func TestPreviewFallbackIsBounded(t *testing.T) {
	sp := newShellProbe("shell")
	ap := approveAll()
	br := NewBroker(BrokerConfig{Policy: ControlledBashApproval, Approver: ap})
	long, _ := json.Marshal(map[string]any{"command": strings.Repeat("b", MaxPreviewDetail)})
	_, d := br.Dispatch(t.Context(), mustHost(t, sp), DispatchRequest{CallID: "s", Tool: "shell", Arguments: long}, DispatchObserver{})
	if d.Reason != ReasonPreviewTooLarge || ap.count() != 0 || sp.executed.Load() != 0 {
		t.Fatalf("decision %+v, asked %d, ran %d", d, ap.count(), sp.executed.Load())
	}
}

// TestApprovalNamesOddPathsOnOneLine: a file name the model chose with a
// newline (or another control) in it cannot fake lines in the prompt:
// the title stays one line, and the detail and the diff's headers name
// the path quoted, so no line of the diff is one the content did not
// add ("+fake" here would read as an added line).
func TestApprovalNamesOddPathsOnOneLine(t *testing.T) {
	ws := t.TempDir()
	wr, err := NewWrite(Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	ap := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: false, Digest: r.Digest}, nil
	}}
	br := NewBroker(BrokerConfig{Policy: ControlledBashApproval, Approver: ap})
	name := "odd\n+fake line\t\u202e.txt"
	br.Dispatch(t.Context(), mustHost(t, wr), DispatchRequest{CallID: "c", Tool: "write",
		Arguments: argsJSON(t, map[string]any{"path": name, "content": "real\n"})}, DispatchObserver{})
	reqs := ap.requests()
	if len(reqs) != 1 {
		t.Fatalf("approver asked %d times", len(reqs))
	}
	r := reqs[0]
	quoted := `"odd\n+fake line\t\u202e.txt"`
	if strings.ContainsAny(r.Title, "\n\t") || r.Title != "write "+quoted {
		t.Errorf("title %q", r.Title)
	}
	if !strings.Contains(r.Detail, quoted) || strings.Contains(r.Detail, "\n") {
		t.Errorf("detail %q", r.Detail)
	}
	for _, line := range strings.Split(r.Diff, "\n") {
		if strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "+++ ") && line != "+real" {
			t.Errorf("the diff has a line the content did not add: %q\n%s", line, r.Diff)
		}
	}
	if !strings.Contains(r.Diff, `+++ "b/odd\n+fake line\t\u202e.txt"`) {
		t.Errorf("diff header does not name the path quoted:\n%s", r.Diff)
	}
}
