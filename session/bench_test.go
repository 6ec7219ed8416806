//go:build unix

package session

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/osfile"
)

// BenchmarkAppendSync measures one durable append (an assistant entry and
// its usage record in one batch: lock, length check, one write, fdatasync)
// against a raw write+fdatasync of the same bytes to another file in the
// same directory, interleaved in the same loop. It reports the medians and
// their ratio.
func BenchmarkAppendSync(b *testing.B) {
	dir := b.TempDir()
	s, err := Create(dir, Header{Title: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	raw, err := os.OpenFile(filepath.Join(dir, "raw.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var sess, base []time.Duration
	for b.Loop() {
		e := benchAssistant(rng, 300)
		e.ID, e.Time, e.Parent = NewID(), time.Now().UTC(), s.Head()
		u := Usage{RunID: "run", RequestID: "resp_" + e.ID, Model: "gpt-5", Input: 1000, Output: 200, CostPicodollars: 123456}
		// The exact bytes Append writes, for the baseline.
		buf, _ := appendRecord(nil, EntryRecord(e), 0, 2)
		buf, _ = appendRecord(buf, UsageRecord(u), 1, 2)

		rawWrite := func() time.Duration {
			t := time.Now()
			if _, err := raw.Write(buf); err != nil {
				b.Fatal(err)
			}
			if err := osfile.Sync(raw); err != nil {
				b.Fatal(err)
			}
			return time.Since(t)
		}
		sessionAppend := func() time.Duration {
			t := time.Now()
			if err := s.Append(EntryRecord(e), UsageRecord(u)); err != nil {
				b.Fatal(err)
			}
			return time.Since(t)
		}
		// Alternate which goes first so neither always follows the
		// other's journal commit.
		if len(base)%2 == 0 {
			base = append(base, rawWrite())
			sess = append(sess, sessionAppend())
		} else {
			sess = append(sess, sessionAppend())
			base = append(base, rawWrite())
		}
		if s.Size() > 200<<20 {
			b.Fatal("benchmark file grew too large")
		}
	}
	ms, mb := median(sess), median(base)
	b.ReportMetric(float64(ms.Nanoseconds()), "append-median-ns")
	b.ReportMetric(float64(mb.Nanoseconds()), "raw-median-ns")
	b.ReportMetric(float64(ms)/float64(mb), "ratio")
	// The median of per-iteration ratios: each pair ran back to back, so
	// it cancels most drift of a shared machine.
	ratios := make([]float64, len(sess))
	for i := range sess {
		ratios[i] = float64(sess[i]) / float64(base[i])
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "pair-ratio")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

func benchAssistant(rng *rand.Rand, pad int) Entry {
	return Entry{Type: EntryAssistant, RunID: "run", StopReason: "completed", Items: []Item{
		{Type: ItemReasoning, ID: "rs_" + NewID(), EncryptedContent: randText(rng, pad)},
		{Type: ItemFunctionCall, ID: "fc_" + NewID(), CallID: "call_" + NewID(), Name: "read", Arguments: `{"path":"internal/x.go"}`},
	}}
}

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

func randText(rng *rand.Rand, n int) string {
	var sb strings.Builder
	sb.Grow(n)
	for range n {
		sb.WriteByte(alphabet[rng.IntN(len(alphabet))])
	}
	return sb.String()
}

// genLarge writes a session of exactly records lines (header included)
// and just under size bytes, shaped like a long real session: runs of a
// user prompt, 1-8 tool loops (assistant response with reasoning and a
// function call, written in one batch with its usage record, then the tool
// result), a final answer with its usage, and a checkpoint; every 60 runs a
// retry (a head record back to an earlier prompt); every 300 runs a
// compaction entry. It returns the number of entries on the active branch.
func genLarge(tb testing.TB, path string, records int, size int64) int {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(7, 7))
	written := int64(0)
	n := 0
	emit := func(b []byte) {
		w.Write(b)
		written += int64(len(b))
		n++
	}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	emit(appendHeader(nil, Header{ID: "big", Created: created, Cwd: "/work", Title: "generated", Version: FormatVersion}))
	headerLen := written
	avg := float64(size-64<<10-headerLen) / float64(records-1)
	// pad returns how much filler the next record may carry so that the
	// running total tracks the target size (64 KiB under the limit).
	pad := func(base, min int) int {
		target := headerLen + int64(avg*float64(n))
		return max(int(target-written)-base, min)
	}
	head := ""
	var users []string
	branchLen := 0
	var branch []string // ids on the active branch, for retries
	clock := created
	entry := func(e Entry, extra ...Record) {
		clock = clock.Add(time.Second)
		e.ID, e.Parent, e.Time = NewID(), head, clock
		batch := 1 + len(extra)
		buf, err := appendRecord(nil, EntryRecord(e), 0, batch)
		if err != nil {
			tb.Fatal(err)
		}
		emit(buf)
		for i, r := range extra {
			b, _ := appendRecord(nil, r, i+1, batch)
			emit(b)
		}
		head = e.ID
		branch = append(branch, e.ID)
		branchLen++
	}
	run := 0
	for n < records {
		left := records - n
		runID := fmt.Sprint("run", run)
		switch {
		case left >= 40 && run%60 == 59 && len(users) > 3:
			// Retry: branch back to an earlier user entry.
			target := users[len(users)-2]
			i := len(branch) - 1
			for branch[i] != target {
				i--
			}
			b, _ := appendRecord(nil, HeadRecord(target), 0, 1)
			emit(b)
			head = target
			branch = branch[:i+1]
			branchLen = len(branch)
		case left >= 40 && run%300 == 299:
			entry(Entry{Type: EntryCompaction, Compaction: &Compaction{Summary: randText(rng, pad(300, 100)), FirstKept: branch[len(branch)-4], ReadFiles: []string{"a.go", "b.go"}, ModifiedFiles: []string{"c.go"}, TokensBefore: 250000}})
		case left >= 40:
			// One run: a prompt, 1-8 tool loops, a final answer, usage
			// for every response and a checkpoint.
			entry(Entry{Type: EntryUser, RunID: runID, Text: randText(rng, pad(120, 20))})
			users = append(users, head)
			// Usage records leave out the optional run id and model: with
			// the batch members' marks the fixed parts of the records
			// would otherwise not fit 1,000,000 records into 256 MiB.
			usage := func() Record {
				return UsageRecord(Usage{RequestID: "resp_" + NewID(), Input: int64(rng.IntN(200000)), CachedInput: int64(rng.IntN(100000)), Output: int64(rng.IntN(5000)), Reasoning: int64(rng.IntN(3000)), CostPicodollars: int64(rng.IntN(1e9))})
			}
			for range 1 + rng.IntN(8) {
				e := benchAssistant(rng, 0)
				e.RunID = runID
				e.Items[0].EncryptedContent = randText(rng, pad(420, 40))
				entry(e, usage())
				entry(Entry{Type: EntryToolResult, RunID: runID, Result: &ToolResult{CallID: e.Items[1].CallID, Tool: "read", Text: randText(rng, pad(130, 20))}})
			}
			final := Entry{Type: EntryAssistant, RunID: runID, StopReason: "completed", Items: []Item{
				{Type: ItemReasoning, ID: "rs_" + NewID(), EncryptedContent: randText(rng, pad(300, 40))},
				{Type: ItemText, ID: "msg_" + NewID(), Text: randText(rng, 80)},
			}}
			entry(final, usage())
			b, _ := appendRecord(nil, CheckpointRecord(Checkpoint{RunID: runID, Outcome: OutcomeCompleted}), 0, 1)
			emit(b)
		default:
			entry(Entry{Type: EntryUser, Text: randText(rng, pad(120, 1))})
		}
		run++
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	f.Close()
	if written > size {
		tb.Fatalf("generated %d bytes, more than %d", written, size)
	}
	return branchLen
}

// BenchmarkOpenBranch opens a generated 256 MiB / 1,000,000-record session
// and rebuilds its active branch (typed entries), in process for time and
// in a child process for peak RSS. The baseline is the naive approach:
// decoding every line into a map with encoding/json.
func BenchmarkOpenBranch(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "big.jsonl")
	t0 := time.Now()
	branchLen := genLarge(b, path, MaxRecords, MaxFileBytes)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d bytes, %d records, active branch %d entries in %v", fi.Size(), MaxRecords, branchLen, time.Since(t0))
	mb := float64(fi.Size()) / 1e6

	b.Run("octet", func(b *testing.B) {
		var d []time.Duration
		for b.Loop() {
			t := time.Now()
			s, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if got := len(s.Branch()); got != branchLen {
				b.Fatalf("branch %d entries, want %d", got, branchLen)
			}
			d = append(d, time.Since(t))
			s.Close()
		}
		b.ReportMetric(median(d).Seconds(), "median-s")
		b.ReportMetric(mb/median(d).Seconds(), "MB/s")
	})
	b.Run("octet_peak_rss", func(b *testing.B) {
		var peaks []float64
		var d, cpu []time.Duration
		for b.Loop() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "OCTET_SESSION_CHILD=open", "OCTET_SESSION_PATH="+path)
			cmd.Stderr = os.Stderr
			t := time.Now()
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("child: %v %s", err, out)
			}
			d = append(d, time.Since(t))
			// The child reports VmHWM (its own peak RSS since exec):
			// rusage Maxrss would also count the parent's pages shared
			// between vfork and exec.
			var branch, hwmKiB int64
			if _, err := fmt.Sscan(string(out), &branch, &hwmKiB); err != nil || branch != int64(branchLen) {
				b.Fatalf("child output %q: %v", out, err)
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			peaks = append(peaks, float64(hwmKiB*1024))
			cpu = append(cpu, time.Duration(syscall.TimevalToNsec(ru.Utime)+syscall.TimevalToNsec(ru.Stime)))
		}
		slices.Sort(peaks)
		peak := peaks[len(peaks)/2]
		b.ReportMetric(peak/1e6, "peak-rss-MB")
		b.ReportMetric(peak/float64(fi.Size()), "rss/file")
		b.ReportMetric(median(d).Seconds(), "process-wall-s")
		b.ReportMetric(median(cpu).Seconds(), "process-cpu-s")
	})
	b.Run("baseline_naive_maps", func(b *testing.B) {
		var d []time.Duration
		for b.Loop() {
			t := time.Now()
			n := naiveDecode(b, path)
			if n != MaxRecords {
				b.Fatalf("decoded %d records", n)
			}
			d = append(d, time.Since(t))
		}
		b.ReportMetric(median(d).Seconds(), "median-s")
		b.ReportMetric(mb/median(d).Seconds(), "MB/s")
	})
}

// naiveDecode is the baseline: every line into a map[string]any.
func naiveDecode(tb testing.TB, path string) int {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), MaxRecordBytes)
	var all []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			tb.Fatal(err)
		}
		all = append(all, m)
	}
	return len(all)
}

// openChild is the child side of octet_peak_rss: open, rebuild, exit.
func openChild(path string) {
	s, err := Open(path)
	if err != nil {
		childFatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if hp := os.Getenv("OCTET_SESSION_HEAPPROF"); hp != "" {
		runtime.GC()
		f, _ := os.Create(hp)
		pprof.WriteHeapProfile(f)
		f.Close()
	}
	fmt.Fprintf(os.Stderr, "branch %d entries %d heapinuse %d MB heapsys %d MB sys %d MB numgc %d\n", len(s.Branch()), s.Len(), ms.HeapInuse>>20, ms.HeapSys>>20, ms.Sys>>20, ms.NumGC)
	fmt.Println(len(s.Branch()), peakRSSKiB())
}

// peakRSSKiB returns this process's VmHWM from /proc/self/status.
func peakRSSKiB() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		childFatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			fmt.Sscan(rest, &kib)
			return kib
		}
	}
	childFatal(fmt.Errorf("no VmHWM in /proc/self/status"))
	return 0
}
