package acp

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/internal/eventgate"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// maxToolOutput bounds the tool output one tool_call_update shows.
const maxToolOutput = 64 << 10

// runStream turns one run's events into session/update notifications.
type runStream struct {
	srv *Server
	// sid is the ACP session the updates go to; cwd its workspace.
	sid, cwd string
	// entries reads the run's session.
	entries entryReader
	runID   string
	// attempt numbers the provider attempts: each attempt's chunks carry
	// their own messageId, so a client can drop the chunks of an attempt
	// that _octet/providerRetry says was replaced.
	attempt int
	// args are the committed arguments of each call, by call id.
	args map[string]string
	// output is each running call's shown output so far.
	output map[string][]byte
	// gate is told of each tool_call sent.
	gate *eventgate.Gate
	// totals, when set, are the session's usage totals (the cost a
	// usage_update reports); a child's stream has none.
	totals func() session.Totals
	// compactions numbers the run's compactions (compaction_update ids).
	compactions int
	// texts, when set, reads the whole texts of a recorded change (a
	// child's stream has none: its changes are shown as unified diffs).
	texts fileTexts
	// denial, when set, returns why octet itself denied a call of session
	// sessionID ("": the broker's reason stands).
	denial func(sessionID, callID string) string
}

// fileTexts returns the whole text a recorded change replaced and the
// one it left (host.Session.FileTexts).
type fileTexts func(rec changes.Record, maxBytes int64) (old, updated *string, ok bool)

// entryReader reads the entries of a run's session.
type entryReader interface {
	Entry(id string) (session.Entry, bool)
	Branch() []session.Entry
}

func newRunStream(srv *Server, sid, cwd string, entries entryReader, runID string) *runStream {
	return &runStream{srv: srv, sid: sid, cwd: cwd, entries: entries, runID: runID, attempt: 1, args: map[string]string{}, output: map[string][]byte{}}
}

func (st *runStream) update(u map[string]any) { st.srv.update(st.sid, u) }

// ext sends an _octet/ extension notification, to a client that asked
// for them only (clientCapabilities._meta.octet.notifications): others
// warn about notifications they do not know.
func (st *runStream) ext(method string, params map[string]any) {
	if !st.srv.caps().extensions() {
		return
	}
	params["sessionId"] = st.sid
	params["runId"] = st.runID
	if err := st.srv.c.notify(method, params); err != nil {
		st.srv.log.Debug("notification not sent", "method", method, "error", err)
	}
}

func (st *runStream) messageID() string { return fmt.Sprintf("%s-%d", st.runID, st.attempt) }

// event maps one run event.
func (st *runStream) event(ev agent.Event) {
	switch e := ev.(type) {
	case *agent.OutputDelta:
		kind := "agent_message_chunk"
		if e.Channel == agent.ChannelReasoning {
			kind = "agent_thought_chunk"
		}
		st.update(map[string]any{"sessionUpdate": kind, "messageId": st.messageID(), "content": map[string]any{"type": "text", "text": e.Text}})
	case *agent.ProviderRetry:
		st.ext("_octet/providerRetry", map[string]any{
			"discardedMessageId": st.messageID(), "attempt": e.Attempt, "retryKind": e.RetryKind, "reason": e.Reason, "cause": e.Cause, "delayMs": e.DelayMs,
			"giveUpInMs": e.GiveUpInMs,
		})
		st.attempt++
	case *agent.RecoveredOutput:
		// Historical progress of a replaced attempt: never an answer chunk.
		st.ext("_octet/recoveredOutput", map[string]any{"channel": e.Channel, "text": e.Text})
	case *agent.Usage:
		st.usage(e)
	case *agent.CompactionStarted:
		st.compaction(map[string]any{"status": "in_progress", "_meta": map[string]any{"octet": map[string]any{"tokensBefore": e.TokensBefore}}})
	case *agent.CompactionFinished:
		st.compactionFinished(e)
	case *agent.AssistantCommitted:
		st.committed(e.EntryID)
		st.attempt++
	case *agent.ToolStarted:
		st.toolStarted(e)
	case *agent.ToolPolicyDecision:
		st.decision(e)
	case *agent.ToolOutput:
		st.toolOutput(e)
	case *agent.ToolFinished:
		st.toolFinished(e)
	case *agent.PlanUpdate:
		st.update(map[string]any{"sessionUpdate": "plan", "entries": planEntries(e.Plan)})
	case *agent.RunFinished:
		if e.Error != "" {
			st.ext("_octet/runFinished", map[string]any{"outcome": string(e.Outcome), "error": e.Error})
		}
	}
}

