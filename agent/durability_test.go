//go:build linux

package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory for the
// rest of the test, or skips the test when mounting is not permitted.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	opts := "size=" + itoa(size) + ",mode=0700"
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Skipf("mounting a tmpfs needs CAP_SYS_ADMIN (root in CI): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// fillDisk writes path so that the file system holding it keeps only
// free bytes available.
func fillDisk(path string, free int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		return err
	}
	avail := int64(st.Bavail) * st.Bsize
	if avail <= free {
		return nil
	}
	return os.WriteFile(path, make([]byte, avail-free), 0o600)
}

// toolEvents returns the tool_started / tool_finished events for callID,
// in order, as kinds ("started", "finished", "finished-unrecorded").
func toolEvents(evs []Event, callID string) []string {
	var out []string
	for _, e := range evs {
		switch e := e.(type) {
		case *ToolStarted:
			if e.CallID == callID {
				out = append(out, "started")
			}
		case *ToolFinished:
			if e.CallID == callID {
				s := "finished"
				if e.Unrecorded {
					s += "-unrecorded"
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// checkUnresolvedThenIndeterminate asserts that callID has no durable
// result in the file at path and that a new agent over the reopened
// session pairs it with the crash-recovery indeterminate error.
func checkUnresolvedThenIndeterminate(t *testing.T, path string, host *tools.Host, callID string) {
	t.Helper()
	recs := readFile(t, path)
	if r := resultFor(recs, callID); r != nil {
		t.Fatalf("a call that ran has a durable result %v; it must stay unresolved", r.result())
	}
	sess, err := session.Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer sess.Close()
	srv := pt.New(t)
	if _, err := New(Config{
		Session: sess, Transport: provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL()}),
		Model: provider.Model{Name: "scripted"}, Host: host,
		Broker: tools.NewBroker(tools.BrokerConfig{Policy: tools.UnsafeHost}),
	}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	var got *session.ToolResult
	for _, e := range sess.Branch() {
		if e.Type == session.EntryToolResult && e.Result.CallID == callID {
			got = e.Result
		}
	}
	if got == nil || got.Details["crash_recovery"] != "indeterminate" {
		t.Fatalf("after resume the call's result is %+v, want the indeterminate error", got)
	}
}

// TestUnsavedResultOnFullDiskLeavesCallUnresolved: with the session's
// file system full, a mutating call runs (its effect is on disk) and its
// 30 KB result cannot be saved. The run fails saying so, the call keeps no
// "not executed" result (resume marks it indeterminate), and its events
// are one tool_started and one tool_finished marked unrecorded.
func TestUnsavedResultOnFullDiskLeavesCallUnresolved(t *testing.T) {
	checkLeaks(t)
	dir := mountTmpfs(t, 256<<10)
	filler := filepath.Join(dir, "effect.bin")
	writer := &probeTool{name: "fill", effect: tools.WorkspaceMutation, onExec: func(context.Context, tools.Invocation) (tools.Result, error) {
		// The effect: a file that leaves one page free, enough for a
		// small synthetic result but not for this 30 KB one.
		if err := fillDisk(filler, 4096); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Text: strings.Repeat("r", 30<<10)}, nil
	}}
	h := newHarness(t, harnessOpt{sessDir: dir, policy: tools.UnsafeHost, extra: []tools.Tool{writer}})
	h.srv.Enqueue(
		pt.Reply(pt.FunctionCall("c1", "fill", `{"n":1}`), pt.FunctionCall("c2", "fill", `{"n":2}`)),
		pt.Text("unreachable"),
	)
	r := h.prompt("fill the disk", PromptOptions{})
	evs := drain(t, r)
	fin := checkRunEvents(t, evs, OutcomeFailed)
	res := r.Wait()
	if _, err := os.Stat(filler); err != nil {
		t.Fatalf("the tool's effect is not on disk: %v", err)
	}
	if writer.executed.Load() != 1 {
		t.Fatalf("executed %d calls, want 1", writer.executed.Load())
	}
	var unsaved *ResultNotSavedError
	if !errors.As(res.Err, &unsaved) || unsaved.CallID != "c1" || !errors.Is(res.Err, unix.ENOSPC) {
		t.Fatalf("run error %v, want a ResultNotSavedError for c1 wrapping ENOSPC", res.Err)
	}
	if strings.Count(fin.Error, "no space left on device") != 1 || strings.Count(fin.Error, h.sess.Path()) != 1 ||
		!strings.Contains(fin.Error, "indeterminate") {
		t.Fatalf("run_finished error %q: want the cause and the session named once, and what resume will do", fin.Error)
	}
	if got := toolEvents(evs, "c1"); strings.Join(got, ",") != "started,finished-unrecorded" {
		t.Fatalf("c1 events %v, want one tool_started and one unrecorded tool_finished", got)
	}
	os.Remove(filler) // room again: resume can record what it decides
	checkUnresolvedThenIndeterminate(t, h.sess.Path(), h.host, "c1")
}

// padLedger appends lines of an unknown record kind (kept and skipped by
// every reader) to the session file at path until it holds exactly lines
// lines, header included: another writer's appends, as far as the running
// session is concerned.
func padLedger(path string, lines int) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	n := lines - strings.Count(string(data), "\n")
	if n <= 0 {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strings.Repeat(`{"kind":"padding"}`+"\n", n))
	return errors.Join(err, f.Close())
}

// TestUnsavedResultAtSessionLimits: a call that ran and whose result
// crosses one of the session's bounds (the record-count limit reached by
// the call itself, or a result larger than one record may be) fails the
// run with that limit named once, keeps no synthetic result, and is
// indeterminate on resume.
func TestUnsavedResultAtSessionLimits(t *testing.T) {
	cases := []struct {
		name      string
		limit     string
		maxResult int
		exec      func(path string) (tools.Result, error)
	}{
		{"records", "records", 0, func(path string) (tools.Result, error) {
			return tools.Result{Text: "ok"}, padLedger(path, session.MaxRecords)
		}},
		{"record bytes", "record bytes", session.MaxRecordBytes + 1<<10, func(string) (tools.Result, error) {
			return tools.Result{Text: strings.Repeat("x", session.MaxRecordBytes)}, nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkLeaks(t)
			var path string
			tool := &probeTool{name: "fill", effect: tools.WorkspaceMutation, onExec: func(context.Context, tools.Invocation) (tools.Result, error) {
				return c.exec(path)
			}}
			h := newHarness(t, harnessOpt{policy: tools.UnsafeHost, extra: []tools.Tool{tool}, maxResult: c.maxResult})
			path = h.sess.Path()
			h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "fill", `{"n":1}`), pt.FunctionCall("c2", "fill", `{"n":2}`)))
			r := h.prompt("go", PromptOptions{})
			evs := drain(t, r)
			fin := checkRunEvents(t, evs, OutcomeFailed)
			res := r.Wait()
			var unsaved *ResultNotSavedError
			lim, isLimit := errors.AsType[*session.LimitError](res.Err)
			if !errors.As(res.Err, &unsaved) || unsaved.CallID != "c1" || !isLimit || lim.Limit != c.limit {
				t.Fatalf("run error %v, want a ResultNotSavedError for c1 over the %s limit", res.Err, c.limit)
			}
			if strings.Count(fin.Error, "limit") != 1 || strings.Count(fin.Error, path) != 1 {
				t.Fatalf("run_finished error %q: want the limit and the session named once", fin.Error)
			}
			if got := toolEvents(evs, "c1"); strings.Join(got, ",") != "started,finished-unrecorded" {
				t.Fatalf("c1 events %v, want one tool_started and one unrecorded tool_finished", got)
			}
			// c2 never ran; its "not executed" error did not fit either,
			// and its tool_started is still closed.
			if got := toolEvents(evs, "c2"); c.limit == "records" && strings.Join(got, ",") != "started,finished-unrecorded" {
				t.Fatalf("c2 events %v, want one tool_started and one unrecorded tool_finished", got)
			}
			if tool.executed.Load() != 1 {
				t.Fatalf("executed %d calls, want 1", tool.executed.Load())
			}
			if c.limit == "records" {
				return // the full ledger takes nothing more, not even the indeterminate result
			}
			checkUnresolvedThenIndeterminate(t, path, h.host, "c1")
		})
	}
}

