//go:build unix

package session

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var kills = flag.Int("session.kills", 200, "number of SIGKILLs in TestCrashKillLoop")

// killsPerSession bounds how many kills one session file accumulates.
const killsPerSession = 8

// Child processes are this test binary re-executed with OCTET_SESSION_CHILD
// set; TestMain runs the child's loop instead of the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("OCTET_SESSION_CHILD") {
	case "":
		os.Exit(m.Run())
	case "crash":
		crashChild(os.Getenv("OCTET_SESSION_PATH"))
	case "open":
		openChild(os.Getenv("OCTET_SESSION_PATH"))
	case "writer":
		n, _ := strconv.Atoi(os.Getenv("OCTET_SESSION_N"))
		writerChild(os.Getenv("OCTET_SESSION_PATH"), os.Getenv("OCTET_SESSION_NAME"), n)
	case "churn":
		n, _ := strconv.Atoi(os.Getenv("OCTET_SESSION_N"))
		if err := churnSessions(os.Getenv("OCTET_SESSION_PATH"), n, uint64(os.Getpid())); err != nil {
			childFatal(err)
		}
	}
	os.Exit(0)
}

func childFatal(err error) {
	fmt.Fprintln(os.Stderr, "child:", err)
	os.Exit(2)
}

// crashChild appends forever, printing each entry id once its append has
// returned. It is killed by the parent.
func crashChild(path string) {
	s, err := Open(path)
	if err != nil {
		childFatal(err)
	}
	out := os.Stdout
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	for i := 0; ; i++ {
		size := 64 + rng.IntN(512)
		if rng.IntN(16) == 0 {
			size = 32<<10 + rng.IntN(128<<10) // widen the window for a torn write
		}
		e := Entry{ID: NewID(), Type: EntryAssistant, RunID: "crash", Items: []Item{{Type: ItemText, Text: strings.Repeat("z", size)}}}
		var err error
		if rng.IntN(2) == 0 {
			e.StopReason = "batched" // written with its usage record
			err = s.Append(EntryRecord(e), UsageRecord(Usage{RunID: "crash", RequestID: e.ID, Input: 1}))
		} else {
			_, err = s.AppendEntry(e)
		}
		if err != nil {
			childFatal(err)
		}
		if _, err := fmt.Fprintln(out, e.ID); err != nil {
			childFatal(err)
		}
	}
}

// writerChild appends n entries after the parent says go on stdin, then
// prints "done <foreign records folded> <hook calls>".
func writerChild(path, name string, n int) {
	s, err := Open(path)
	if err != nil {
		childFatal(err)
	}
	hookCalls, hookRecords := 0, 0
	s.SetForeignAppendHook(func(fa ForeignAppend) { hookCalls++; hookRecords += fa.Records })
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		childFatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("%s-%04d", name, i)
		if i%3 == 0 {
			err = s.Append(EntryRecord(Entry{ID: id, Type: EntryUser, Text: id}), UsageRecord(Usage{RequestID: id, Input: 1}))
		} else {
			_, err = s.AppendEntry(Entry{ID: id, Type: EntryUser, Text: id})
		}
		if err != nil {
			childFatal(err)
		}
	}
	fmt.Printf("done %d %d %d\n", s.ForeignAppends(), hookCalls, hookRecords)
}

func childCmd(t *testing.T, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestCrashKillLoop kills appending children at random moments and checks
// after every kill that the session reopens and holds every record whose
// append returned, in order. Several independent loops run at once: the
// time goes into process start-up, not CPU.
func TestCrashKillLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const workers = 4
	start := time.Now()
	type result struct{ acked, torn int }
	results := make(chan result, workers)
	for w := range workers {
		n := *kills / workers
		if w < *kills%workers {
			n++
		}
		go func() {
			acked, torn := killLoop(t, n, uint64(w))
			results <- result{acked, torn}
		}()
	}
	var acked, torn int
	for range workers {
		r := <-results
		acked += r.acked
		torn += r.torn
	}
	t.Logf("%d kills in %v, %d acknowledged appends, %d torn tails seen by Inspect", *kills, time.Since(start).Round(time.Millisecond), acked, torn)
}

