package session

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestApprovalRecordsSurviveReopen checks that approval records (grants,
// revocations, policy) are kept in file order across a reopen, beside
// entries, in a batch and alone, and that a damaged one is refused.
func TestApprovalRecordsSurviveReopen(t *testing.T) {
	s := newSession(t)
	at := time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)
	grant := Approval{Op: ApprovalGrant, RuleID: "rule_1", Tool: "bash", Effect: "host_process",
		Command: "go test ./...\n\"x\"", TimeoutMs: 500, Dir: "/work", EnvDigest: strings.Repeat("a", 64), Policy: "controlled", Time: at}
	mustAppend(t, s, Entry{Type: EntryUser, Text: "hi"})
	if err := s.Append(ApprovalRecord(grant)); err != nil {
		t.Fatal(err)
	}
	pol := Approval{Op: ApprovalPolicy, Policy: "controlled_bash_approval", Time: at}
	rev := Approval{Op: ApprovalRevoke, RuleID: "rule_1", Time: at}
	if err := s.Append(ApprovalRecord(pol), ApprovalRecord(rev)); err != nil {
		t.Fatal(err)
	}
	want := []Approval{grant, pol, rev}
	if d := cmp.Diff(want, s.Approvals()); d != "" {
		t.Fatalf("before reopen (-want +got):\n%s", d)
	}
	s2 := reopen(t, s)
	if d := cmp.Diff(want, s2.Approvals()); d != "" {
		t.Fatalf("after reopen (-want +got):\n%s", d)
	}
	if n := len(s2.Branch()); n != 1 {
		t.Errorf("branch has %d entries, want 1 (approvals are not entries)", n)
	}
	if s2.UnknownRecords() != 0 {
		t.Errorf("approval records counted as unknown")
	}
	if err := s2.Append(ApprovalRecord(Approval{Op: "widen"})); err == nil {
		t.Error("an approval record with an unknown op was written")
	}
}

// TestApprovalRecordDamageRefused checks that an approval line that is
// JSON but not an approval is a corruption, not skipped.
func TestApprovalRecordDamageRefused(t *testing.T) {
	s := newSession(t)
	if err := s.Append(ApprovalRecord(Approval{Op: ApprovalRevoke, RuleID: "r", Time: time.Now()})); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, Entry{Type: EntryUser, Text: "after"})
	if s, err := rewriteAndOpen(t, s, `"op":"revoke"`, `"op":7`); err == nil {
		s.Close()
		t.Fatal("a damaged approval record was accepted")
	}
}

// reopen closes s and opens its file again (closed when the test ends).
func reopen(t *testing.T, s *Session) *Session {
	t.Helper()
	path := s.Path()
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

// rewriteAndOpen closes s, replaces the first old in its file with new
// (failing the test when there is none) and opens the file again.
func rewriteAndOpen(t *testing.T, s *Session, old, new string) (*Session, error) {
	t.Helper()
	path := s.Path()
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(b), old, new, 1)
	if changed == string(b) {
		t.Fatalf("no %s in %s", old, b)
	}
	if err := os.WriteFile(path, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	return Open(path)
}