// TestUnsavedResultOfWaveLeavesEveryStartedCallUnresolved: in a parallel
// wave, once the first result cannot be saved no later one is written
// either (results stay in call order), and no call that ran is paired
// with a synthetic error: both are indeterminate on resume.
func TestUnsavedResultOfWaveLeavesEveryStartedCallUnresolved(t *testing.T) {
	checkLeaks(t)
	dir := mountTmpfs(t, 256<<10)
	filler := filepath.Join(dir, "effect.bin")
	c2ran := make(chan struct{})
	probe := &probeTool{name: "look", effect: tools.Pure, conc: tools.Parallel, onExec: func(_ context.Context, inv tools.Invocation) (tools.Result, error) {
		if inv.CallID != "c1" {
			close(c2ran)
			return tools.Result{Text: "small"}, nil
		}
		// c1's result must fail to be saved while c2 runs in the same
		// wave: c1 finishing (and its result failing) before c2 even
		// started would cancel c2 before it runs.
		select {
		case <-c2ran:
		case <-time.After(10 * time.Second):
		}
		if err := fillDisk(filler, 4096); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Text: strings.Repeat("r", 30<<10)}, nil
	}}
	h := newHarness(t, harnessOpt{sessDir: dir, policy: tools.UnsafeHost, extra: []tools.Tool{probe}})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "look", `{"n":1}`), pt.FunctionCall("c2", "look", `{"n":2}`)))
	r := h.prompt("look twice", PromptOptions{})
	evs := drain(t, r)
	checkRunEvents(t, evs, OutcomeFailed)
	if probe.executed.Load() != 2 { // only a wave runs c2 after c1's result failed
		t.Fatalf("executed %d, want a wave of 2", probe.executed.Load())
	}
	if _, ok := errors.AsType[*ResultNotSavedError](r.Wait().Err); !ok {
		t.Fatalf("run error %v, want a ResultNotSavedError", r.Wait().Err)
	}
	for _, id := range []string{"c1", "c2"} {
		if got := toolEvents(evs, id); strings.Join(got, ",") != "started,finished-unrecorded" {
			t.Fatalf("%s events %v, want one tool_started and one unrecorded tool_finished", id, got)
		}
	}
	os.Remove(filler)
	// Pure calls are replay-safe only when the tool says so; this probe
	// does not, so both become indeterminate.
	checkUnresolvedThenIndeterminate(t, h.sess.Path(), h.host, "c1")
	for _, r := range entries(readFile(t, h.sess.Path())) {
		if r.result().str("call_id") == "c2" && r.result().str("text") != textIndeterminate {
			t.Fatalf("c2 result %v, want the indeterminate error", r.result())
		}
	}
}

