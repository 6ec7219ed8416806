//go:build unix

package main

import (
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

var campaignKills = flag.Int("octet.campaign", 0, "SIGKILLs of TestExecKillCampaign (0: skip it)")

// TestExecKillCampaign SIGKILLs a real `octet exec` at a random moment of
// a run that streams, runs a bash command that appends to a file, and
// streams again; then continues the session with `octet exec --session`.
// After every resume: the session reopens, every run that made a request
// has exactly one checkpoint (a killed run's recorded by the reopening),
// a request that was in flight at the kill left the session uncertain,
// and the command ran at most once (it is never re-run). Run it with
// `go test -run TestExecKillCampaign ./cmd/octet -octet.campaign=100`.
func TestExecKillCampaign(t *testing.T) {
	if *campaignKills == 0 {
		t.Skip("a fault campaign: run it with -octet.campaign=N")
	}
	var inFlight, recordedLate, ran int
	start := time.Now()
	for i := range *campaignKills {
		x := newExecEnv(t,
			providertest.Reply(providertest.Message(strings.Repeat("thinking aloud ", 20)), providertest.FunctionCall("b1", "bash", `{"command":"echo ran >> ran.txt; sleep 0.1"}`)).Pace(2*time.Millisecond),
			providertest.Text(strings.Repeat("the final answer streams ", 40)).Pace(2*time.Millisecond),
			providertest.Text("resumed"),
		)
		cmd := x.octetCmd(t, "exec", "--json", "campaign")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.IntN(900)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		files := x.sessionFiles(t)
		if len(files) != 1 {
			continue // killed before the session was created
		}
		s, err := session.Inspect(files[0])
		if err != nil {
			t.Fatalf("kill %d: the session does not reopen: %v", i, err)
		}
		killedInFlight := s.Totals().UnsettledDispatches > 0
		open := len(s.OpenRuns())
		s.Close()
		sid := strings.TrimSuffix(filepath.Base(files[0]), ".jsonl")
		r := x.runOctet(t, "exec", "--session", sid, "continue")
		if r.code != exitOK {
			t.Fatalf("kill %d: continuing: exit %d\n%s", i, r.code, r.stderr)
		}
		s, err = session.Inspect(files[0])
		if err != nil {
			t.Fatal(err)
		}
		runs := map[string]int{}
		for _, c := range s.Checkpoints() {
			runs[c.RunID]++
		}
		for id, n := range runs {
			if n != 1 {
				t.Errorf("kill %d: run %s has %d checkpoints", i, id, n)
			}
		}
		if left := s.OpenRuns(); len(left) != 0 {
			raw, _ := os.ReadFile(files[0])
			t.Errorf("kill %d: runs without a checkpoint after the resume: %v (before the resume: %d)\n%s\nresume's stderr:\n%s", i, left, open, raw, r.stderr)
		}
		if killedInFlight && !s.Totals().Uncertain {
			t.Errorf("kill %d: a request was in flight, and the session is not uncertain", i)
		}
		s.Close()
		b, _ := os.ReadFile(filepath.Join(x.ws, "ran.txt"))
		if n := strings.Count(string(b), "ran"); n > 1 {
			t.Errorf("kill %d: the command ran %d times", i, n)
		} else {
			ran += n
		}
		if killedInFlight {
			inFlight++
		}
		recordedLate += open
	}
	t.Logf("%d kills in %s: %d with a request in flight (all uncertain after the resume), %d runs recorded late by the reopening, the command ran in %d (never twice)",
		*campaignKills, time.Since(start).Round(time.Second), inFlight, recordedLate, ran)
}
