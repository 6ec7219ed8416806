//go:build unix

package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/octet-agent/octet/internal/proc"
	"github.com/octet-agent/octet/internal/proc/proctest"
)

func newBash(t *testing.T, cfg Config) *BashTool {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	if cfg.SpillDir == "" {
		cfg.SpillDir = t.TempDir()
	}
	b, err := NewBash(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func runBash(t *testing.T, b *BashTool, ctx context.Context, command string, timeoutMS int) Result {
	t.Helper()
	args := map[string]any{"command": command}
	if timeoutMS > 0 {
		args["timeout_ms"] = timeoutMS
	}
	raw := argsJSON(t, args)
	if eff, err := b.Classify(raw); err != nil || eff != HostProcess {
		t.Fatalf("Classify = %v, %v", eff, err)
	}
	res, err := b.Execute(ctx, Invocation{CallID: "c", Arguments: raw})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !proctest.Gone(pid) {
		if time.Now().After(deadline) {
			syscallKill(pid)
			t.Fatalf("grandchild %d still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readPid(t *testing.T, p string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(p)
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid file %s never written", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBashRunsInWorkspace(t *testing.T) {
	ws := t.TempDir()
	writeTestFile(t, filepath.Join(ws, "marker"), "")
	b := newBash(t, Config{Root: ws})
	res := runBash(t, b, context.Background(), "pwd; ls; echo err >&2; exit 3", 0)
	if !res.IsError || res.Details["exit_code"] != 3 {
		t.Errorf("exit 3: %+v", res)
	}
	for _, want := range []string{ws, "marker", "err", "[exit code: 3]"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("text %q lacks %q", res.Text, want)
		}
	}
	res = runBash(t, b, context.Background(), "true", 0)
	if res.IsError || res.Details["exit_code"] != 0 || res.Details["truncated"] != false || res.Details["timed_out"] != false {
		t.Errorf("true: %+v", res)
	}
}

func TestBashStdinClosed(t *testing.T) {
	b := newBash(t, Config{})
	done := make(chan Result, 1)
	go func() { done <- runBash(t, b, context.Background(), `cat; read x; echo "read=$?"`, 10_000) }()
	select {
	case res := <-done:
		if !strings.Contains(res.Text, "read=1") || res.Details["timed_out"] != false {
			t.Errorf("stdin not at EOF: %+v", res)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a command reading stdin hung")
	}
}

func TestBashTimeoutKillsGrandchildren(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ws := t.TempDir()
	b := newBash(t, Config{Root: ws})
	// One grandchild exits on TERM, the other ignores it and needs KILL.
	cmd := `sleep 300 & echo $! > a.pid; (trap '' TERM; sleep 300) & echo $! > b.pid; wait`
	// The timeout leaves time for the pid files even on a loaded machine.
	res := runBash(t, b, context.Background(), cmd, 2500)
	if res.Details["timed_out"] != true || !res.IsError || !strings.Contains(res.Text, "timed out") {
		t.Fatalf("timeout result: %+v", res)
	}
	waitGone(t, readPid(t, filepath.Join(ws, "a.pid")))
	waitGone(t, readPid(t, filepath.Join(ws, "b.pid")))
}

func TestBashCancelKillsGrandchildren(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ws := t.TempDir()
	b := newBash(t, Config{Root: ws})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result, 1)
	go func() { done <- runBash(t, b, ctx, `sh -c 'sleep 300 & echo $! > g.pid; wait'`, 0) }()
	pid := readPid(t, filepath.Join(ws, "g.pid"))
	cancel()
	select {
	case res := <-done:
		if res.Details["cancelled"] != true || !res.IsError {
			t.Errorf("cancel result: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not end the command")
	}
	waitGone(t, pid)
}

// TestBashExitStopsBackgroundChildren: when the shell exits, whatever it
// left running in its process group is stopped, whether it holds the
// output pipes, redirected them away, or ignores SIGTERM; the shell's own
// exit status and output are kept.
func TestBashExitStopsBackgroundChildren(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ws := t.TempDir()
	b := newBash(t, Config{Root: ws})

	// A child holding the pipes no longer delays the result by the grace
	// period: it is stopped as soon as the shell exits.
	start := time.Now()
	res := runBash(t, b, context.Background(), `sleep 300 & echo $! > a.pid; echo started; exit 7`, 0)
	if elapsed := time.Since(start); elapsed >= BashKillGrace {
		t.Errorf("a background child holding the pipes delayed the result by %s", elapsed)
	}
	if res.Details["exit_code"] != 7 || !strings.Contains(res.Text, "started") || !strings.Contains(res.Text, "[exit code: 7]") {
		t.Errorf("result: %+v", res)
	}
	waitGone(t, readPid(t, filepath.Join(ws, "a.pid")))

	// Children that redirected their output away, and one that ignores
	// SIGTERM (it needs the SIGKILL after the grace period).
	res = runBash(t, b, context.Background(),
		`nohup sleep 300 >/dev/null 2>&1 & echo $! > b.pid; (trap '' TERM; sleep 300) >/dev/null 2>&1 & echo $! > c.pid; echo done`, 0)
	if res.IsError || res.Details["exit_code"] != 0 || !strings.Contains(res.Text, "done") {
		t.Errorf("result: %+v", res)
	}
	waitGone(t, readPid(t, filepath.Join(ws, "b.pid")))
	waitGone(t, readPid(t, filepath.Join(ws, "c.pid")))

	// Background work the command waits for still completes normally.
	res = runBash(t, b, context.Background(), `(sleep 0.2; echo late) & wait; echo after`, 0)
	if res.IsError || !strings.Contains(res.Text, "late\nafter") {
		t.Errorf("waited background output: %+v", res)
	}
}

func TestBashNeutralizesControls(t *testing.T) {
	b := newBash(t, Config{})
	res := runBash(t, b, context.Background(), `printf '\033[31mred\033[0m \033]0;evil title\007 bell\007 nul\001 cr\rline\r\n\302\233x\n'`, 0)
	for _, bad := range []string{"\x1b", "\x07", "\x01", "\r", "evil title", "\u009b"} {
		if strings.Contains(res.Text, bad) {
			t.Errorf("text %q contains %q", res.Text, bad)
		}
	}
	for _, want := range []string{"red", "bell^G", "nul^A", "cr\nline\n", "\uFFFDx"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("text %q lacks %q", res.Text, want)
		}
	}
	// The preview is the exact command; the broker renders it for the
	// approval prompt (TestApprovalPreviewHidesNothing).
	pv, err := b.Preview(context.Background(), json.RawMessage(`{"command":"echo \u001b[2Jhi"}`))
	if err != nil || pv.Detail != "echo \x1b[2Jhi" {
		t.Errorf("preview = %+v, %v", pv, err)
	}
}

// TestApprovalPreviewHidesNothing: a command that hides "rm -rf build"
// inside an OSC title sequence (which a terminal would swallow) shows it
// in the approval request, through the real broker and bash tool, with no
// control character left; bidi overrides are spelled out too.
func TestApprovalPreviewHidesNothing(t *testing.T) {
	b := newBash(t, Config{})
	ap := &scriptedApprover{answer: func(_ context.Context, r ConfirmRequest) (Approval, error) {
		return Approval{Approved: false, Digest: r.Digest}, nil
	}}
	br := NewBroker(BrokerConfig{Policy: ControlledBashApproval, Approver: ap})
	host := mustHost(t, b)
	cmd := "echo hi\u001b]0; rm -rf build ;\u0007 \u202eevil\r"
	_, d := br.Dispatch(context.Background(), host, DispatchRequest{CallID: "c", Tool: "bash",
		Arguments: argsJSON(t, map[string]any{"command": cmd})}, DispatchObserver{})
	if d.Reason != ReasonApprovalDenied {
		t.Fatalf("decision %+v", d)
	}
	reqs := ap.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d approval requests", len(reqs))
	}
	detail := reqs[0].Detail
	if want := "echo hi^[]0; rm -rf build ;^G ⟨U+202E⟩evil^M"; detail != want {
		t.Errorf("detail %q, want %q", detail, want)
	}
	for _, r := range detail {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidiControl(r) {
			t.Errorf("detail %q keeps control %U", detail, r)
		}
	}
	// The broker applies the same to any tool's preview: an edit's diff.
	ws := t.TempDir()
	writeTestFile(t, filepath.Join(ws, "a.txt"), "one\n")
	ed, err := NewEdit(Config{Root: ws})
	if err != nil {
		t.Fatal(err)
	}
	br.Dispatch(context.Background(), mustHost(t, ed), DispatchRequest{CallID: "e", Tool: "edit",
		Arguments: json.RawMessage(`{"path":"a.txt","old_text":"one","new_text":"\u001b[2Ktwo"}`)}, DispatchObserver{})
	reqs = ap.requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Diff, "+^[[2Ktwo") || strings.Contains(reqs[1].Diff, "\x1b") {
		t.Errorf("edit approval diff: %+v", reqs[len(reqs)-1])
	}
}

func TestBashOutputOverLimits(t *testing.T) {
	spill := t.TempDir()
	b := newBash(t, Config{MaxOutputBytes: 4096, SpillDir: spill})
	// Fits: no spill, nothing truncated.
	res := runBash(t, b, context.Background(), "seq 1 100", 0)
	if res.Details["truncated"] != false || res.Details["full_output_path"] != nil {
		t.Errorf("small output: %+v", res.Details)
	}
	// 100 KB: truncated text, whole stream retained.
	// (stderr has its own pipe, so only stdout's order is asserted.)
	res = runBash(t, b, context.Background(), "echo ERR >&2; seq 1 20000; echo LAST", 0)
	if len(res.Text) > 4096 || res.Details["truncated"] != true {
		t.Errorf("text %d bytes, details %v", len(res.Text), res.Details)
	}
	// stderr's "ERR\n" arrives on its own pipe, so under load it can land
	// between two reads of stdout, inside one of its lines: stdout's
	// order is asserted without it.
	stdoutText := strings.Replace(res.Text, "ERR\n", "", 1)
	if !strings.Contains(stdoutText[:100], "1\n2\n") || !strings.Contains(stdoutText, "20000\nLAST\n") || !strings.Contains(stdoutText, "bytes of output omitted") {
		t.Errorf("head/tail preview wrong: %q ... %q", res.Text[:20], res.Text[len(res.Text)-200:])
	}
	// Whole lines around the omission marker: the tail counts up to 20000.
	_, tailText, _ := strings.Cut(stdoutText, "bytes of output omitted ...]\n")
	tailLines := strings.Split(tailText, "\n")
	prev := -1
	for _, l := range tailLines {
		n, err := strconv.Atoi(l)
		if err != nil {
			break
		}
		if prev >= 0 && n != prev+1 {
			t.Errorf("tail line %q follows %d: a line was cut", l, prev)
		}
		prev = n
	}
	if prev != 20000 {
		t.Errorf("tail ends at %d", prev)
	}
	// Each stream has its own file, holding that stream whole.
	if res.Details["full_output_path"] != nil || res.Details["partial_output_path"] != nil {
		t.Errorf("a path outside the per-stream details: %v", res.Details)
	}
	out, errs := streamOf(t, res, "stdout"), streamOf(t, res, "stderr")
	full, ok := out["full_output_path"].(string)
	if !ok || out["partial_output_path"] != nil || out["spill_truncated"] != nil {
		t.Fatalf("stdout details: %v", out)
	}
	got, err := os.ReadFile(full)
	if err != nil || int64(len(got)) != out["bytes"] || bytes.Contains(got, []byte("ERR")) || !bytes.HasPrefix(got, []byte("1\n2\n")) || !bytes.HasSuffix(got, []byte("20000\nLAST\n")) {
		t.Errorf("stdout spill file: %d bytes, %v", len(got), err)
	}
	if errFile, _ := errs["full_output_path"].(string); errFile == "" || readString(t, errFile) != "ERR\n" || errs["bytes"] != int64(4) {
		t.Errorf("stderr details %v", errs)
	}
	if out["bytes"].(int64)+errs["bytes"].(int64) != res.Details["output_bytes"] {
		t.Errorf("stream bytes %v + %v != output_bytes %v", out["bytes"], errs["bytes"], res.Details["output_bytes"])
	}
	if !strings.Contains(res.Text, fmt.Sprintf("[stdout (%d bytes) saved to %s]", out["bytes"], full)) || !strings.Contains(res.Text, "[stderr (4 bytes) saved to ") {
		t.Errorf("footer lacks the spill lines: %q", res.Text[len(res.Text)-300:])
	}
	st, _ := os.Stat(full)
	dst, _ := os.Stat(filepath.Dir(full))
	if st.Mode().Perm() != 0o600 || dst.Mode().Perm() != 0o700 || filepath.Dir(filepath.Dir(full)) != spill {
		t.Errorf("spill modes %v / %v in %s", st.Mode().Perm(), dst.Mode().Perm(), filepath.Dir(full))
	}
	// Over the per-stream limit: a partial file, never full_output_path.
	res = runBash(t, b, context.Background(), fmt.Sprintf("head -c %d /dev/zero", SpillStreamBytes+100_000), 0)
	out = streamOf(t, res, "stdout")
	partial, ok := out["partial_output_path"].(string)
	if !ok || out["spill_truncated"] != true || out["full_output_path"] != nil {
		t.Fatalf("over stream limit: %v", res.Details)
	}
	if st, err := os.Stat(partial); err != nil || st.Size() != SpillStreamBytes {
		t.Errorf("partial file: %v, %v", st, err)
	}
	if res.Details["output_bytes"] != int64(SpillStreamBytes+100_000) || out["bytes"] != int64(SpillStreamBytes+100_000) {
		t.Errorf("output_bytes = %v: draining stopped early", res.Details["output_bytes"])
	}
	if errs := streamOf(t, res, "stderr"); len(errs) != 1 || errs["bytes"] != int64(0) {
		t.Errorf("an empty stderr is not spilled: %v", errs)
	}
	// Close removes everything.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(spill); len(ents) != 0 {
		t.Errorf("Close left %d entries in the spill dir", len(ents))
	}
}

func TestBashSpillQuotaAndEviction(t *testing.T) {
	b := newBash(t, Config{MaxOutputBytes: 1024})
	b.spills.perFile, b.spills.total, b.spills.maxFiles = 50_000, 120_000, 3
	var paths []string
	for range 3 {
		res := runBash(t, b, context.Background(), "head -c 40000 /dev/zero", 0)
		p, ok := streamOf(t, res, "stdout")["full_output_path"].(string)
		if !ok {
			t.Fatalf("details: %v", res.Details)
		}
		paths = append(paths, p)
	}
	if n, used := b.spills.stats(); n != 3 || used != 120_000 {
		t.Fatalf("store: %d files, %d bytes", n, used)
	}
	// A fourth file evicts the oldest retained one (file-count limit).
	res := runBash(t, b, context.Background(), "head -c 40000 /dev/zero", 0)
	if _, ok := streamOf(t, res, "stdout")["full_output_path"].(string); !ok {
		t.Fatalf("fourth: %v", res.Details)
	}
	if _, err := os.Stat(paths[0]); !os.IsNotExist(err) {
		t.Errorf("oldest spill not evicted: %v", err)
	}
	for _, p := range paths[1:] {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("newer spill evicted: %v", err)
		}
	}
	// Larger than the per-file limit evicts for bytes and reports partial.
	res = runBash(t, b, context.Background(), "head -c 60000 /dev/zero", 0)
	if out := streamOf(t, res, "stdout"); out["spill_truncated"] != true || out["partial_output_path"] == nil {
		t.Errorf("partial: %v", res.Details)
	}
	if n, used := b.spills.stats(); n > 3 || used > 120_000 {
		t.Errorf("budget exceeded: %d files, %d bytes", n, used)
	}
}