// TestUnsavedResultUnderCancellationFailsTheRun: a running call settles
// with its own outcome when the run is cancelled; if that outcome cannot be
// saved, the run fails saying so instead of ending "cancelled" with a
// "cancelled before it ran" error for a call that ran.
func TestUnsavedResultUnderCancellationFailsTheRun(t *testing.T) {
	checkLeaks(t)
	dir := mountTmpfs(t, 256<<10)
	filler := filepath.Join(dir, "effect.bin")
	running := make(chan struct{})
	tool := &probeTool{name: "fill", effect: tools.WorkspaceMutation, onExec: func(ctx context.Context, _ tools.Invocation) (tools.Result, error) {
		if err := fillDisk(filler, 4096); err != nil {
			return tools.Result{}, err
		}
		close(running)
		<-ctx.Done()
		return tools.Result{Text: "interrupted after writing: " + strings.Repeat("r", 30<<10), IsError: true}, nil
	}}
	h := newHarness(t, harnessOpt{sessDir: dir, policy: tools.UnsafeHost, extra: []tools.Tool{tool}})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "fill", `{"n":1}`)))
	r := h.prompt("fill", PromptOptions{})
	go func() { <-running; r.Cancel() }()
	evs := drain(t, r)
	checkRunEvents(t, evs, OutcomeFailed)
	if _, ok := errors.AsType[*ResultNotSavedError](r.Wait().Err); !ok {
		t.Fatalf("run error %v, want a ResultNotSavedError", r.Wait().Err)
	}
	if got := toolEvents(evs, "c1"); strings.Join(got, ",") != "started,finished-unrecorded" {
		t.Fatalf("c1 events %v, want one tool_started and one unrecorded tool_finished", got)
	}
	os.Remove(filler)
	checkUnresolvedThenIndeterminate(t, h.sess.Path(), h.host, "c1")
}

