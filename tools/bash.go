package tools

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/internal/proc"
	"github.com/octet-agent/octet/internal/sandbox"
)

//go:embed bash.md
var bashDescription string

// bashSchemaFormat is the argument schema; %d is the configured timeout
// in milliseconds, which is both the default and the maximum.
const bashSchemaFormat = `{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "The shell command to run."},
    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Timeout in milliseconds (default and maximum %d; a larger value is lowered to it)."},
    "sandbox_escalation": {
      "type": "object",
      "description": "Only when the command needs more than the OS sandbox allows: run it with network access, or without the sandbox. The user must approve it.",
      "properties": {
        "to": {"type": "string", "enum": ["network", "none"], "description": "network: the sandbox plus network access; none: no sandbox (full disk and network)."},
        "justification": {"type": "string", "minLength": 1, "maxLength": 300, "description": "One line saying why the command needs it."}
      },
      "required": ["to", "justification"],
      "additionalProperties": false
    }
  },
  "required": ["command"],
  "additionalProperties": false
}`

// BashTool is the built-in bash tool. It is stateful: it owns a spill store
// whose budget is shared by every call for the tool's lifetime, so keep one
// instance per host and Close it when the host shuts down.
type BashTool struct {
	cfg       Config
	schema    json.RawMessage
	desc      string
	shell     string
	selection ShellSelection
	spills    *spillStore
	snaps     *snapshotter // nil: no change store, no checkpoints
	// closeSnaps gives snaps back once.
	closeSnaps sync.Once
}

var (
	_ Tool      = (*BashTool)(nil)
	_ Previewer = (*BashTool)(nil)
)

// NewBash constructs the bash tool, resolving its shell once (ResolveShell
// of cfg.ShellPath). An unavailable shell is not a construction error:
// every call then fails with a clear result.
func NewBash(cfg Config) (*BashTool, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	shell, sel := ResolveShell(cfg.ShellPath)
	ms := cfg.BashTimeout.Milliseconds()
	if shell != "" {
		proc.Warm() // a guard ready for the first command (internal/proc/spare.go)
	}
	return &BashTool{
		cfg:       cfg,
		schema:    json.RawMessage(fmt.Sprintf(bashSchemaFormat, ms)),
		desc:      strings.ReplaceAll(bashDescription, "{{timeout_ms}}", strconv.FormatInt(ms, 10)),
		shell:     shell,
		selection: sel,
		spills:    newSpillStore(cfg.SpillDir),
		snaps:     sharedSnapshotter(cfg),
	}, nil
}

// ShellSelection reports how the shell was chosen (never the path).
func (t *BashTool) ShellSelection() ShellSelection { return t.selection }

// WarmUp starts the workspace's first snapshot now, if no call has and
// its prewarmDelay is still running: a model request is out (Warmer).
func (t *BashTool) WarmUp() {
	if t.snaps != nil {
		t.snaps.warmUp()
	}
}

// Close removes every retained spill file and the private spill
// directory (paths in earlier results stop working), and gives back the
// workspace's snapshotter.
func (t *BashTool) Close() error {
	t.closeSnaps.Do(func() { releaseSnapshotter(t.snaps) })
	return t.spills.Close()
}

type bashArgs struct {
	Command    *string     `json:"command"`
	TimeoutMS  *int64      `json:"timeout_ms"`
	Escalation *Escalation `json:"sandbox_escalation"`
}

func (t *BashTool) parse(raw json.RawMessage) (bashArgs, time.Duration, error) {
	var a bashArgs
	if err := decodeBuiltinArgs(raw, &a); err != nil {
		return a, 0, err
	}
	if a.Command == nil {
		return a, 0, errors.New("missing required argument command")
	}
	if strings.TrimSpace(*a.Command) == "" {
		return a, 0, errors.New("command must not be empty")
	}
	if strings.IndexByte(*a.Command, 0) >= 0 {
		return a, 0, errors.New("command contains a NUL byte")
	}
	if a.Escalation != nil {
		if err := a.Escalation.validate(); err != nil {
			return a, 0, err
		}
	}
	timeout := t.cfg.BashTimeout
	if a.TimeoutMS != nil {
		if *a.TimeoutMS < 1 {
			return a, 0, errors.New("timeout_ms must be >= 1")
		}
		// The model may only shorten the configured timeout (which the
		// user or a tightening project config chose), never extend it.
		timeout = min(time.Duration(min(*a.TimeoutMS, int64(MaxBashTimeout/time.Millisecond)))*time.Millisecond, t.cfg.BashTimeout)
	}
	return a, timeout, nil
}

