//go:build unix

package session

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// makeSessions writes n sessions into dir, each a copy of one real session
// (a header, a few entries, usage, a title) under its own id, with its
// listing cache and spread modification times, as a long-used sessions
// directory holds them. It returns the ids.
func makeSessions(tb testing.TB, dir string, n int) []string {
	tb.Helper()
	tmpl, err := Create(tb.TempDir(), Header{Title: "template", Cwd: "/work/project"})
	if err != nil {
		tb.Fatal(err)
	}
	for range 3 {
		if _, err := tmpl.AppendEntry(Entry{Type: EntryUser, Text: "please look at the failing test in server/"}); err != nil {
			tb.Fatal(err)
		}
		if err := tmpl.Append(UsageRecord(Usage{Input: 1200, Output: 300})); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tmpl.SetTitle("fix the failing server test"); err != nil {
		tb.Fatal(err)
	}
	oldID, path := tmpl.Header().ID, tmpl.Path()
	tmpl.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(listingPath(path))
	if err != nil {
		tb.Fatal(err)
	}
	l, ok := decodeListing(b)
	if !ok {
		tb.Fatal("template listing cache does not decode")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	base := time.Now().Add(-time.Duration(n) * time.Minute)
	ids := make([]string, n)
	for i := range n {
		id := newSessionID(base.Add(time.Duration(i) * time.Second))
		ids[i] = id
		p := filepath.Join(dir, id+".jsonl")
		if err := os.WriteFile(p, bytes.Replace(data, []byte(oldID), []byte(id), 1), 0o600); err != nil {
			tb.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			tb.Fatal(err)
		}
		l.ino = fi.Sys().(*syscall.Stat_t).Ino
		if err := writeListingFile(pathDir(dir), listingPath(id+".jsonl"), l.encode()); err != nil {
			tb.Fatal(err)
		}
		mt := base.Add(time.Duration(i*7919%n) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			tb.Fatal(err)
		}
	}
	return ids
}

// BenchmarkList10k lists a directory of 10,000 sessions and takes the
// first page of 50, as octet/session/list does for each page.
func BenchmarkList10k(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "sessions")
	makeSessions(b, dir, benchSessions)
	b.Run("List", func(b *testing.B) {
		for b.Loop() {
			infos, err := List(dir)
			if err != nil || len(infos) != benchSessions {
				b.Fatal(len(infos), err)
			}
			_ = infos[:50]
		}
	})
	b.Run("Lister", func(b *testing.B) {
		var l Lister
		if _, err := l.List(dir); err != nil { // the one full read
			b.Fatal(err)
		}
		cpu0 := processCPU()
		for b.Loop() {
			infos, err := l.List(dir)
			if err != nil || len(infos) != benchSessions {
				b.Fatal(len(infos), err)
			}
			_ = infos[:50]
		}
		// CPU time is what the load on a shared machine distorts least.
		b.ReportMetric(float64(processCPU()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
	})
}

var benchSessions = 10_000

// churnSessions does n random changes to the sessions in dir, as writers
// do: it creates sessions and appends entries, usage, uncertainty markers
// and titles to existing ones.
func churnSessions(dir string, n int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	for i := range n {
		des, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		var s *Session
		if names := slices.DeleteFunc(des, func(de os.DirEntry) bool { return !strings.HasSuffix(de.Name(), ".jsonl") }); len(names) == 0 || rng.IntN(5) == 0 {
			s, err = Create(dir, Header{Title: fmt.Sprintf("new %d", i), Cwd: "/c"})
		} else {
			s, err = Open(filepath.Join(dir, names[rng.IntN(len(names))].Name()))
		}
		if err != nil {
			return err
		}
		switch rng.IntN(4) {
		case 0:
			_, err = s.AppendEntry(Entry{Type: EntryUser, Text: "more"})
		case 1:
			err = s.Append(UsageRecord(Usage{Input: int64(rng.IntN(1000)), Output: 7}))
		case 2:
			err = s.SetTitle(fmt.Sprintf("title %d", rng.IntN(1000)))
		case 3:
			err = s.Append(UncertainRecord(UsageUncertain{Reason: "stream_interrupted", Dispatched: true}))
		}
		if err = errors.Join(err, s.Close()); err != nil {
			return err
		}
	}
	return nil
}

// TestListerMatchesFullScan lists a directory again and again with one
// Lister while two other processes and a goroutine create sessions and
// append to them; after each round of changes its listing must equal a
// full scan's, session for session.
func TestListerMatchesFullScan(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := filepath.Join(t.TempDir(), "sessions")
	makeSessions(t, dir, 200)
	var l Lister
	for round := range 3 {
		var kids []*exec.Cmd
		for range 2 {
			cmd := childCmd(t, "OCTET_SESSION_CHILD=churn", "OCTET_SESSION_PATH="+dir, "OCTET_SESSION_N=40")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			kids = append(kids, cmd)
		}
		done := make(chan error, 1)
		go func() { done <- churnSessions(dir, 40, uint64(round)) }()
		listings := 0
	churn:
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				break churn
			default:
				_, _ = l.List(dir) // a file being created may not be readable yet
				listings++
			}
		}
		for _, k := range kids {
			if err := k.Wait(); err != nil {
				t.Fatalf("churn child: %v", err)
			}
		}
		got, err := l.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		want, err := List(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("round %d: Lister has %d sessions, a full scan %d", round, len(got), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("round %d (after %d listings during the changes): session %d\nLister    %+v\nfull scan %+v", round, listings, i, got[i], want[i])
			}
		}
	}
}

// TestListHeapFlat lists 300 sessions 100 times, with List and with one
// Lister, keeping the last result as a caller would: the live heap must
// not grow by more than 10 MB (each header decode used to allocate a
// 256 KiB block that the listed strings kept alive, 75 MB per listing of
// 300 sessions).
func TestListHeapFlat(t *testing.T) {
	const n = 300
	dir := filepath.Join(t.TempDir(), "sessions")
	makeSessions(t, dir, n)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var l Lister
	var kept []Info
	before := heap()
	for i := range 100 {
		var err error
		if i%2 == 0 {
			kept, err = List(dir)
		} else {
			kept, err = l.List(dir)
		}
		if err != nil || len(kept) != n {
			t.Fatal(len(kept), err)
		}
	}
	if grew := int64(heap()) - int64(before); grew > 10<<20 {
		t.Fatalf("live heap grew %d MB over 100 listings of %d sessions", grew>>20, n)
	}
	runtime.KeepAlive(kept)
}

// processCPU is this process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}
