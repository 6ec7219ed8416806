package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// DefaultGateContinuations bounds how often one run's terminal gate may
// send the run on when CompletionPolicy.MaxContinuations is zero.
const DefaultGateContinuations = 3

// gateMaxTokens bounds a gate's answer.
const gateMaxTokens = 2048

// CompletionPolicy is a host's terminal gate: when a run would end
// naturally (an answer without tool calls, no queued input) the agent
// asks the model, in an auxiliary provider request of operation
// "terminal_gate", whether the run may end — "are the tests green?" —
// and either ends it or continues it with the input Judge returns. The
// gate request carries the conversation as the main request would, then
// Question; it has no tools. It recovers under the same classification,
// budgets and outage bound as a compaction summary (opening bounded by
// the outage deadline, a healthy body not), and only a successful gate
// commits its usage. A child agent inherits its parent's policy.
type CompletionPolicy struct {
	// Instructions is the gate's system prompt.
	Instructions string
	// Question is the gate's final user-role message.
	Question string
	// Judge reads the gate's answer text: done ends the run; otherwise
	// the run goes on with continueWith (persisted as a follow-up entry;
	// "" is not a continuation and ends the run too).
	Judge func(answer string) (done bool, continueWith string)
	// MaxContinuations bounds the gate's continuations per run (0:
	// DefaultGateContinuations); once reached the run ends without
	// asking again.
	MaxContinuations int
}

// GateError is the failure of a terminal gate that could not decide (a
// refused request, an empty answer): the run fails closed rather than
// ending as if the gate had passed.
type GateError struct{ Err error }

func (e *GateError) Error() string {
	return fmt.Sprintf("the completion gate could not decide whether the run may end: %v", e.Err)
}

func (e *GateError) Unwrap() error { return e.Err }

// gates reports whether the run asks its completion gate before ending:
// a policy is set, FinishNow was not accepted (a person asked the run to
// finish; the gate would defeat that), and the continuations are not
// spent.
func (r *Run) gates() bool {
	p := r.a.cfg.Completion
	if p == nil || p.Judge == nil || r.compactOnly || r.ctl.finishRequested() {
		return false
	}
	limit := p.MaxContinuations
	if limit <= 0 {
		limit = DefaultGateContinuations
	}
	return r.gateContinuations < limit
}

// terminalGate asks the completion gate whether the run may end. It
// returns the continuation (nil when the run may end). Controls accepted
// while the gate's request is pending stay queued for the boundary after
// it.
func (r *Run) terminalGate() (*control, error) {
	p := r.a.cfg.Completion
	req, _, _ := r.buildRequest()
	req.Instructions = p.Instructions
	req.Input = append(slices.Clip(req.Input), userMessage(p.Question))
	req.Tools, req.ToolChoice, req.ParallelToolCalls = nil, "none", false
	req.MaxOutputTokens = gateMaxTokens
	if m := r.pin.model.MaxOutputTokens; m > 0 && m < gateMaxTokens {
		req.MaxOutputTokens = m
	}
	ar, err := r.auxRequest(OperationTerminalGate, req)
	if err != nil {
		if errors.Is(err, errCancelled) || IsRecoveryTerminal(err) || errors.Is(err, errPersist) {
			return nil, err
		}
		return nil, &GateError{Err: err}
	}
	if err := r.commitAux(OperationTerminalGate, ar); err != nil {
		return nil, err
	}
	answer := strings.TrimSpace(responseText(ar))
	if answer == "" {
		return nil, &GateError{Err: errors.New("the gate's response had no text")}
	}
	done, more := p.Judge(answer)
	if done || more == "" {
		return nil, nil
	}
	r.gateContinuations++
	return &control{kind: controlFollowUp, text: more}, nil
}

// commitAux commits a successful auxiliary request without an entry:
// its usage and its dispatch settlement in one batch. A cancelled run
// persists nothing.
func (r *Run) commitAux(op string, ar *attemptResult) error {
	if r.ctx.Err() != nil {
		return r.settleFailed(errCancelled)
	}
	var recs []session.Record
	var cost int64
	var priced bool
	u := ar.resp.Usage
	if u != nil {
		var rec session.Record
		rec, cost, priced = r.usageRecord(op, r.pin.model.Name, ar)
		recs = append(recs, rec)
	}
	settle, uncertain := r.completedSettlement(op, u)
	recs = append(recs, settle...)
	if err := r.a.sess.Append(recs...); err != nil {
		return fmt.Errorf("%w %s usage: %w", errPersist, op, err)
	}
	r.settled()
	if uncertain {
		r.noteUncertain(op, reasonUsageNotReported)
	}
	if u != nil {
		r.addUsage(u, cost, priced)
	}
	return nil
}

// responseText joins the message texts of a completed response.
func responseText(ar *attemptResult) string {
	out := ar.resp.Output
	if len(out) == 0 {
		out = ar.items
	}
	var b strings.Builder
	for _, it := range out {
		if it.Type == provider.ItemMessage && it.Text != "" {
			if b.Len() > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(it.Text)
		}
	}
	return b.String()
}