// Name returns "bash".
func (t *BashTool) Name() string { return "bash" }

// Description returns the embedded bash.md with the configured timeout.
func (t *BashTool) Description() string { return t.desc }

// Schema returns the bash argument schema, which states the configured
// timeout as the default and the maximum.
func (t *BashTool) Schema() json.RawMessage { return t.schema }

// Concurrency reports Sequential: processes are barriers.
func (t *BashTool) Concurrency() Concurrency { return Sequential }

// ReplaySafety reports ReplayUnsafe: a command may have had effects.
func (t *BashTool) ReplaySafety() ReplaySafety { return ReplayUnsafe }

// Classify returns HostProcess for every valid call. (Whether a command is
// a known-safe read-only one is the broker's decision, not the tool's.)
func (t *BashTool) Classify(args json.RawMessage) (Effect, error) {
	if _, _, err := t.parse(args); err != nil {
		return Unknown, err
	}
	return HostProcess, nil
}

// Preview shows the exact, whole command. The broker makes its controls
// and invisible characters visible and refuses to ask for approval when
// the result does not fit the prompt whole: an approval never shows less
// than what will run.
func (t *BashTool) Preview(ctx context.Context, args json.RawMessage) (Preview, error) {
	a, timeout, err := t.parse(args)
	if err != nil {
		return Preview{}, err
	}
	detail := *a.Command
	title := "bash"
	if timeout != t.cfg.BashTimeout {
		title = fmt.Sprintf("bash (timeout %s)", timeout)
	}
	if e := a.Escalation; e != nil {
		// The broker's title says what the escalation grants; the reason
		// is the model's, shown as such above the command.
		detail = fmt.Sprintf("Asks to run %s. The model's reason: %s\n\n%s", escalationWords(e.To), strings.TrimSpace(e.Justification), detail)
	}
	return Preview{Title: title, Detail: detail}, nil
}

// escalationWords says what an escalation asks for.
func escalationWords(to string) string {
	if to == EscalateNone {
		return "WITHOUT the sandbox (full disk and network access)"
	}
	return "in the sandbox WITH network access"
}

var _ SandboxEscalator = (*BashTool)(nil)

// SandboxEscalation returns the call's sandbox_escalation, if any.
func (t *BashTool) SandboxEscalation(args json.RawMessage) (*Escalation, error) {
	a, _, err := t.parse(args)
	if err != nil {
		return nil, err
	}
	return a.Escalation, nil
}

// outcome is how a command ended.
type outcome struct {
	exitCode  int
	signal    string
	timedOut  bool
	cancelled bool
	// supervision is set when the process guard was lost: processes the
	// command started may survive.
	supervision error
}

// Execute runs the command and reports its bounded output.
func (t *BashTool) Execute(ctx context.Context, inv Invocation) (Result, error) {
	a, timeout, err := t.parse(inv.Arguments)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	if t.selection == ShellUnavailable {
		return errorResult(ShellUnavailableReason()), nil
	}
	if ctx.Err() != nil {
		return cancelledBeforeStart(), nil
	}
	headCap := max(t.cfg.BashMaxOutputBytes/2, 1)
	capt := newCapture(t.spills, headCap, headCap, t.cfg.MaxOutputBytes, inv.Progress != nil)
	env := commandEnv(os.Environ(), t.cfg.ScrubEnv)
	var spec *sandbox.Spec
	if inv.Sandbox.confined() {
		tmp, cleanup, err := privateTemp(t.cfg.SpillDir)
		if err != nil {
			capt.finish()
			return errorResult(err.Error() + "; nothing was run"), nil
		}
		defer cleanup()
		spec, env = t.spec(inv.Sandbox, tmp), sandboxEnv(env, tmp)
	}
	// The guard starts now, its own start overlapping the checkpoint; the
	// command starts once the checkpoint is durable, or never.
	r, err := t.prepare(*a.Command, env, spec)
	if err != nil {
		capt.finish()
		return errorResult(fmt.Sprintf("could not start the command: %v", err)), nil
	}
	if t.snaps != nil && !inv.ReadOnly {
		// While the call runs the snapshots' images are held: no prior
		// image expires before the call's checkpoint names it.
		defer t.snaps.beginCall()()
	}
	pre, res, ok := t.checkpointBefore(ctx, inv)
	if !ok {
		r.abandon()
		capt.finish()
		return res, nil
	}
	var noCheckpoint []string
	if t.snaps == nil && !inv.ReadOnly && t.cfg.Changes != nil && t.cfg.Changes.Store != nil {
		noCheckpoint = []string{"everything: bash calls are not checkpointed on " + runtime.GOOS}
	}
	oc, runErr := t.run(ctx, r, timeout, capt, inv.Progress)
	defer proc.Warm() // the next call's guard, started once this call's result is made
	if runErr != nil {
		capt.finish()
		res := errorResult(fmt.Sprintf("could not start the command: %v", runErr))
		if errors.Is(runErr, proc.ErrGuardLost) {
			res = errorResult(fmt.Sprintf("the command's supervision failed: %v", runErr))
		}
		return t.checkpoint(res, pre, inv, errors.Is(runErr, proc.ErrGuardLost)), nil
	}
	res = t.checkpoint(t.result(capt.finish(), oc, timeout, inv.Sandbox), pre, inv, oc.supervision != nil)
	if noCheckpoint != nil {
		res.CannotUndo = noCheckpoint
	}
	return res, nil
}

