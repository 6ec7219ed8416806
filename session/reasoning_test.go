package session

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestReasoningRecordsSurviveReopen checks that typed reasoning records
// keep updates and baselines apart, in file order, across a reopen; that
// the effective selection is the last update and the pin the last
// baseline; and that they are not entries.
func TestReasoningRecordsSurviveReopen(t *testing.T) {
	s := newSession(t)
	at := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	if _, ok := s.Selection(); ok {
		t.Fatal("a new session has an effective selection")
	}
	base := Reasoning{Op: ReasoningBaseline, RunID: "run_1", Model: "gpt-5.1-codex", Effort: "medium", Reason: BaselineRunStart, Time: at}
	up1 := Reasoning{Op: ReasoningUpdate, RunID: "run_1", Model: "gpt-5.1-codex", Effort: "high", Time: at}
	up2 := Reasoning{Op: ReasoningUpdate, Model: "gpt-5.1", Effort: "high", Summary: "auto", Time: at}
	mustAppend(t, s, Entry{Type: EntryUser, Text: "hi"})
	if err := s.Append(ReasoningRecord(base), ReasoningRecord(up1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ReasoningRecord(up2)); err != nil {
		t.Fatal(err)
	}
	check := func(s *Session, when string) {
		t.Helper()
		if d := cmp.Diff([]Reasoning{base, up1, up2}, s.ReasoningRecords()); d != "" {
			t.Fatalf("%s: records (-want +got):\n%s", when, d)
		}
		if got, ok := s.Selection(); !ok || got != up2 {
			t.Errorf("%s: Selection = %+v, %v; want the last update", when, got, ok)
		}
		if got, ok := s.Baseline(); !ok || got != base {
			t.Errorf("%s: Baseline = %+v, %v; want the pinned baseline", when, got, ok)
		}
	}
	check(s, "before reopen")
	s2 := reopen(t, s)
	check(s2, "after reopen")
	if n := len(s2.Branch()); n != 1 {
		t.Errorf("branch has %d entries, want 1 (reasoning records are not entries)", n)
	}
	if s2.UnknownRecords() != 0 {
		t.Errorf("reasoning records counted as unknown")
	}
	for _, bad := range []Reasoning{{Op: "provider_update", Model: "m"}, {Op: ReasoningUpdate}} {
		if err := s2.Append(ReasoningRecord(bad)); err == nil {
			t.Errorf("invalid reasoning record %+v was written", bad)
		}
	}
}

// TestReasoningRecordDamageRefused: a reasoning line that is JSON but not
// a valid record is a corruption, not skipped.
func TestReasoningRecordDamageRefused(t *testing.T) {
	s := newSession(t)
	if err := s.Append(ReasoningRecord(Reasoning{Op: ReasoningUpdate, Model: "m", Effort: "low", Time: time.Now()})); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, Entry{Type: EntryUser, Text: "after"})
	if s, err := rewriteAndOpen(t, s, `"op":"update"`, `"op":"config_update"`); err == nil {
		s.Close()
		t.Fatal("a damaged reasoning record was accepted")
	}
}

// TestCompactionSkillsOfOlderVersionsSkipped: the active-skill snapshot
// is no longer written (octet has no skill registry: it was always
// empty); a compaction written with one by an earlier version still
// opens, its other fields intact.
func TestCompactionSkillsOfOlderVersionsSkipped(t *testing.T) {
	s := newSession(t)
	mustAppend(t, s, Entry{Type: EntryUser, Text: "hi"})
	mustAppend(t, s, Entry{Type: EntryCompaction, Compaction: &Compaction{Summary: "sum", ReadFiles: []string{"a.go"}, TokensBefore: 7}})
	if b, err := os.ReadFile(s.Path()); err != nil || strings.Contains(string(b), `"skills"`) {
		t.Fatalf("a skills snapshot was written (%v): %s", err, b)
	}
	s2, err := rewriteAndOpen(t, s, `"compaction":{"summary":"sum"`, `"compaction":{"summary":"sum","skills":["go"]`)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	br := s2.Branch()
	c := br[len(br)-1].Compaction
	if c == nil || c.Summary != "sum" || len(c.ReadFiles) != 1 || c.TokensBefore != 7 {
		t.Fatalf("compaction after reopen %+v", c)
	}
}
