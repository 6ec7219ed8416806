package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// textRenderer prints a run for a person: the answer text on out (stdout),
// everything else (tool activity, retries, recovered output) on notes
// (stderr), so `octet exec ... > answer.txt` captures only the answer.
//
// On a terminal or a pipe (live) answer text streams as it arrives; a
// provider retry then says on notes that the text already written from
// the failed attempt is discarded. Otherwise (a file) deltas are held
// until the assistant message is committed, so the file gets only
// committed answer text, never the output of a failed attempt (as -o and
// the --json result's answer always do).
type textRenderer struct {
	out, notes io.Writer
	live       bool
	// dim is set when notes is a terminal: reasoning summaries are shown
	// dimmed there (plain, after "┆ ", otherwise).
	dim bool
	// thinking is set while a reasoning summary is being shown.
	thinking    bool
	pending     strings.Builder
	atLineStart bool
	// args collects the provisional arguments of streamed calls, shown
	// when the call actually starts.
	args map[string]*strings.Builder
	// lastCause is the cause of the previous provider retry: a repeated
	// cause is not printed again.
	lastCause string
	// output holds each running call's last unfinished line of
	// tool_output, shown when its line ends or the call finishes.
	output map[string]string
	// result looks up a finished call's durable result (nil: unknown).
	result func(callID string) *session.ToolResult
	// usage is the run's latest known usage subtotal; uncertain records
	// that some of the run's usage is unknown.
	usage     *agent.Usage
	uncertain bool
	// plans are the running update_plan calls: their checklist (the plan
	// event) stands for them, so they get no call lines of their own.
	plans map[string]bool
}

func newTextRenderer(out, notes io.Writer, live bool) *textRenderer {
	return &textRenderer{out: out, notes: notes, live: live, atLineStart: true,
		args: map[string]*strings.Builder{}, output: map[string]string{}, plans: map[string]bool{}}
}

// text shows answer text now (live) or holds it until it is committed.
func (r *textRenderer) text(s string) {
	if !r.live {
		r.pending.WriteString(s)
		return
	}
	r.write(s)
}

func (r *textRenderer) write(s string) {
	if s == "" {
		return
	}
	io.WriteString(r.out, visible(s))
	r.atLineStart = strings.HasSuffix(s, "\n")
}

// commit writes held text once its assistant message is durable.
func (r *textRenderer) commit() {
	r.write(r.pending.String())
	r.pending.Reset()
}

// endLine ends the current answer line, so what is written next to the
// same terminal starts on a line of its own.
func (r *textRenderer) endLine() {
	if !r.atLineStart {
		io.WriteString(r.out, "\n")
		r.atLineStart = true
	}
}

// note ends the current answer line first so notes never interleave
// mid-line when out and notes are the same terminal.
func (r *textRenderer) note(format string, args ...any) {
	r.endLine()
	fmt.Fprintf(r.notes, format+"\n", args...)
}

// Select Graphic Rendition sequences that dim text and end it.
const (
	sgrDim    = "\x1b[2m"
	sgrNormal = "\x1b[22m"
)

// think shows reasoning summary text on notes as it streams: on a line of
// its own, each line after "┆ ", dimmed on a terminal.
func (r *textRenderer) think(s string) {
	if s == "" {
		return
	}
	if !r.thinking {
		r.endLine()
		r.thinking = true
		if r.dim {
			io.WriteString(r.notes, sgrDim)
		}
		io.WriteString(r.notes, "┆ ")
	}
	io.WriteString(r.notes, strings.ReplaceAll(visible(s), "\n", "\n┆ "))
}

// endThinking ends a reasoning summary being shown.
func (r *textRenderer) endThinking() {
	if !r.thinking {
		return
	}
	r.thinking = false
	if r.dim {
		io.WriteString(r.notes, sgrNormal)
	}
	io.WriteString(r.notes, "\n")
}

