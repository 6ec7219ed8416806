package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// unresolvedCall is a function call on the active branch without a result.
type unresolvedCall struct {
	runID string
	item  session.Item
	// index is the call's position among its message's function calls;
	// truncated is set when the message stopped at the output limit. The
	// live loop's admission rules depend on both.
	index     int
	truncated bool
	// last marks the message's last unresolved call.
	last bool
}

// unresolvedCalls lists the branch's function calls that have no
// tool_result entry on the branch, in emitted order.
func unresolvedCalls(branch []session.Entry) []unresolvedCall {
	answered := make(map[string]bool)
	for _, e := range branch {
		if e.Type == session.EntryToolResult && e.Result != nil {
			answered[e.Result.CallID] = true
		}
	}
	var out []unresolvedCall
	for _, e := range branch {
		if e.Type != session.EntryAssistant {
			continue
		}
		n, first := 0, len(out)
		for _, it := range e.Items {
			if it.Type != session.ItemFunctionCall {
				continue
			}
			if !answered[it.CallID] {
				answered[it.CallID] = true // a duplicated call id is resolved once
				out = append(out, unresolvedCall{runID: e.RunID, item: it, index: n, truncated: e.StopReason == "max_output_tokens"})
			}
			n++
		}
		if len(out) > first {
			out[len(out)-1].last = true
		}
	}
	return out
}

// resolveLeftovers settles the calls a crashed process left without a
// result, under exactly the live loop's admission rules: a call of a
// message that stopped at the output limit, or beyond the per-response
// call limit, never ran live and gets the live loop's static error (and a
// truncated message its corrective continuation). Any other call is
// executed again only when its tool is ReplaySafe, its arguments are
// valid, its exact classification is Pure or WorkspaceRead, and the
// broker admits it; every other call gets a durable indeterminate paired
// error and never runs.
func (a *Agent) resolveLeftovers(ctx context.Context) error {
	for _, u := range unresolvedCalls(a.sess.Branch()) {
		res, state := a.settleLeftover(ctx, u)
		details := map[string]any{"crash_recovery": state}
		if state == "replayed" {
			for k, v := range res.Details {
				if k != "crash_recovery" {
					details[k] = v
				}
			}
		}
		if state == "indeterminate" {
			a.addIntent(u.item.Name, u.item.CallID, details)
		}
		e := session.Entry{Type: session.EntryToolResult, RunID: u.runID, Result: &session.ToolResult{
			CallID: u.item.CallID, Tool: u.item.Name, Text: res.Text, IsError: res.IsError, Details: details,
		}}
		if _, err := a.sess.AppendEntry(e); err != nil {
			return fmt.Errorf("persist recovered result of call %s: %w", u.item.CallID, err)
		}
		if a.cfg.Intents != nil {
			a.cfg.Intents.DropIntent(a.intentKey(u.item.CallID))
		}
		a.log.Info("agent: resolved unfinished tool call", "tool", u.item.Name, "state", state)
		if u.truncated && u.last {
			if _, err := a.sess.AppendEntry(session.Entry{Type: session.EntrySteering, RunID: u.runID, Text: textCorrective}); err != nil {
				return fmt.Errorf("persist corrective continuation: %w", err)
			}
		}
	}
	return nil
}

// addIntent puts the changes call callID intended (kept before its
// effect) into the details of its indeterminate result: the call may
// have made them or not, and the ledger says so (IntentKey), so a rewind
// expects each path in either state.
func (a *Agent) addIntent(tool, callID string, details map[string]any) {
	if a.cfg.Intents == nil {
		return
	}
	in, err := a.cfg.Intents.Intent(a.intentKey(callID))
	if err != nil {
		a.log.Warn("agent: intended changes of an unfinished call unreadable", "call_id", callID, "err", err)
		return
	}
	recs := in.Records
	if in.Snapshot != "" {
		recs = a.recoverSnapshot(tool, in, details)
	}
	if len(recs) > 0 {
		details[changes.DetailsKey] = recs
		details[changes.IntentKey] = true
		if err := a.cfg.Intents.Commit(a.intentKey(callID), recs); err != nil {
			a.log.Warn("agent: checkpoint of an unfinished call not recorded", "call_id", callID, "err", err)
		}
	}
}

// recoverSnapshot returns what an unfinished call changed since the
// snapshot its intent names (a bash command killed with octet), asking
// its tool to compare that snapshot with the workspace now; what the
// comparison cannot undo goes into details.
func (a *Agent) recoverSnapshot(tool string, in changes.Intent, details map[string]any) []changes.Record {
	t, ok := a.cfg.Host.Lookup(tool)
	rc, isRC := t.(tools.CrashRecoverer)
	if !ok || !isRC {
		return nil
	}
	recs, undo, err := rc.RecoverChanges(in)
	if err != nil {
		a.log.Warn("agent: changes of an unfinished command not recovered", "tool", tool, "err", err)
		return nil
	}
	if len(undo) > 0 {
		details[changes.CannotUndoKey] = undo
	}
	return recs
}

// settleLeftover returns the result of one unresolved call and its
// crash_recovery state: "not_executed" (the live loop would never have
// run it), "replayed" or "indeterminate".
func (a *Agent) settleLeftover(ctx context.Context, u unresolvedCall) (tools.Result, string) {
	switch {
	case u.truncated:
		return tools.Result{Text: textTruncatedCall, IsError: true}, "not_executed"
	case u.index >= a.cfg.MaxToolCallsPerTurn:
		return tools.Result{Text: textTooManyCalls, IsError: true}, "not_executed"
	case u.item.Async:
		// An async call may have run while the next response was
		// generated: never redispatched, even when replay-safe.
		return tools.Result{Text: textIndeterminate, IsError: true}, "indeterminate"
	}
	if res, ok := a.replay(ctx, u); ok {
		return res, "replayed"
	}
	return tools.Result{Text: textIndeterminate, IsError: true}, "indeterminate"
}

// replay re-executes u when crash replay allows it, returning the result
// and whether it ran.
func (a *Agent) replay(ctx context.Context, u unresolvedCall) (tools.Result, bool) {
	t, ok := a.cfg.Host.Lookup(u.item.Name)
	if !ok || t.ReplaySafety() != tools.ReplaySafe {
		return tools.Result{}, false
	}
	args := json.RawMessage(u.item.Arguments)
	canon, err := tools.CanonicalArguments(args)
	if err != nil || a.cfg.Host.ValidateArguments(u.item.Name, canon) != nil {
		return tools.Result{}, false
	}
	if eff, err := safeClassify(t, canon); err != nil || !replayable(eff) {
		return tools.Result{}, false
	}
	runID := u.runID
	if runID == "" {
		runID = "recovery"
	}
	adm, _ := a.cfg.Broker.Admit(ctx, a.cfg.Host, tools.DispatchRequest{
		Principal: a.cfg.Principal, RunID: runID, CallID: u.item.CallID, Tool: u.item.Name, Arguments: args,
	}, tools.DispatchObserver{})
	if adm == nil {
		return tools.Result{}, false
	}
	if !replayable(adm.Effect()) {
		adm.Revoke()
		return tools.Result{}, false
	}
	res, d := adm.Execute(ctx)
	if d.Decision != tools.DecisionAllowed {
		return tools.Result{}, false
	}
	return res, true
}

// replayable reports the exact classifications crash replay permits.
// HostRead is eligible for live parallel waves but never for replay.
func replayable(e tools.Effect) bool { return e == tools.Pure || e == tools.WorkspaceRead }
