//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// shownFixture is a workspace with real edit and write tools registered on
// a real host, behind a Controlled broker (workspace mutations ask).
type shownFixture struct {
	ws   string
	host *Host
	ed   *EditTool
	wr   *WriteTool
}

func newShownFixture(t *testing.T) *shownFixture {
	t.Helper()
	ws := t.TempDir()
	_, ed, wr := fileTools(t, Config{Root: ws})
	return &shownFixture{ws: ws, host: mustHost(t, ed, wr), ed: ed, wr: wr}
}

func (f *shownFixture) path(name string) string { return filepath.Join(f.ws, name) }

// approverThatTampers approves every request after running tamper while
// the prompt is "shown", like a person who saves the file in their editor
// before clicking approve.
func approverThatTampers(tamper func()) *scriptedApprover {
	return &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		tamper()
		return Approval{Approved: true, Digest: r.Digest}, nil
	}}
}

func shownReq(callID, tool, args string) DispatchRequest {
	return DispatchRequest{Principal: "p", RunID: "r", CallID: callID, Tool: tool, Arguments: json.RawMessage(args)}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEditRefusedWhenFileChangesWhileApprovalShown: the approver sees a
// diff against "one two three", the file is rewritten while the prompt is
// open, and the approved edit (whose old_text still matches) must not be
// applied to the new content.
func TestEditRefusedWhenFileChangesWhileApprovalShown(t *testing.T) {
	f := newShownFixture(t)
	p := f.path("a.txt")
	mustWrite(t, p, "one\ntwo\nthree\n")
	const tampered = "zero\ntwo\nfour\n"
	ap := approverThatTampers(func() { mustWrite(t, p, tampered) })
	b := NewBroker(BrokerConfig{Policy: Controlled, Approver: ap})
	res, d := b.Dispatch(context.Background(), f.host, shownReq("call-e1", "edit", `{"path":"a.txt","old_text":"two","new_text":"2"}`), DispatchObserver{})
	if d.Decision != DecisionAllowed || d.Reason != ReasonApproved {
		t.Fatalf("decision = %+v", d)
	}
	if !res.IsError || res.Text != errChangedSinceShown {
		t.Fatalf("result = %+v, want the refusal %q", res, errChangedSinceShown)
	}
	if got := readBack(t, p); got != tampered {
		t.Fatalf("file = %q, want the tampered content kept", got)
	}
	if shown := ap.requests()[0].Diff; shown != unifiedDiff("a.txt", "one\ntwo\nthree\n", "one\n2\nthree\n") {
		t.Fatalf("shown diff = %q", shown)
	}
	if n := f.ed.shown.len(); n != 0 {
		t.Fatalf("%d previews remembered after execute, want 0", n)
	}
}

// TestEditAppliesExactlyTheShownDiff: unchanged between prompt and
// execution, the edit applies, and the change on disk is exactly the
// diff the approver saw.
func TestEditAppliesExactlyTheShownDiff(t *testing.T) {
	f := newShownFixture(t)
	p := f.path("a.txt")
	const before = "one\ntwo\nthree\n"
	mustWrite(t, p, before)
	ap := approveAll()
	b := NewBroker(BrokerConfig{Policy: Controlled, Approver: ap})
	res, d := b.Dispatch(context.Background(), f.host, shownReq("call-e2", "edit", `{"path":"a.txt","old_text":"two","new_text":"2"}`), DispatchObserver{})
	if d.Decision != DecisionAllowed || res.IsError {
		t.Fatalf("edit = %+v, %+v", res, d)
	}
	after := readBack(t, p)
	if after != "one\n2\nthree\n" {
		t.Fatalf("file = %q", after)
	}
	if shown, applied := ap.requests()[0].Diff, unifiedDiff("a.txt", before, after); shown != applied || shown == "" {
		t.Fatalf("shown diff %q, applied diff %q", shown, applied)
	}
}

// TestWriteBoundToShownState covers write: absent must stay absent, an
// existing file must keep the shown content, and a deleted file is not
// silently recreated; the normal create still works.
func TestWriteBoundToShownState(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initial *string // nil: absent
		tamper  func(p string) error
		want    *string // nil: absent after the refusal
	}{
		{"created while shown", nil, func(p string) error { return os.WriteFile(p, []byte("user\n"), 0o644) }, ptr("user\n")},
		{"modified while shown", ptr("old\n"), func(p string) error { return os.WriteFile(p, []byte("user\n"), 0o644) }, ptr("user\n")},
		{"deleted while shown", ptr("old\n"), os.Remove, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newShownFixture(t)
			p := f.path("w.txt")
			if tc.initial != nil {
				mustWrite(t, p, *tc.initial)
			}
			ap := approverThatTampers(func() {
				if err := tc.tamper(p); err != nil {
					t.Error(err)
				}
			})
			b := NewBroker(BrokerConfig{Policy: Controlled, Approver: ap})
			res, d := b.Dispatch(context.Background(), f.host, shownReq("call-w", "write", `{"path":"w.txt","content":"model\n"}`), DispatchObserver{})
			if d.Decision != DecisionAllowed || !res.IsError || res.Text != errChangedSinceShown {
				t.Fatalf("result = %+v, decision = %+v", res, d)
			}
			got, err := os.ReadFile(p)
			switch {
			case tc.want == nil && !os.IsNotExist(err):
				t.Fatalf("file exists after refusal: %q, %v", got, err)
			case tc.want != nil && (err != nil || string(got) != *tc.want):
				t.Fatalf("file = %q, %v; want %q", got, err, *tc.want)
			}
		})
	}
	t.Run("unchanged create", func(t *testing.T) {
		f := newShownFixture(t)
		ap := approveAll()
		b := NewBroker(BrokerConfig{Policy: Controlled, Approver: ap})
		res, d := b.Dispatch(context.Background(), f.host, shownReq("call-w", "write", `{"path":"sub/w.txt","content":"model\n"}`), DispatchObserver{})
		if d.Decision != DecisionAllowed || res.IsError {
			t.Fatalf("write = %+v, %+v", res, d)
		}
		if got := readBack(t, f.path("sub/w.txt")); got != "model\n" {
			t.Fatalf("file = %q", got)
		}
		if shown := ap.requests()[0].Diff; shown != unifiedDiff("sub/w.txt", "", "model\n") {
			t.Fatalf("shown diff = %q", shown)
		}
	})
}

