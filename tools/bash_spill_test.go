//go:build unix

package tools

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBashSpill20MiBPerStream: 20 MiB on stdout plus 20 MiB on stderr,
// arriving interleaved, keep 16 MiB of each in its own file — each a
// partial_output_path with spill_truncated, never mixed with the other
// stream — while both streams are drained and counted to the end.
func TestBashSpill20MiBPerStream(t *testing.T) {
	const size = 20 << 20
	b := newBash(t, Config{})
	res := runBash(t, b, context.Background(),
		fmt.Sprintf("(yes a | head -c %d) & (yes b | head -c %d >&2) & wait", size, size), 0)
	if res.Details["output_bytes"] != int64(2*size) || res.Details["truncated"] != true {
		t.Fatalf("details %v", res.Details)
	}
	for name, line := range map[string]string{"stdout": "a\n", "stderr": "b\n"} {
		d := streamOf(t, res, name)
		p, _ := d["partial_output_path"].(string)
		if d["bytes"] != int64(size) || p == "" || d["spill_truncated"] != true || d["full_output_path"] != nil || d["spill_error"] != nil {
			t.Errorf("%s details %v", name, d)
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil || len(got) != SpillStreamBytes || bytes.Count(got, []byte(line))*2 != len(got) {
			t.Errorf("%s spill file: %d bytes (%v), want %d bytes of %q only", name, len(got), err, SpillStreamBytes, line)
		}
		if want := fmt.Sprintf("[first %d of %d %s bytes saved to %s]", SpillStreamBytes, size, name, p); !strings.Contains(res.Text, want) {
			t.Errorf("footer lacks %q:\n%s", want, res.Text[max(0, len(res.Text)-400):])
		}
	}
}

// TestBashSpillWholeStreams: once the result is cut, each stream is
// spilled from its first byte into its own file, whole (full_output_path),
// including a stream whose first byte arrives after the cut; output that
// fits is not spilled at all.
func TestBashSpillWholeStreams(t *testing.T) {
	b := newBash(t, Config{MaxOutputBytes: 4096})
	seq := func(n int) string {
		var sb strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&sb, "%d\n", i)
		}
		return sb.String()
	}
	res := runBash(t, b, context.Background(), "seq 1 20000 & seq 1 3000 >&2; wait", 0)
	for name, want := range map[string]string{"stdout": seq(20000), "stderr": seq(3000)} {
		d := streamOf(t, res, name)
		p, _ := d["full_output_path"].(string)
		if p == "" || d["bytes"] != int64(len(want)) || d["spill_truncated"] != nil {
			t.Errorf("%s details %v", name, d)
			continue
		}
		if got := readString(t, p); got != want {
			t.Errorf("%s spill file holds %d bytes, want the %d-byte stream exactly", name, len(got), len(want))
		}
		if !strings.Contains(res.Text, fmt.Sprintf("[%s (%d bytes) saved to %s]", name, len(want), p)) {
			t.Errorf("footer lacks the %s line", name)
		}
	}

	res = runBash(t, b, context.Background(), "seq 1 20000; sleep 0.2; echo late >&2", 0)
	if d := streamOf(t, res, "stderr"); d["full_output_path"] == nil || readString(t, d["full_output_path"].(string)) != "late\n" {
		t.Errorf("late stderr: %v", d)
	}
	if !strings.Contains(res.Text, "late") {
		t.Errorf("the preview lost the late stderr line")
	}

	res = runBash(t, b, context.Background(), "echo hi; echo there >&2", 0)
	if res.Details["truncated"] != false {
		t.Errorf("small output truncated: %v", res.Details)
	}
	for name, n := range map[string]int64{"stdout": 3, "stderr": 6} {
		if d := streamOf(t, res, name); len(d) != 1 || d["bytes"] != n {
			t.Errorf("%s of a small result: %v", name, d)
		}
	}
}