func TestSpillActiveCapturesNeverEvicted(t *testing.T) {
	s := newSpillStore(t.TempDir())
	defer s.Close()
	s.perFile, s.total, s.maxFiles = 1000, 1500, 2
	a, err := s.create(stdoutStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.reserve(a, 1000); got != 1000 {
		t.Fatalf("reserve a = %d", got)
	}
	b, err := s.create(stderrStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.reserve(b, 1000); got != 500 {
		t.Errorf("reserve b = %d, want the 500 left", got)
	}
	// Both active: a third file cannot get a slot, and nothing is evicted.
	if _, err := s.create(stdoutStream); err != errSpillQuota {
		t.Errorf("third create: %v", err)
	}
	if a.expired || b.expired {
		t.Error("an active capture was evicted")
	}
	// Once a finishes it is the oldest retained file and goes first.
	if fate, _ := s.finish(a, false); fate != spillKept {
		t.Errorf("fate a = %v", fate)
	}
	c, err := s.create(stdoutStream)
	if err != nil || !a.expired || b.expired {
		t.Errorf("after finish: err %v, a expired %v, b expired %v", err, a.expired, b.expired)
	}
	if got := s.reserve(c, 1000); got != 1000 {
		t.Errorf("reserve c = %d", got)
	}
}

func TestBashActiveCaptureHoldingAllowance(t *testing.T) {
	b := newBash(t, Config{MaxOutputBytes: 1024})
	b.spills.perFile, b.spills.total, b.spills.maxFiles = 100_000, 100_000, 4
	hog, err := b.spills.create(stdoutStream)
	if err != nil {
		t.Fatal(err)
	}
	b.spills.reserve(hog, 100_000)
	res := runBash(t, b, context.Background(), "head -c 50000 /dev/zero", 0)
	if out := streamOf(t, res, "stdout"); out["spill_truncated"] != true || out["full_output_path"] != nil || out["partial_output_path"] != nil {
		t.Errorf("details: %v", res.Details)
	}
	if res.Details["output_bytes"] != int64(50000) {
		t.Errorf("draining stopped: %v", res.Details["output_bytes"])
	}
	if hog.expired {
		t.Error("active capture evicted")
	}
}

func TestBashSpillExpiredAndError(t *testing.T) {
	b := newBash(t, Config{MaxOutputBytes: 1024})
	done := make(chan Result, 1)
	go func() {
		done <- runBash(t, b, context.Background(), "head -c 100000 /dev/zero; sleep 1; echo end", 0)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if n, _ := b.spills.stats(); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("spill never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Close()
	res := <-done
	if out := streamOf(t, res, "stdout"); out["spill_expired"] != true || out["full_output_path"] != nil || out["partial_output_path"] != nil {
		t.Errorf("expired: %v", res.Details)
	}

	notDir := filepath.Join(t.TempDir(), "file")
	writeTestFile(t, notDir, "")
	b2 := newBash(t, Config{MaxOutputBytes: 1024, SpillDir: notDir})
	res = runBash(t, b2, context.Background(), "head -c 100000 /dev/zero; head -c 100 /dev/zero >&2", 0)
	for _, name := range []string{"stdout", "stderr"} {
		if d := streamOf(t, res, name); d["spill_error"] != true || d["full_output_path"] != nil || d["partial_output_path"] != nil {
			t.Errorf("storage failure, %s: %v", name, d)
		}
	}
	if strings.Contains(res.Text, "saved to") {
		t.Errorf("a failed spill is advertised: %q", res.Text)
	}
}

func TestBashProgress(t *testing.T) {
	b := newBash(t, Config{})
	var mu sync.Mutex
	var got strings.Builder
	raw := argsJSON(t, map[string]any{"command": "echo one; sleep 0.3; printf '\\033[1mtwo\\n'"})
	_, err := b.Execute(context.Background(), Invocation{Arguments: raw, Progress: func(s string) {
		mu.Lock()
		got.WriteString(s)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != "one\ntwo\n" {
		t.Errorf("progress = %q", got.String())
	}
}

func TestBashArguments(t *testing.T) {
	b := newBash(t, Config{})
	for _, bad := range []string{`{}`, `{"command":""}`, `{"command":"  "}`, `{"command":1}`, `{"command":"ls","timeout_ms":0}`, `{"command":"ls","extra":1}`, `[]`} {
		if eff, err := b.Classify(json.RawMessage(bad)); err == nil || eff != Unknown {
			t.Errorf("Classify(%s) = %v, %v", bad, eff, err)
		}
	}
	_, timeout, err := b.parse(json.RawMessage(`{"command":"ls","timeout_ms":99999999}`))
	if err != nil || timeout != DefaultBashTimeout {
		t.Errorf("timeout clamp: %v, %v", timeout, err)
	}
	_, timeout, err = b.parse(json.RawMessage(`{"command":"ls","timeout_ms":1500}`))
	if err != nil || timeout != 1500*time.Millisecond {
		t.Errorf("a shorter timeout is the model's to choose: %v, %v", timeout, err)
	}
}

// TestBashModelCannotExtendConfiguredTimeout: with bash_timeout_secs = 1
// a call asking for 600 s is still stopped after 1 s (a real process),
// and the schema the model sees states the configured maximum.
func TestBashModelCannotExtendConfiguredTimeout(t *testing.T) {
	b := newBash(t, Config{BashTimeout: time.Second})
	start := time.Now()
	res := runBash(t, b, context.Background(), "sleep 30", 600000)
	if res.Details["timed_out"] != true || !strings.Contains(res.Text, "timed out after 1s") {
		t.Fatalf("result %+v", res)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s with a 1 s configured timeout", took)
	}
	if !strings.Contains(string(b.Schema()), "default and maximum 1000") || !strings.Contains(b.Description(), "1000") {
		t.Errorf("schema/description do not state the configured timeout:\n%s\n%s", b.Schema(), b.Description())
	}
}

func TestResolveShell(t *testing.T) {
	if p, sel := ResolveShell("/bin/sh"); sel != ShellConfigured || p != "/bin/sh" {
		t.Errorf("configured: %q %q", p, sel)
	}
	if p, sel := ResolveShell("/nonexistent/shell"); sel != ShellUnavailable || p != "" {
		t.Errorf("missing configured: %q %q", p, sel)
	}
	if _, sel := ResolveShell(t.TempDir()); sel != ShellUnavailable {
		t.Errorf("directory as shell: %q", sel)
	}
	t.Setenv("SHELL", "/bin/sh")
	p, sel := ResolveShell("")
	if _, err := os.Stat("/bin/bash"); err == nil && (sel != ShellSystemBash || p != "/bin/bash") {
		t.Errorf("default: %q %q ($SHELL must not be read)", p, sel)
	}
	b := newBash(t, Config{ShellPath: "/nonexistent"})
	res := runBash(t, b, context.Background(), "echo hi", 0)
	if !res.IsError || !strings.Contains(res.Text, "no shell") {
		t.Errorf("unavailable shell: %+v", res)
	}
}

func syscallKill(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

// BenchmarkBashDrain compares draining 1 GiB of command output through
// the bash tool with `cat` copying the same stream to /dev/null, in the
// same run. throughput-ratio = cat time / bash tool time (target >= 0.5).
// Run: go test ./tools -run '^$' -bench BashDrain -benchtime 3x
func BenchmarkBashDrain(b *testing.B) {
	const size = 1 << 30
	// octet always redacts its API key (a project key is ~164 bytes).
	key := NewRedactor("sk-proj-" + strings.Repeat("k", 156))
	bt, err := NewBash(Config{Root: b.TempDir(), SpillDir: b.TempDir(), Redactor: key})
	if err != nil {
		b.Fatal(err)
	}
	defer bt.Close()
	raw := json.RawMessage(fmt.Sprintf(`{"command":"head -c %d /dev/zero"}`, size))
	catCmd := fmt.Sprintf("head -c %d /dev/zero | cat > /dev/null", size)
	var ours, theirs, oursCPU, theirsCPU time.Duration
	for b.Loop() {
		start := time.Now()
		cpu0 := cpuTime(syscall.RUSAGE_SELF) + cpuTime(syscall.RUSAGE_CHILDREN)
		res, err := bt.Execute(context.Background(), Invocation{Arguments: raw})
		ours += time.Since(start)
		proc.WaitReaped() // the guard's and command's CPU time counts once reaped
		oursCPU += cpuTime(syscall.RUSAGE_SELF) + cpuTime(syscall.RUSAGE_CHILDREN) - cpu0
		if err != nil || res.Details["output_bytes"] != int64(size) {
			b.Fatalf("drain: %v %v", err, res.Details)
		}
		start = time.Now()
		cmd := exec.Command("/bin/sh", "-c", catCmd)
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		theirs += time.Since(start)
		theirsCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	n := float64(b.N)
	b.ReportMetric(size/(1<<20)/(ours.Seconds()/n), "octet-MiB/s")
	b.ReportMetric(size/(1<<20)/(theirs.Seconds()/n), "cat-MiB/s")
	b.ReportMetric(float64(theirs)/float64(ours), "throughput-ratio")
	// CPU seconds spent per GiB, the command's own (head) included on both
	// sides; cpu-throughput-ratio = cat pipeline CPU / octet CPU.
	b.ReportMetric(oursCPU.Seconds()/n, "octet-cpu-s/GiB")
	b.ReportMetric(theirsCPU.Seconds()/n, "cat-cpu-s/GiB")
	b.ReportMetric(float64(theirsCPU)/float64(oursCPU), "cpu-throughput-ratio")
}

// FuzzNeutralizeControls checks that no terminal control survives: the
// output is valid UTF-8 with no C0 control but \n and \t, no DEL and no C1
// control.
func FuzzNeutralizeControls(f *testing.F) {
	f.Add([]byte("plain\ttext\n"))
	f.Add([]byte("\x1b[31mred\x1b[0m \x1b]0;title\x07 \x1bP dcs \x1b\\ \r\n"))
	f.Add([]byte("\xc2\x9b2J \xff\xfe \x1b"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := neutralizeControls(in)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q", in)
		}
		for _, r := range out {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidiControl(r) || isTagChar(r) {
				t.Fatalf("control %U survived in %q (from %q)", r, out, in)
			}
		}
	})
}

func TestBashScrubsCredentialsAndHonoursEarlyCancel(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
	t.Setenv("OCTET_GRANT_TOKEN", "tok-test")
	t.Setenv("OCTET_VISIBLE", "visible")
	t.Setenv("GW_KEY", "gw-test-key")
	b := newBash(t, Config{ScrubEnv: []string{"GW_KEY"}})
	res := runBash(t, b, context.Background(), "env", 0)
	if strings.Contains(res.Text, "sk-test") || strings.Contains(res.Text, "tok-test") || strings.Contains(res.Text, "gw-test-key") || !strings.Contains(res.Text, "OCTET_VISIBLE=visible") {
		t.Errorf("environment: %q", res.Text)
	}
	ws := t.TempDir()
	b = newBash(t, Config{Root: ws})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res = runBash(t, b, ctx, "touch ran", 0)
	if res.Details["cancelled"] != true {
		t.Errorf("early cancel: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("a command ran after its context was cancelled")
	}
}

// TestLimitsMatchContract pins the product limits the seeds state: 16 MiB
// per spill stream, 64 MiB / 32 files per tool instance, 50 KiB of
// model-visible text per result, 32 MiB per local file, 120 s and 1 MiB
// bash defaults.
func TestLimitsMatchContract(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"SpillStreamBytes", SpillStreamBytes, 16 << 20},
		{"SpillTotalBytes", SpillTotalBytes, 64 << 20},
		{"SpillMaxFiles", SpillMaxFiles, 32},
		{"DefaultResultTextBytes", DefaultResultTextBytes, 50 << 10},
		{"DefaultMaxResultBytes", DefaultMaxResultBytes, 50 << 10},
		{"MaxFileBytes", MaxFileBytes, 32 << 20},
		{"DefaultBashTimeout", int64(DefaultBashTimeout), int64(120 * time.Second)},
		{"DefaultBashMaxOutputBytes", DefaultBashMaxOutputBytes, 1 << 20},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	s := newSpillStore(t.TempDir())
	defer s.Close()
	if s.perFile != SpillStreamBytes || s.total != SpillTotalBytes || s.maxFiles != SpillMaxFiles {
		t.Errorf("new store limits %d / %d / %d", s.perFile, s.total, s.maxFiles)
	}
}

// TestSpillCloseFailureIsSpillError: a spill file that cannot be closed
// (its data may not be on disk) is a storage failure: spillFailed, the
// file is removed and its bytes return to the budget.
func TestSpillCloseFailureIsSpillError(t *testing.T) {
	s := newSpillStore(t.TempDir())
	defer s.Close()
	sf, err := s.create(stdoutStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.reserve(sf, 500); n != 500 {
		t.Fatalf("reserve = %d", n)
	}
	if _, err := sf.f.Write(bytes.Repeat([]byte("x"), 500)); err != nil {
		t.Fatal(err)
	}
	sf.f.Close() // the store's own close now fails
	if fate, _ := s.finish(sf, false); fate != spillFailed {
		t.Errorf("fate = %v, want spillFailed", fate)
	}
	if _, err := os.Stat(sf.path); !os.IsNotExist(err) {
		t.Errorf("failed spill file kept: %v", err)
	}
	if n, used := s.stats(); n != 0 || used != 0 {
		t.Errorf("store keeps %d files / %d bytes after the failure", n, used)
	}
}

// TestSpillWriteFailureIsSpillError: a write that fails during capture
// ends that stream's spill with spill_error and no path; the other stream
// is unaffected and draining continues.
func TestSpillWriteFailureIsSpillError(t *testing.T) {
	b := newBash(t, Config{MaxOutputBytes: 1024})
	ro, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	b.spills.writeHook = func(id streamID) {
		if id != stdoutStream {
			return
		}
		b.spills.mu.Lock()
		defer b.spills.mu.Unlock()
		for _, sf := range b.spills.files {
			if strings.HasPrefix(filepath.Base(sf.path), "stdout-") {
				// The descriptor now reads /dev/null: the worker's
				// write fails with EBADF.
				unix.Dup2(int(ro.Fd()), int(sf.f.Fd()))
			}
		}
	}
	res := runBash(t, b, context.Background(), "head -c 100000 /dev/zero; seq 1 1000 >&2", 0)
	out, errs := streamOf(t, res, "stdout"), streamOf(t, res, "stderr")
	if out["spill_error"] != true || out["full_output_path"] != nil || out["partial_output_path"] != nil || out["bytes"] != int64(100000) {
		t.Errorf("stdout: %v", out)
	}
	if p, _ := errs["full_output_path"].(string); p == "" || errs["spill_error"] != nil {
		t.Errorf("stderr: %v", errs)
	}
}

// streamOf returns the per-stream Details entry name of res.
func streamOf(t *testing.T, res Result, name string) map[string]any {
	t.Helper()
	d, ok := res.Details[name].(map[string]any)
	if !ok {
		t.Fatalf("no %s details: %v", name, res.Details)
	}
	return d
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// BenchmarkBashTrue measures one bash `true` call through the tool (under
// its process guard) against starting the same shell directly with
// os/exec — its own process group, stdout and stderr on pipes drained to
// the end, then Wait — in the same loop. guard-ratio = tool time / direct
// time. "back-to-back" makes the calls one after the other; "after-pause"
// idles 20 ms (untimed) before each call and each direct start, as a
// call follows a model's turn, by which time a spare guard is ready
// (internal/proc/spare.go).
// Run: go test ./tools -run '^$' -bench BashTrue -count 8
func BenchmarkBashTrue(b *testing.B) {
	for _, pause := range []time.Duration{0, 20 * time.Millisecond} {
		name := "back-to-back"
		if pause > 0 {
			name = "after-pause"
		}
		b.Run(name, func(b *testing.B) { benchBashTrue(b, pause) })
	}
}

// benchBashTrue is BenchmarkBashTrue with pause before each timing.
func benchBashTrue(b *testing.B, pause time.Duration) {
	bt, err := NewBash(Config{Root: b.TempDir(), SpillDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer bt.Close()
	raw := json.RawMessage(`{"command":"true"}`)
	var ours, direct time.Duration
	for b.Loop() {
		time.Sleep(pause)
		start := time.Now()
		res, err := bt.Execute(context.Background(), Invocation{Arguments: raw})
		ours += time.Since(start)
		if err != nil || res.IsError {
			b.Fatalf("true: %v %+v", err, res)
		}
		time.Sleep(pause)
		start = time.Now()
		if err := runDirect(bt.shell, "true"); err != nil {
			b.Fatal(err)
		}
		direct += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(ours.Microseconds())/n, "tool-µs/call")
	b.ReportMetric(float64(direct.Microseconds())/n, "direct-µs/call")
	b.ReportMetric(float64(ours)/float64(direct), "guard-ratio")
}

// runDirect starts shell -c command without a guard, as the bash tool did
// before it had one, and drains both pipes.
func runDirect(shell, command string) error {
	cmd := exec.Command(shell, "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err == nil {
		var wg sync.WaitGroup
		wg.Go(func() { io.Copy(io.Discard, outR) })
		wg.Go(func() { io.Copy(io.Discard, errR) })
		wg.Wait()
		err = cmd.Wait()
	}
	outR.Close()
	errR.Close()
	return err
}