// checkpointBefore takes the snapshot before a command the broker did not
// admit as a read (nil: none to take) and records the call's intent;
// false means the command must not run, for the reason res gives.
func (t *BashTool) checkpointBefore(ctx context.Context, inv Invocation) (pre *snapshot, res Result, ok bool) {
	if t.snaps == nil || inv.ReadOnly {
		return nil, Result{}, true
	}
	pre, err := t.snaps.take(ctx, takeOptions{progress: inv.Progress, before: true})
	switch {
	case ctx.Err() != nil:
		return nil, cancelledBeforeStart(), false
	case err != nil:
		return nil, errorResult(fmt.Sprintf("could not checkpoint the workspace before the command: %v; nothing was run (octet keeps the workspace's files before a command changes them: free space in $OCTET_HOME or fix its permissions, then try again)", err)), false
	}
	if inv.Intent != nil {
		if err := inv.Intent(changes.Intent{Snapshot: pre.manifest}); err != nil {
			return nil, errorResult(stageErrorText(err)), false
		}
	}
	return pre, Result{}, true
}

// cancelledBeforeStart is the result of a call cancelled before its
// command started (nothing ran).
func cancelledBeforeStart() Result {
	return Result{
		Text:    "[cancelled before the command started]",
		IsError: true,
		Details: map[string]any{"exit_code": -1, "timed_out": false, "cancelled": true, "truncated": false, "output_bytes": int64(0)},
	}
}

// checkpoint completes res with what the command changed: the changes
// between the snapshot pre (nil: none was taken) and one taken now, and
// what a rewind of them cannot undo. The snapshot runs to its end even
// when the call was cancelled (what the command did is recorded), and
// walks the workspace when the command's supervision was lost (processes
// it started may still write).
func (t *BashTool) checkpoint(res Result, pre *snapshot, inv Invocation, unsupervised bool) Result {
	if pre == nil {
		return res
	}
	post, err := t.snaps.take(context.Background(), takeOptions{walk: unsupervised, progress: inv.Progress})
	if err != nil {
		res.CannotUndo = []string{fmt.Sprintf("everything: the snapshot after the command failed (%v), so what it changed is not recorded", err)}
		return res
	}
	res.Changes, res.CannotUndo = t.snaps.checkpointChanges(t.cfg.Changes, pre, post)
	if res.Details == nil {
		res.Details = map[string]any{}
	}
	res.Details["checkpoint"] = map[string]any{"before": pre.manifest, "after": post.manifest}
	return res
}

// A pendingRun is a command's guard started ahead of the command
// (proc.Prepare), with the read ends of the command's output pipes.
type pendingRun struct {
	q          *proc.Pending
	outR, errR *os.File
}

// prepare starts the guard of command, its stdin on /dev/null and its
// stdout and stderr on pipes: the command starts with run, or never
// (abandon).
func (t *BashTool) prepare(command string, env []string, spec *sandbox.Spec) (*pendingRun, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	growPipe(outW)
	growPipe(errW)
	q, err := proc.Prepare(proc.Command{
		Path: t.shell, Args: []string{t.shell, "-c", command},
		Dir: t.cfg.Root, Env: env, Sandbox: spec,
		Stdout: outW, Stderr: errW, Grace: BashKillGrace,
	})
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	return &pendingRun{q: q, outR: outR, errR: errR}, nil
}

// abandon ends r's guard without its command.
func (r *pendingRun) abandon() {
	r.q.Abandon()
	r.outR.Close()
	r.errR.Close()
}