// killLoop runs n kill cycles and returns how many appends were
// acknowledged and how many torn tails Inspect saw. It reports failures
// with t.Errorf and stops.
func killLoop(t *testing.T, n int, seed uint64) (total, torn int) {
	var path string
	var acked []string
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	base := 0
	for k := range n {
		// A fresh session every few kills keeps each reopen cheap under
		// the race detector; within a session the kills accumulate.
		if k%killsPerSession == 0 {
			path, _ = sessionWith(t, 0)
			total += len(acked)
			acked, base = nil, k
		}
		cmd := childCmd(t, "OCTET_SESSION_CHILD=crash", "OCTET_SESSION_PATH="+path)
		stdout, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			t.Errorf("start child: %v", err)
			return
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Kill after a random number of acknowledged appends (sometimes
		// none: during Open), plus a random sub-millisecond delay.
		for range rng.IntN(6) {
			id, ok := <-lines
			if !ok {
				break
			}
			acked = append(acked, id)
		}
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		for id := range lines {
			acked = append(acked, id)
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Errorf("kill %d: child ended without SIGKILL: %v", k, err)
			return
		}

		// Alternate read-only inspection (never repairs) and writable open
		// (repairs); the next child opens writable anyway.
		var s *Session
		if k%2 == 0 {
			s, err = Inspect(path)
		} else {
			s, err = Open(path)
		}
		if err != nil {
			t.Errorf("kill %d: reopen: %v", k, err)
			return
		}
		if s.TornBytes() > 0 {
			torn++
		}
		err = checkAcked(k-base, s.Branch(), acked)
		if err == nil {
			err = checkBatches(s)
		}
		s.Close()
		if err != nil {
			t.Errorf("kill %d: %v", k, err)
			return
		}
	}
	return total + len(acked), torn
}

// checkAcked verifies that acked is exactly the branch minus at most one
// trailing unacknowledged entry per kill, in order.
func checkAcked(killsHere int, branch []Entry, acked []string) error {
	j := 0
	for _, e := range branch {
		if j < len(acked) && e.ID == acked[j] {
			j++
		}
	}
	if j != len(acked) {
		return fmt.Errorf("acknowledged record %q (%d of %d) missing or out of order in the branch of %d entries", acked[j], j, len(acked), len(branch))
	}
	if extra := len(branch) - len(acked); extra > killsHere+1 {
		return fmt.Errorf("%d unacknowledged entries in the branch after %d kills", extra, killsHere+1)
	}
	return nil
}

// checkBatches verifies that no entry survived a crash without the usage
// record written in the same batch, nor a usage record without its entry.
func checkBatches(s *Session) error {
	batched := 0
	for _, e := range s.Branch() {
		if e.StopReason == "batched" {
			batched++
		}
	}
	if got := s.Totals().Requests; got != batched {
		return fmt.Errorf("%d usage records for %d batched entries: a batch was split", got, batched)
	}
	return nil
}

// TestTwoProcessesAppend runs two writer processes against one session at
// the same time.
func TestTwoProcessesAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const n = 150
	path, _ := sessionWith(t, 0)
	type child struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Reader
	}
	var kids []child
	for _, name := range []string{"A", "B"} {
		cmd := childCmd(t, "OCTET_SESSION_CHILD=writer", "OCTET_SESSION_PATH="+path, "OCTET_SESSION_NAME="+name, "OCTET_SESSION_N="+strconv.Itoa(n))
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, child{cmd, in, bufio.NewReader(out)})
	}
	for _, c := range kids {
		if l, err := c.out.ReadString('\n'); err != nil || l != "ready\n" {
			t.Fatalf("child not ready: %q %v", l, err)
		}
	}
	for _, c := range kids {
		io.WriteString(c.in, "go\n")
	}
	type report struct{ foreign, calls, records int }
	var reps []report
	for _, c := range kids {
		l, err := c.out.ReadString('\n')
		if err != nil {
			t.Fatalf("child report: %v", err)
		}
		var r report
		if _, err := fmt.Sscanf(l, "done %d %d %d", &r.foreign, &r.calls, &r.records); err != nil {
			t.Fatalf("child report %q: %v", l, err)
		}
		reps = append(reps, r)
		if err := c.cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}

	s, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	branch := s.Branch()
	if len(branch) != 2*n || s.Len() != 2*n {
		t.Fatalf("branch has %d entries, tree %d, want %d", len(branch), s.Len(), 2*n)
	}
	if got := s.Totals().Requests; got != 2*((n+2)/3) {
		t.Fatalf("usage records %d, want %d", got, 2*((n+2)/3))
	}
	next := map[string]int{}
	switches := 0
	// Records of the other writer each writer must have folded: those
	// that precede its last record in the file.
	foreignBefore := map[string]int{}
	seen := map[string]int{}
	for i, e := range branch {
		w := e.ID[:1]
		if want := fmt.Sprintf("%s-%04d", w, next[w]); e.ID != want || e.Text != want {
			t.Fatalf("entry %d is %q, want %q: lost or reordered", i, e.ID, want)
		}
		next[w]++
		if i > 0 && branch[i-1].ID[:1] != w {
			switches++
			if e.Parent != branch[i-1].ID {
				t.Fatalf("entry %s parent %s, want the other writer's %s", e.ID, e.Parent, branch[i-1].ID)
			}
		}
		other := map[string]string{"A": "B", "B": "A"}[w]
		foreignBefore[w] = seen[other]
		seen[w]++
	}
	if switches == 0 {
		t.Fatal("the writers never interleaved; the test proves nothing")
	}
	for i, w := range []string{"A", "B"} {
		r := reps[i]
		if r.calls == 0 || r.foreign == 0 {
			t.Errorf("writer %s was never told about the other's appends: %+v", w, r)
		}
		if r.records != r.foreign {
			t.Errorf("writer %s: hook reported %d records, ForeignAppends %d", w, r.records, r.foreign)
		}
		// Every foreign entry before this writer's last append was folded
		// (plus the usage records written with some of them).
		if r.foreign < foreignBefore[w] {
			t.Errorf("writer %s folded %d foreign records, but %d foreign entries precede its last record", w, r.foreign, foreignBefore[w])
		}
	}
	t.Logf("writer switches: %d; reports %+v", switches, reps)
}