func ptr(s string) *string { return &s }

// TestChangeAfterApprovalBeforeExecuteRefused: a change after the
// approval answer but before the tool runs (here from a trusted
// before_tool_call hook) is also caught, although the model never read
// the file and the edit itself still applies to the new content.
func TestChangeAfterApprovalBeforeExecuteRefused(t *testing.T) {
	f := newShownFixture(t)
	p := f.path("a.txt")
	mustWrite(t, p, "x = 1\n")
	hook := Hooks{BeforeToolCall: func(context.Context, EffectIntent) error {
		mustWrite(t, p, "x = 1\ny = 2\n")
		return nil
	}}
	b := NewBroker(BrokerConfig{Policy: Controlled, Approver: approveAll(), Hooks: []Hooks{hook}})
	res, _ := b.Dispatch(context.Background(), f.host, shownReq("call-h", "edit", `{"path":"a.txt","old_text":"x = 1","new_text":"x = 3"}`), DispatchObserver{})
	if !res.IsError || res.Text != errChangedSinceShown {
		t.Fatalf("result = %+v", res)
	}
	if got := readBack(t, p); got != "x = 1\ny = 2\n" {
		t.Fatalf("file = %q", got)
	}
}

// TestShownBindingIsPerCall: a preview whose call was denied does not
// bind a later call with other id; a preview outside an approval (no
// call id) records nothing; an unapproved auto-admitted call behaves as
// before.
func TestShownBindingIsPerCall(t *testing.T) {
	f := newShownFixture(t)
	p := f.path("a.txt")
	mustWrite(t, p, "one\n")
	args := `{"path":"a.txt","old_text":"one","new_text":"1"}`
	deny := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		mustWrite(t, p, "one\nextra\n")
		return Approval{Approved: false, Digest: r.Digest}, nil
	}}
	if _, d := NewBroker(BrokerConfig{Policy: Controlled, Approver: deny}).Dispatch(context.Background(), f.host, shownReq("call-1", "edit", args), DispatchObserver{}); d.Reason != ReasonApprovalDenied {
		t.Fatalf("denied call = %+v", d)
	}
	if n := f.ed.shown.len(); n != 1 {
		t.Fatalf("remembered %d previews, want the denied call's 1", n)
	}
	res, _ := NewBroker(BrokerConfig{Policy: Controlled, Approver: approveAll()}).Dispatch(context.Background(), f.host, shownReq("call-2", "edit", args), DispatchObserver{})
	if res.IsError || readBack(t, p) != "1\nextra\n" {
		t.Fatalf("second call = %+v, file %q", res, readBack(t, p))
	}
	if _, err := f.ed.Preview(context.Background(), json.RawMessage(args)); err != nil {
		t.Fatal(err)
	}
	if n := f.ed.shown.len(); n != 1 {
		t.Fatalf("a preview without call id was remembered (%d entries)", n)
	}
	q := f.path("b.txt")
	mustWrite(t, q, "one\n")
	res, d := NewBroker(BrokerConfig{Policy: UnsafeHost}).Dispatch(context.Background(), f.host, shownReq("call-3", "edit", `{"path":"b.txt","old_text":"one","new_text":"1"}`), DispatchObserver{})
	if res.IsError || d.Reason == ReasonApproved || readBack(t, q) != "1\n" {
		t.Fatalf("auto-admitted edit = %+v %+v", res, d)
	}
}

// TestShownPriorsBounded: the store keeps at most maxShownPriors entries,
// evicting the least recently recorded, and take removes an entry.
func TestShownPriorsBounded(t *testing.T) {
	s := newShownPriors()
	args := json.RawMessage(`{}`)
	for i := range maxShownPriors + 50 {
		s.remember(fmt.Sprintf("call-%d", i), args, fileState{readable: true})
	}
	if s.len() != maxShownPriors {
		t.Fatalf("len = %d, want %d", s.len(), maxShownPriors)
	}
	if _, ok := s.take("call-0", args); ok {
		t.Fatal("oldest entry not evicted")
	}
	last := fmt.Sprintf("call-%d", maxShownPriors+49)
	if _, ok := s.take(last, json.RawMessage(`{"x":1}`)); ok {
		t.Fatal("entry matched other arguments")
	}
	if _, ok := s.take(last, args); !ok {
		t.Fatal("newest entry missing")
	}
	if _, ok := s.take(last, args); ok {
		t.Fatal("entry not dropped after use")
	}
}