// planEntries are a plan's steps as ACP plan entries: the whole plan,
// which replaces the client's; octet's plans have no priorities, so each
// step is "medium".
func planEntries(steps []tools.PlanStep) []map[string]any {
	out := make([]map[string]any, 0, len(steps))
	for _, s := range steps {
		out = append(out, map[string]any{"content": s.Step, "priority": "medium", "status": s.Status})
	}
	return out
}

// committed records the arguments of the committed message's calls.
func (st *runStream) committed(entryID string) {
	e, ok := st.entries.Entry(entryID)
	if !ok {
		return
	}
	for _, it := range e.Items {
		if it.Type == session.ItemFunctionCall {
			st.args[it.CallID] = it.Arguments
		}
	}
}

func (st *runStream) toolStarted(e *agent.ToolStarted) {
	v := describeCall(st.cwd, e.Tool, []byte(st.args[e.CallID]))
	u := map[string]any{
		"sessionUpdate": "tool_call", "toolCallId": e.CallID, "title": v.title, "kind": v.kind,
		"status": "pending", "rawInput": rawArgs([]byte(st.args[e.CallID])),
	}
	if len(v.locations) > 0 {
		u["locations"] = v.locations
	}
	st.update(u)
	if st.gate != nil {
		st.gate.Sent(e.CallID)
	}
}

func (st *runStream) decision(e *agent.ToolPolicyDecision) {
	meta := map[string]any{"octet": map[string]any{"decision": e.Decision, "reason": e.Reason, "effect": e.Effect.String(), "ruleId": e.RuleID}}
	if e.Decision == "allowed" {
		st.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": e.CallID, "status": "in_progress", "_meta": meta})
		return
	}
	why := ""
	if st.denial != nil {
		why = st.denial(st.sid, e.CallID)
	}
	st.update(map[string]any{
		"sessionUpdate": "tool_call_update", "toolCallId": e.CallID, "status": "failed", "_meta": meta,
		"content": []map[string]any{notRun(why, e)},
	})
}

func (st *runStream) toolOutput(e *agent.ToolOutput) {
	out := st.output[e.CallID]
	if len(out) >= maxToolOutput {
		return
	}
	out = append(out, e.Text[:min(len(e.Text), maxToolOutput-len(out))]...)
	st.output[e.CallID] = out
	st.update(map[string]any{
		"sessionUpdate": "tool_call_update", "toolCallId": e.CallID,
		"content": []map[string]any{literalContent("text", string(out))},
	})
}

func (st *runStream) toolFinished(e *agent.ToolFinished) {
	status := "completed"
	if e.IsError || e.Unrecorded {
		status = "failed"
	}
	u := map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": e.CallID, "status": status}
	if len(e.Changes) > 0 {
		diffs := make([]map[string]any, 0, len(e.Changes))
		for _, c := range e.Changes {
			diffs = append(diffs, map[string]any{"path": c.Path, "kind": c.Kind, "diff": c.Diff})
		}
		u["_meta"] = map[string]any{"octet": map[string]any{"changes": diffs}}
	}
	// The files the call changed, as octet recorded them.
	var content []map[string]any
	res, ok := st.result(e.CallID)
	if ok {
		content = recordedContent(st.srv.log, st.cwd, res, st.texts)
		content = append(content, literalContent("text", res.Text))
		u["rawOutput"] = map[string]any{"text": res.Text, "isError": res.IsError}
	} else {
		content = changeContent(e.Changes)
	}
	if len(content) > 0 {
		u["content"] = content
	}
	delete(st.output, e.CallID)
	st.update(u)
}