// event renders one agent event.
func (r *textRenderer) event(ev agent.Event) {
	if d, ok := ev.(*agent.OutputDelta); ok && d.Channel == agent.ChannelReasoning {
		r.think(d.Text)
		return
	}
	r.endThinking()
	switch e := ev.(type) {
	case *agent.OutputDelta:
		if e.Channel == agent.ChannelText {
			r.text(e.Text)
		}
	case *agent.AssistantCommitted:
		r.commit()
	case *agent.ToolCallDelta:
		b := r.args[e.CallID]
		if b == nil {
			b = &strings.Builder{}
			r.args[e.CallID] = b
		}
		if b.Len() < 4096 {
			b.WriteString(e.Delta)
		}
	case *agent.ToolStarted:
		if e.Tool == (tools.UpdatePlanTool{}).Name() {
			r.plans[e.CallID] = true
			delete(r.args, e.CallID)
			return
		}
		args := ""
		if b := r.args[e.CallID]; b != nil {
			args = " " + visible(oneLine(b.String(), 120))
			delete(r.args, e.CallID)
		}
		r.note("▸ %s%s", visible(e.Tool), args)
	case *agent.ToolPolicyDecision:
		if e.Decision != "allowed" {
			reason := e.Reason
			if reason == "" {
				reason = e.Decision
			}
			r.note("  %s: %s", e.Decision, visible(reason))
		}
	case *agent.ToolOutput:
		r.toolOutput(e.CallID, e.Text)
	case *agent.PlanUpdate:
		r.plan(e)
	case *agent.ToolFinished:
		r.flushOutput(e.CallID)
		if r.plans[e.CallID] {
			delete(r.plans, e.CallID)
			if !e.IsError && !e.Unrecorded {
				return
			}
			r.note("▸ update_plan")
		}
		switch {
		case e.Unrecorded:
			r.note("  ! ran, but its result could not be saved: the session records it as indeterminate")
		case e.IsError:
			r.note("  ✗ failed%s", r.failure(e.CallID))
		default:
			r.note("  ✓ done")
		}
	case *agent.ProviderRetry:
		r.retry(e)
	case *agent.RecoveredOutput:
		r.note("┆ recovered output of the interrupted attempt (%s, not part of the answer):\n┆ %s", e.Channel, strings.ReplaceAll(visible(e.Text), "\n", "\n┆ "))
	case *agent.ProviderUsageUncertain:
		r.uncertain = true
		r.note("! usage is now uncertain: %s", e.Reason)
	case *agent.Usage:
		r.usage = e
	case *agent.RunFinished:
		if r.pending.Len() > 0 {
			r.note("(%d bytes of uncommitted answer text discarded: the run ended %s before the message was complete)", r.pending.Len(), e.Outcome)
			r.pending.Reset()
		}
		r.endLine()
		if line := r.usageLine(); line != "" {
			r.note("%s", line)
		}
	}
}

// plan shows a plan as a checklist on notes: [x] completed, [>] in
// progress, [ ] pending. A plan without a call is the session's plan
// so far, shown when exec continues a session.
func (r *textRenderer) plan(e *agent.PlanUpdate) {
	head := "plan"
	if e.CallID == "" {
		head = "plan so far in this session"
	}
	if e.Explanation != "" {
		head += ": " + visible(oneLine(e.Explanation, 200))
	}
	r.note("☰ %s", head)
	for _, s := range e.Plan {
		mark := "[ ]"
		switch s.Status {
		case tools.StepCompleted:
			mark = "[x]"
		case tools.StepInProgress:
			mark = "[>]"
		}
		r.note("  %s %s", mark, visible(oneLine(s.Step, 200)))
	}
}

// jsonRenderer prints every event as one JSON line on out, in the
// octet/event envelope: {"sessionId","runId","seq","event":{"kind",...}}.
type jsonRenderer struct {
	out       io.Writer
	sessionID string
	runID     string
	err       error
}

// line writes v as one JSON line (children's events).
func (j *jsonRenderer) line(v any) {
	if j.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.err = err
		return
	}
	if _, err := j.out.Write(append(b, '\n')); err != nil {
		j.err = err
	}
}

func (j *jsonRenderer) event(ev agent.Event) {
	if j.err != nil {
		return
	}
	body, err := agent.MarshalEvent(ev)
	if err != nil {
		j.err = err
		return
	}
	line, err := json.Marshal(struct {
		SessionID string          `json:"sessionId"`
		RunID     string          `json:"runId"`
		Seq       int64           `json:"seq"`
		Event     json.RawMessage `json:"event"`
	}{j.sessionID, j.runID, ev.Seq(), body})
	if err != nil {
		j.err = err
		return
	}
	line = append(line, '\n')
	if _, err := j.out.Write(line); err != nil {
		j.err = err
	}
}