// TestUncertaintyReachesLedgerWhenListingCacheBlocked: a dispatched
// request that failed with unknown usage is recorded as uncertain in the
// ledger even when the listing cache next to the session cannot be
// written (its path, and the older marker file's, taken by directories,
// which stops root too); listings read the marker from the ledger.
func TestUncertaintyReachesLedgerWhenListingCacheBlocked(t *testing.T) {
	checkLeaks(t)
	h := newHarness(t, harnessOpt{})
	stem := strings.TrimSuffix(h.sess.Path(), ".jsonl")
	for _, p := range []string{stem + ".listing", stem + ".uncertain"} {
		os.Remove(p)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	h.srv.Enqueue(pt.Status(503, "server_error", "", "overloaded"))
	r := h.prompt("hi", PromptOptions{})
	fin := checkRunEvents(t, drain(t, r), OutcomeFailed)
	if strings.Contains(fin.Error, "uncertain") || !strings.Contains(fin.Error, "503") {
		t.Fatalf("run error %q, want the provider's failure only", fin.Error)
	}
	if n := count(readFile(t, h.sess.Path()), "usage_uncertain"); n != 1 {
		t.Fatalf("%d usage_uncertain records in the ledger, want 1", n)
	}
	if !h.sess.Totals().Uncertain || r.Wait().Usage.Complete {
		t.Fatal("the session's usage is not uncertain")
	}
	os.Remove(stem + ".uncertain") // an older version's flag would answer for the ledger
	infos, err := session.List(filepath.Dir(h.sess.Path()))
	if err != nil || len(infos) != 1 || !infos[0].UsageUncertain {
		t.Fatalf("List = %+v, %v; want the session usage-uncertain", infos, err)
	}
}

// TestUncommittedResponseMarkerIsDispatched: a response that completed
// but could not be committed (here its 30 KB answer meets a full disk,
// with room left for a small record) is settled at the run's end as
// uncertain usage, usage_not_recorded, marked dispatched: it may have
// been billed.
func TestUncommittedResponseMarkerIsDispatched(t *testing.T) {
	checkLeaks(t)
	dir := mountTmpfs(t, 256<<10)
	filler := filepath.Join(dir, "filler")
	fill := &probeTool{name: "fill", effect: tools.WorkspaceMutation, onExec: func(context.Context, tools.Invocation) (tools.Result, error) {
		return tools.Result{Text: "filled"}, fillDisk(filler, 8192)
	}}
	h := newHarness(t, harnessOpt{sessDir: dir, policy: tools.UnsafeHost, extra: []tools.Tool{fill}})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "fill", `{"n":1}`)), pt.Text(strings.Repeat("a", 30<<10)))
	r := h.prompt("fill the disk", PromptOptions{})
	drain(t, r)
	if res := r.Wait(); !errors.Is(res.Err, unix.ENOSPC) {
		t.Fatalf("run error %v, want ENOSPC", res.Err)
	}
	ro, err := session.Inspect(h.sess.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if c := ro.Totals().Cause; c.Reason != "usage_not_recorded" || !c.Dispatched {
		t.Fatalf("cause %+v; want usage_not_recorded, dispatched", c)
	}
}
