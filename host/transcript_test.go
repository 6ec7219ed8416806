package host_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/host/hosttest"
	"github.com/octet-agent/octet/session"
)

// writeBranch writes a session of n user/assistant entries in the
// workspace and returns its id and branch.
func writeBranch(t testing.TB, th *testHost, n int) (string, []session.Entry) {
	t.Helper()
	s, err := session.Create(th.Stack.Runtime.SessionsDir, session.Header{Cwd: th.Workspace, Title: "long"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	parent := ""
	var recs []session.Record
	for i := range n {
		e := session.Entry{ID: session.NewID(), Parent: parent, Type: session.EntryUser, Text: fmt.Sprintf("prompt %d", i)}
		if i%2 == 1 {
			e.Type, e.Text = session.EntryAssistant, ""
			e.StopReason = "completed"
			e.Items = []session.Item{{Type: session.ItemText, Text: fmt.Sprintf("answer %d", i)}}
		}
		recs = append(recs, session.EntryRecord(e))
		parent = e.ID
		if len(recs) == 4096 || i == n-1 {
			if err := s.Append(recs...); err != nil {
				t.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	return s.Header().ID, s.Branch()
}

// TestTranscriptPagesTheBranch: paging by beforeEntryId from the head
// returns the whole branch, newest first, each entry once; the same
// pages come from a session open in the process (through its index) and
// from its file; an entry not on the branch is an input error.
func TestTranscriptPagesTheBranch(t *testing.T) {
	th := newTestHost(t, hosttest.Options{})
	id, branch := writeBranch(t, th, 1234)
	s, err := th.Open(t.Context(), id, host.Binding{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []string
	before := ""
	for {
		page, err := s.Transcript(before, 100)
		if err != nil {
			t.Fatal(err)
		}
		read, err := th.ReadTranscript(id, before, 100)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(read) != fmt.Sprint(page) {
			t.Fatalf("before %q: the open session's page differs from the file's", before)
		}
		for _, e := range page.Entries {
			got = append(got, e.ID)
		}
		if page.NextBefore == "" {
			break
		}
		before = page.NextBefore
	}
	if len(got) != len(branch) {
		t.Fatalf("paged %d entries of %d", len(got), len(branch))
	}
	for i, id := range got {
		if want := branch[len(branch)-1-i].ID; id != want {
			t.Fatalf("entry %d is %s, want %s", i, id, want)
		}
	}
	var in *host.InputError
	if _, err := s.Transcript("0123456789abcdef", 10); !errors.As(err, &in) {
		t.Errorf("an entry not on the branch: %v", err)
	}
}

// BenchmarkTranscriptPage pages a 100,000-entry session open in the
// process: the newest page of 50, and the page before the 100th entry
// (found by a search of the branch from the head before; now in the
// session's index). A page should cost the same wherever it is.
//
//	go test ./host -run '^$' -bench TranscriptPage -count 5
func BenchmarkTranscriptPage(b *testing.B) {
	st := hosttest.New(b, hosttest.Options{InProcess: true})
	th := &testHost{Host: host.New(st.Runtime, nil), Stack: st}
	defer th.Host.Close()
	id, branch := writeBranch(b, th, 100_000)
	s, err := th.Open(b.Context(), id, host.Binding{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	deep := branch[100].ID
	var newest, deeper []time.Duration
	for b.Loop() {
		for _, before := range []string{"", deep} {
			start := time.Now()
			page, err := s.Transcript(before, 50)
			d := time.Since(start)
			if err != nil || len(page.Entries) != 50 {
				b.Fatalf("page before %q: %d entries, %v", before, len(page.Entries), err)
			}
			if before == "" {
				newest = append(newest, d)
			} else {
				deeper = append(deeper, d)
			}
		}
	}
	med := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Nanoseconds()) / 1000
	}
	n, d := med(newest), med(deeper)
	b.ReportMetric(n, "newest-µs")
	b.ReportMetric(d, "deep-µs")
	b.ReportMetric(d/n, "deep/newest")
}