// retry reports a provider retry. The failure is named as it is ("cannot
// connect to the provider: connection refused") at the first retry and
// whenever it changes; a repetition says only that it persists.
func (r *textRenderer) retry(e *agent.ProviderRetry) {
	cause := e.Cause
	if cause == "" {
		cause = e.Reason
	}
	what := visible(cause)
	if cause == r.lastCause {
		what = "still failing"
	}
	r.lastCause = cause
	if e.Operation != nil {
		what = *e.Operation + " request: " + what
	} else {
		clear(r.args)
		r.pending.Reset() // never committed: not part of the answer
	}
	giveUp := ""
	if e.GiveUpInMs != nil {
		giveUp = fmt.Sprintf(" (gives up in %s)", (time.Duration(*e.GiveUpInMs) * time.Millisecond).Round(time.Second))
	}
	if e.RetryKind == agent.RetryWaitingForNetwork {
		r.note("↻ %s; waiting for the network, next try in %s%s", what, retryDelay(e.DelayMs), giveUp)
		return
	}
	maxA := "∞"
	if e.MaxAttempts != nil {
		maxA = fmt.Sprint(*e.MaxAttempts)
	}
	if e.Operation != nil {
		r.note("↻ %s; retrying %d/%s in %s%s", what, e.Attempt, maxA, retryDelay(e.DelayMs), giveUp)
		return
	}
	discarded := "output of the failed attempt is discarded"
	if r.live {
		discarded = "answer text already written from the failed attempt is discarded"
	}
	r.note("↻ %s; retrying %d/%s in %s%s — %s", what, e.Attempt, maxA, retryDelay(e.DelayMs), giveUp, discarded)
}

// retryDelay shows a retry's delay: milliseconds under a minute, and a
// longer wait (a provider's Retry-After of hours) as a duration a person
// reads at once, with how to stop it.
func retryDelay(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d < time.Minute {
		return fmt.Sprintf("%dms", ms)
	}
	return d.Round(time.Second).String() + " (Ctrl-C stops)"
}

// execResultLine is the last line of `octet exec --json`: how the run
// ended, for a script that reads only it.
type execResultLine struct {
	Type      string `json:"type"`
	Outcome   string `json:"outcome"`
	ExitCode  int    `json:"exitCode"`
	Error     string `json:"error,omitempty"`
	Answer    string `json:"answer"`
	SessionID string `json:"sessionId"`
	RunID     string `json:"runId"`
	Usage     struct {
		Requests    int   `json:"requests"`
		Input       int64 `json:"input"`
		CachedInput int64 `json:"cachedInput"`
		Output      int64 `json:"output"`
		Reasoning   int64 `json:"reasoning"`
		// Complete is false when some of the run's usage is unknown:
		// the numbers (and the cost) are then a known subtotal.
		Complete bool `json:"complete"`
	} `json:"usage"`
	// CostUSD is the run's known cost as an exact decimal string of US
	// dollars, null when the model has no price.
	CostUSD *string `json:"costUsd"`
}

// writeResult writes the result line of an exec run to out.
func writeResult(out io.Writer, sessionID string, res execResult, code int, err error) {
	l := execResultLine{Type: "result", Outcome: string(res.Outcome), ExitCode: code,
		Answer: res.answer, SessionID: sessionID, RunID: res.RunID}
	if err != nil {
		l.Error = err.Error()
	}
	u := res.Usage
	l.Usage.Requests, l.Usage.Input, l.Usage.CachedInput, l.Usage.Output, l.Usage.Reasoning =
		u.Requests, u.Input, u.CachedInput, u.Output, u.Reasoning
	l.Usage.Complete = u.Complete
	if res.usage != nil && res.usage.CostMicros != nil {
		c := strings.TrimPrefix(agent.Picodollars(u.CostPicodollars).String(), "$")
		l.CostUSD = &c
	}
	b, _ := json.Marshal(l)
	out.Write(append(b, '\n'))
}