// result returns the recorded result of the call, searching the run's
// tail of the branch.
func (st *runStream) result(callID string) (*session.ToolResult, bool) {
	branch := st.entries.Branch()
	for i := len(branch) - 1; i >= 0 && branch[i].RunID == st.runID; i-- {
		if r := branch[i].Result; r != nil && r.CallID == callID {
			return r, true
		}
	}
	return nil, false
}

// changeContent shows the changes a call made: each file's recorded
// unified diff (or the line saying why it is not shown), made visible, as
// a literal code block.
func changeContent(cs []changes.Change) []map[string]any {
	var content []map[string]any
	for _, c := range cs {
		content = append(content, unifiedContent(c))
	}
	return content
}

func unifiedContent(c changes.Change) map[string]any {
	info := "diff"
	if c.DiffOmitted {
		info = "text"
	}
	return literalContent(info, tools.ApprovalText(c.Diff))
}

// maxDiffText bounds a file shown whole in a diff content block.
const maxDiffText = 1 << 20

// recordedContent shows the changes recorded with a call's result: a
// whole-file diff (the path, the text before and after, so a client
// renders real hunks) where the change store kept both texts, else the
// recorded unified diff. The texts are made visible as every text octet
// shows about a call is (display.go).
func recordedContent(log *slog.Logger, cwd string, r *session.ToolResult, texts fileTexts) []map[string]any {
	recs, err := changes.FromDetails(r.Details)
	if err != nil {
		log.Warn("recorded changes not shown", "call", r.CallID, "error", err)
	}
	var content []map[string]any
	for _, rec := range recs {
		if texts != nil {
			if old, updated, ok := texts(rec, maxDiffText); ok {
				d := map[string]any{"type": "diff", "path": location(cwd, filepath.FromSlash(rec.Path)), "newText": ""}
				if old != nil {
					d["oldText"] = tools.ApprovalText(*old)
				}
				if updated != nil {
					d["newText"] = tools.ApprovalText(*updated)
				}
				content = append(content, d)
				continue
			}
		}
		content = append(content, unifiedContent(rec.Change))
	}
	return content
}

// usage sends usage_update after a response: the context the
// conversation fills of the model's window and, when every request of
// the session was priced, its cost so far; _octet/usage carries the
// response's own tokens.
func (st *runStream) usage(e *agent.Usage) {
	u := map[string]any{"sessionUpdate": "usage_update", "used": max(e.ContextTokens, 0), "size": max(e.ContextWindow, 0)}
	if st.totals != nil {
		t := st.totals()
		if t.Unpriced == 0 {
			u["cost"] = map[string]any{"amount": float64(t.Known.CostPicodollars) / 1e12, "currency": "USD"}
		}
		u["_meta"] = map[string]any{"octet": map[string]any{"complete": !t.Uncertain}}
	}
	st.update(u)
	st.ext("_octet/usage", map[string]any{"usage": e})
}

// compaction sends a compaction_update of the run's current compaction,
// to a client that advertised session.compaction.
func (st *runStream) compaction(u map[string]any) {
	if !st.srv.caps().compaction() {
		return
	}
	if u["status"] == "in_progress" {
		st.compactions++
	}
	u["sessionUpdate"] = "compaction_update"
	u["compactionId"] = fmt.Sprintf("%s-c%d", st.runID, st.compactions)
	st.update(u)
}

// compactionFinished ends the current compaction: completed with its
// summary, failed, or cancelled.
func (st *runStream) compactionFinished(e *agent.CompactionFinished) {
	switch {
	case e.EntryID != "":
		u := map[string]any{"status": "completed"}
		if en, ok := st.entries.Entry(e.EntryID); ok && en.Compaction != nil {
			u["summary"] = []map[string]any{{"type": "text", "text": en.Compaction.Summary}}
		}
		st.compaction(u)
	case e.Error == "cancelled":
		st.compaction(map[string]any{"status": "cancelled"})
	default:
		st.compaction(map[string]any{"status": "failed", "error": e.Error})
	}
}

// notRun is the content of a denied call: why octet denied it, or the
// broker's reason.
func notRun(why string, e *agent.ToolPolicyDecision) map[string]any {
	return textContent("Not run: " + firstNonEmpty(why, firstNonEmpty(e.Reason, e.Decision)))
}