// run starts the command r's guard waits for, drains stdout and stderr
// concurrently into capt, and has the guard stop the command's whole
// process tree (SIGTERM, then SIGKILL after BashKillGrace) when the shell
// exits, the timeout fires or ctx is cancelled, so nothing the command
// started outlives the call — nor octet, should octet die meanwhile.
// Without a guard nothing runs: a guard that cannot be started is an
// error.
func (t *BashTool) run(ctx context.Context, r *pendingRun, timeout time.Duration, capt *capture, progress func(string)) (outcome, error) {
	outR, errR := r.outR, r.errR
	p, startErr := r.q.Run()
	if startErr != nil {
		outR.Close()
		errR.Close()
		return outcome{}, startErr
	}

	var drains sync.WaitGroup
	drains.Go(func() { drain(outR, capt, stdoutStream, t.cfg.Redactor) })
	drains.Go(func() { drain(errR, capt, stderrStream, t.cfg.Redactor) })
	stopProgress := startProgress(capt, progress)

	timer := time.NewTimer(timeout)
	defer timer.Stop()

	var oc outcome
	select {
	case <-p.Exited():
	case <-timer.C:
		oc.timedOut = true
		p.Terminate()
	case <-ctx.Done():
		oc.cancelled = true
		p.Terminate()
	}
	// Whether the shell exited by itself or not, the guard stops the
	// tree; Wait returns once it is gone.
	st, werr := p.Wait()
	// Something outside the tree may still hold the pipes (a process
	// that was handed them over a socket, or survivors of a lost guard);
	// give it the grace period, then close our ends so draining stops.
	drained := make(chan struct{})
	go func() { drains.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(BashKillGrace):
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()
	stopProgress()

	oc.exitCode = st.Code
	if st.Signal != 0 {
		oc.signal = st.Signal.String()
	}
	oc.supervision = werr
	return oc, nil
}

// scrubbedEnv names environment variables the octet process may hold for
// itself (provider credentials) and never passes to model-run commands:
// their values would otherwise reach tool results and session files.
var scrubbedEnv = map[string]bool{"OPENAI_API_KEY": true}

// commandEnv returns env without scrubbed variables, the variables named
// in scrub (the configured providers' key variables), or any OCTET_*
// variable whose name says it is a key, token or secret.
func commandEnv(env, scrub []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		if scrubbedEnv[upper] || slices.ContainsFunc(scrub, func(s string) bool { return strings.EqualFold(s, name) }) || (strings.HasPrefix(upper, "OCTET_") &&
			(strings.Contains(upper, "KEY") || strings.Contains(upper, "TOKEN") || strings.Contains(upper, "SECRET"))) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// drain copies r, stream id of the command, into capt until EOF or until
// r is closed. Every byte passes red first (a nil Redactor passes it
// unchanged), so a secret the command prints reaches neither the preview
// nor a spill file; a secret split across reads is still caught.
func drain(r *os.File, capt *capture, id streamID, red *Redactor) {
	out := red.Stream(func(b []byte) { capt.write(id, b) })
	defer out.Flush()
	buf := make([]byte, 256<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			out.Write(buf[:n])
		}
		if err != nil {
			if err != io.EOF && !errors.Is(err, os.ErrClosed) {
				out.Write([]byte(fmt.Sprintf("\n[output read error: %v]\n", err)))
			}
			return
		}
	}
}

// startProgress forwards bounded, neutralized output chunks to progress
// every 100 ms. The returned stop function flushes and stops it.
func startProgress(capt *capture, progress func(string)) func() {
	if progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	flush := func() {
		if p := capt.takeProgress(); len(p) > 0 {
			progress(neutralizeControls(p))
		}
	}
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				flush()
			case <-done:
				flush()
				return
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// result builds the model-visible text and the Details: how the command
// ended, where cut output was saved, and the sandbox it ran in (with,
// for a failure that looks like the sandbox's refusal, what it refused
// and how to ask for more).
func (t *BashTool) result(c captured, oc outcome, timeout time.Duration, sb CallSandbox) Result {
	var footer []string
	switch {
	case oc.timedOut:
		footer = append(footer, fmt.Sprintf("[timed out after %s; the process tree was killed]", timeout))
	case oc.cancelled:
		footer = append(footer, "[cancelled; the process tree was killed]")
	case oc.signal != "":
		footer = append(footer, fmt.Sprintf("[killed by signal: %s]", oc.signal))
	default:
		footer = append(footer, fmt.Sprintf("[exit code: %d]", oc.exitCode))
	}
	if oc.supervision != nil {
		footer = append(footer, fmt.Sprintf("[%v: processes the command started may still run]", oc.supervision))
	}
	details := map[string]any{
		"exit_code":    oc.exitCode,
		"timed_out":    oc.timedOut,
		"cancelled":    oc.cancelled,
		"output_bytes": c.total,
	}
	for id := range numStreams {
		r := c.streams[id]
		switch {
		case r.fullPath != "":
			footer = append(footer, fmt.Sprintf("[%s (%d bytes) saved to %s]", id, r.bytes, r.fullPath))
		case r.partialPath != "":
			footer = append(footer, fmt.Sprintf("[first %d of %d %s bytes saved to %s]", r.spilledBytes, r.bytes, id, r.partialPath))
		}
		details[id.String()] = streamDetails(r)
	}
	details["sandbox"] = sb.Label()
	if sb.confined() {
		footer = append(footer, "[sandbox: "+sb.Label()+"]")
		failed := oc.exitCode != 0 && !oc.timedOut && !oc.cancelled
		if hint := sandboxHint(sb, string(c.head)+string(c.tail)); failed && hint != "" {
			footer = append(footer, hint)
			details["sandbox_refusal_suspected"] = true
		}
	} else if sb.Escalated {
		footer = append(footer, "[ran without the sandbox: approved escalation]")
	}
	foot := strings.Join(footer, "\n")
	body, truncated := t.body(c, t.cfg.MaxOutputBytes-len(foot)-1)
	text := body + foot
	if body != "" && !strings.HasSuffix(body, "\n") {
		text = body + "\n" + foot
	}
	text, cut := clipUTF8(text, t.cfg.MaxOutputBytes)
	details["truncated"] = truncated || cut
	return Result{
		Text:    text,
		IsError: oc.timedOut || oc.cancelled || oc.exitCode != 0 || oc.supervision != nil,
		Details: details,
	}
}

// streamDetails is one stream's entry in Details: its byte count and, when
// it was spilled, exactly one of full_output_path (the entire stream was
// kept), partial_output_path with spill_truncated (limits cut it), or
// spill_truncated / spill_error / spill_expired without a path.
func streamDetails(r streamResult) map[string]any {
	d := map[string]any{"bytes": r.bytes}
	switch {
	case r.fullPath != "":
		d["full_output_path"] = r.fullPath
	case r.partialPath != "":
		d["partial_output_path"] = r.partialPath
		d["spill_truncated"] = true
	case r.spillTruncated:
		d["spill_truncated"] = true
	}
	if r.spillError {
		d["spill_error"] = true
	}
	if r.spillExpired {
		d["spill_expired"] = true
	}
	return d
}

// body renders the captured output within budget bytes: all of it when it
// fits, else its head and tail around an omission marker.
func (t *BashTool) body(c captured, budget int) (string, bool) {
	budget = max(budget, 0)
	if c.total == 0 {
		return "(no output)\n", false
	}
	if c.omitted == 0 {
		all := neutralizeControls(append(append([]byte(nil), c.head...), c.tail...))
		if len(all) <= budget {
			return all, false
		}
	}
	half := max(budget/2-64, 0)
	headRaw := c.head[:min(len(c.head), half)]
	var tailRaw []byte
	if len(c.tail) > 0 {
		tailRaw = c.tail[max(0, len(c.tail)-half):]
	} else {
		tailRaw = c.head[max(len(headRaw), len(c.head)-half):]
	}
	head, _ := clipUTF8(neutralizeControls(headRaw), half)
	tail := clipFrontUTF8(neutralizeControls(tailRaw), half)
	omitted := max(c.total-int64(len(headRaw)+len(tailRaw)), 0)
	// Show whole lines around the marker when lines are not huge.
	if i := strings.LastIndexByte(head, '\n'); i >= len(head)/2 {
		omitted += int64(len(head) - i - 1)
		head = head[:i+1]
	}
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/2 {
		omitted += int64(i + 1)
		tail = tail[i+1:]
	}
	marker := fmt.Sprintf("[... %d bytes of output omitted ...]\n", omitted)
	if !strings.HasSuffix(head, "\n") {
		marker = "\n" + marker
	}
	return head + marker + tail, true
}

// clipFrontUTF8 keeps at most max bytes from the end of s, starting on a
// rune boundary.
func clipFrontUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[len(s)-max:]
	for i := 0; i < len(s) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(s[i]) {
			return s[i:]
		}
	}
	return s
}