// TestBashSpillEvictionPerStream: every stream file counts against the
// 32-file (here 3) budget; a new file evicts the oldest retained ones
// first, stream by stream, and never a file still being captured.
func TestBashSpillEvictionPerStream(t *testing.T) {
	b := newBash(t, Config{MaxOutputBytes: 1024})
	b.spills.perFile, b.spills.total, b.spills.maxFiles = 50_000, 1_000_000, 3
	paths := func(res Result) []string {
		var out []string
		for _, name := range []string{"stdout", "stderr"} {
			if p, ok := streamOf(t, res, name)["full_output_path"].(string); ok {
				out = append(out, p)
			}
		}
		return out
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	c1 := paths(runBash(t, b, context.Background(), "head -c 5000 /dev/zero", 0))
	c2 := paths(runBash(t, b, context.Background(), "head -c 5000 /dev/zero; head -c 5000 /dev/zero >&2", 0))
	if len(c1) != 1 || len(c2) != 2 {
		t.Fatalf("spills %v %v", c1, c2)
	}
	c3 := paths(runBash(t, b, context.Background(), "head -c 5000 /dev/zero", 0))
	if len(c3) != 1 {
		t.Fatalf("third call spilled %v", c3)
	}
	if exists(c1[0]) || !exists(c2[0]) || !exists(c2[1]) {
		t.Errorf("third call: the oldest file (the first call's) should be the only one evicted")
	}
	c4 := paths(runBash(t, b, context.Background(), "head -c 5000 /dev/zero; head -c 5000 /dev/zero >&2", 0))
	if len(c4) != 2 {
		t.Fatalf("fourth call spilled %v", c4)
	}
	if exists(c2[0]) || exists(c2[1]) || !exists(c3[0]) || !exists(c4[0]) || !exists(c4[1]) {
		t.Errorf("fourth call: both of the second call's files should be evicted, nothing newer")
	}
	if n, _ := b.spills.stats(); n != 3 {
		t.Errorf("%d files retained, want 3", n)
	}

	// Within one call both files are active: when they share a budget too
	// small for both, the bytes reserved after it filled are discarded and
	// nothing is evicted. The workers reserve as their drains read, in an
	// order the scheduler decides (stdout's last chunk may come after
	// stderr's first), so the check holds for every interleaving: the
	// budget is filled exactly, some stream is cut, both files stay.
	// The second round stalls stdout's worker after its first write, which
	// lets stderr reserve in between (the order that once made this test
	// panic).
	for _, stall := range []bool{false, true} {
		sharedBudget(t, stall)
	}
}

func sharedBudget(t *testing.T, stall bool) {
	b2 := newBash(t, Config{MaxOutputBytes: 1024})
	b2.spills.perFile, b2.spills.total, b2.spills.maxFiles = 50_000, 60_000, 32
	stalled := !stall
	b2.spills.writeHook = func(id streamID) {
		if id == stdoutStream && !stalled {
			stalled = true
			time.Sleep(200 * time.Millisecond)
		}
	}
	res := runBash(t, b2, context.Background(), "head -c 40000 /dev/zero; head -c 40000 /dev/zero >&2", 0)
	var stored int64
	cut := false
	for _, name := range []string{"stdout", "stderr"} {
		st := streamOf(t, res, name)
		full, _ := st["full_output_path"].(string)
		partial, _ := st["partial_output_path"].(string)
		if st["bytes"] != int64(40000) || (full == "") == (partial == "") || (partial != "") != (st["spill_truncated"] == true) {
			t.Fatalf("%s: %v; want 40000 bytes and exactly one of a whole or a partial file", name, st)
		}
		fi, err := os.Stat(full + partial)
		if err != nil {
			t.Fatalf("%s: an active capture's file is gone: %v", name, err)
		}
		if full != "" && fi.Size() != 40000 {
			t.Errorf("%s: whole file holds %d bytes", name, fi.Size())
		}
		stored += fi.Size()
		cut = cut || partial != ""
	}
	if stored != 60_000 || !cut || b2.spills.evictions != 0 {
		t.Errorf("shared budget: %d bytes stored (want the 60000 of the budget), cut %v, %d evictions", stored, cut, b2.spills.evictions)
	}
}

// TestBashSpillRedactsSecrets: a secret the command prints — split across
// two writes, on both streams — never reaches a spill file (nor the
// result); the Redactor's marker is stored instead.
func TestBashSpillRedactsSecrets(t *testing.T) {
	const secret = "sk-octet-spill-SECRET-1234567890"
	b := newBash(t, Config{MaxOutputBytes: 4096, Redactor: NewRedactor(secret)})
	half := len(secret) / 2
	print := fmt.Sprintf("printf 'key=%s'; sleep 0.1; printf '%s\\n'; seq 1 20000", secret[:half], secret[half:])
	res := runBash(t, b, context.Background(), fmt.Sprintf("%s; (%s) >&2", print, print), 0)
	for _, name := range []string{"stdout", "stderr"} {
		p, _ := streamOf(t, res, name)["full_output_path"].(string)
		if p == "" {
			t.Fatalf("%s not spilled: %v", name, res.Details)
		}
		got := readString(t, p)
		if strings.Contains(got, secret[half:]) || !strings.HasPrefix(got, "key="+RedactedSecret+"\n1\n") {
			t.Errorf("%s spill file starts %q", name, got[:min(len(got), 80)])
		}
	}
	if strings.Contains(res.Text, secret[half:]) || !strings.Contains(res.Text, "key="+RedactedSecret) {
		t.Errorf("result text %q", res.Text[:200])
	}
}

// TestBashSpillWriterBlocked: while one stream's spill worker is stuck on
// the disk, the other stream keeps draining and progress keeps flowing —
// nothing holding the capture's lock waits for file I/O — and once the
// disk is back every byte is stored.
func TestBashSpillWriterBlocked(t *testing.T) {
	const size = 6 << 20
	b := newBash(t, Config{MaxOutputBytes: 4096})
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.spills.writeHook = func(id streamID) {
		if id == stdoutStream {
			once.Do(func() { close(blocked) })
			<-release
		}
	}
	var mu sync.Mutex
	var progress strings.Builder
	seen := func(s string) bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(progress.String(), s) }
	done := make(chan Result, 1)
	go func() {
		raw := argsJSON(t, map[string]any{"command": fmt.Sprintf(
			"head -c %d /dev/zero & for i in $(seq 1 40); do echo err$i >&2; sleep 0.02; done; wait", size)})
		res, err := b.Execute(context.Background(), Invocation{Arguments: raw, Progress: func(s string) {
			mu.Lock()
			progress.WriteString(s)
			mu.Unlock()
		}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case <-blocked:
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatal("stdout never reached its spill worker")
	}
	deadline := time.Now().Add(20 * time.Second)
	for !seen("err40\n") {
		if time.Now().After(deadline) {
			close(release)
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("stderr progress stalled behind the blocked stdout spill: %q", progress.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case res := <-done:
		t.Fatalf("the call ended while stdout could not be stored: %v", res.Details)
	default:
	}
	close(release)
	res := <-done
	out, errs := streamOf(t, res, "stdout"), streamOf(t, res, "stderr")
	if p, _ := out["full_output_path"].(string); p == "" || out["bytes"] != int64(size) {
		t.Errorf("stdout %v", out)
	} else if st, err := os.Stat(p); err != nil || st.Size() != size {
		t.Errorf("stdout file %v %v", st, err)
	}
	if p, _ := errs["full_output_path"].(string); p == "" || !strings.HasSuffix(readString(t, p), "err39\nerr40\n") {
		t.Errorf("stderr %v", errs)
	}
}
