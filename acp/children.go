package acp

import (
	"context"
	"sync"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/tools"
)

// children shows the delegated child agents of one session on that
// session (ACP's fallback for clients without the subagents proposal):
// each child is a tool_call (kind "think", titled with its path and task)
// whose tool_call_update status follows the child, ending with its final
// answer; a child's permission request is a tool_call of its own on the
// parent session, named after the child, followed until the call ends.
// Cancelling the session's prompt cancels its children (their contexts
// derive from the run's).
type children struct {
	as *acpSession

	mu sync.Mutex
	// shown is the last tool call status sent for each child (what the
	// client sees: childStatus), by child session id.
	shown map[string]string
	// asked are the tool call ids shown for the child calls that asked for
	// permission, by child session id and call id.
	asked map[[2]string]string
}

// delegation is the session's host.AgentSpec.Delegation hook: child
// sessions for a client that understands subagents, else tool calls.
func (as *acpSession) delegation(cfg *team.Config) {
	if as.subagents {
		s := &subagents{as: as, kids: map[string]*subagent{}}
		cfg.OnUpdate, cfg.OnEvent, cfg.Approver = s.updated, s.event, s.approver
		return
	}
	c := &children{as: as, shown: map[string]string{}, asked: map[[2]string]string{}}
	cfg.OnUpdate = c.updated
	cfg.OnEvent = c.event
	cfg.Approver = func(child team.Snapshot) tools.Approver { return childApprover{c: c, child: child} }
}

// childCallID is the tool call id of the child itself.
func childCallID(child team.Snapshot) string { return "octet-agent-" + child.SessionID }

// childStatus maps a child's status onto an ACP tool call status.
func childStatus(s team.Status) string {
	switch s {
	case team.StatusPending:
		return "pending"
	case team.StatusRunning:
		return "in_progress"
	case team.StatusCompleted, team.StatusIdle:
		return "completed"
	}
	return "failed" // failed, cancelled
}

// childMeta is the _meta of a child's updates.
func childMeta(child team.Snapshot) map[string]any {
	m := map[string]any{"agentId": child.ID, "agentPath": child.Path, "childSessionId": child.SessionID, "status": string(child.Status)}
	if !child.Status.Active() {
		u := child.Usage
		m["usage"] = map[string]any{"input": u.Input, "cachedInput": u.CachedInput, "output": u.Output, "reasoning": u.Reasoning, "costPicodollars": u.CostPicodollars, "complete": !child.Uncertain}
	}
	return map[string]any{"octet": m}
}

// maxChildError bounds a failed child's error as a client is shown it (a
// provider's error body can be 64 KB).
const maxChildError = 4 << 10

// childError is a failed child's error for the client, bounded, a cut
// marked.
func childError(child team.Snapshot) string {
	e := firstNonEmpty(child.Error, "the child agent failed")
	if len(e) > maxChildError {
		e = clip(e, maxChildError) + "…"
	}
	return e
}

// updated sends the child's tool_call the first time it is seen, then a
// tool_call_update for each status change.
func (c *children) updated(child team.Snapshot) {
	// Sent under the lock: two changes of one child reported from
	// different goroutines still reach the client in the order recorded.
	c.mu.Lock()
	defer c.mu.Unlock()
	// A change the client cannot see is not sent (an idle child is
	// already shown completed, with its answer; its end for good at the
	// run's terminal adds nothing).
	status := childStatus(child.Status)
	prev, seen := c.shown[child.SessionID]
	c.shown[child.SessionID] = status
	if seen && prev == status {
		return
	}
	u := map[string]any{"toolCallId": childCallID(child), "status": status, "_meta": childMeta(child)}
	if !seen {
		u["sessionUpdate"] = "tool_call"
		u["title"] = child.Path + ": " + codeSpan(titleText(child.Task))
		u["kind"] = "think"
		u["rawInput"] = map[string]any{"agentPath": child.Path, "task": clip(child.Task, maxToolOutput), "tools": child.Tools}
	} else {
		u["sessionUpdate"] = "tool_call_update"
	}
	switch child.Status {
	case team.StatusCompleted, team.StatusIdle:
		u["content"] = []map[string]any{textContent(clip(child.Final, maxToolOutput))}
		u["rawOutput"] = map[string]any{"text": clip(child.Final, maxToolOutput)}
	case team.StatusFailed:
		u["content"] = []map[string]any{textContent("Failed: " + childError(child))}
	case team.StatusCancelled:
		u["content"] = []map[string]any{textContent("Cancelled")}
	}
	c.as.srv.update(c.as.ID(), u)
}

// event follows the calls of a child that asked for permission to their
// end.
func (c *children) event(child team.Snapshot, ev agent.Event) {
	var callID string
	switch e := ev.(type) {
	case *agent.ToolPolicyDecision:
		callID = e.CallID
	case *agent.ToolFinished:
		callID = e.CallID
	default:
		return
	}
	key := [2]string{child.SessionID, callID}
	c.mu.Lock()
	id, ok := c.asked[key]
	if d, ok := ev.(*agent.ToolPolicyDecision); !ok || d.Decision != "allowed" {
		delete(c.asked, key) // its last update: finished, or not run
	}
	c.mu.Unlock()
	if !ok {
		return
	}
	u := map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id}
	switch e := ev.(type) {
	case *agent.ToolPolicyDecision:
		if e.Decision == "allowed" {
			u["status"] = "in_progress"
		} else {
			u["status"] = "failed"
			u["content"] = []map[string]any{notRun(c.as.takeDenial(c.as.ID(), e.CallID), e)}
		}
	case *agent.ToolFinished:
		u["status"] = "completed"
		if e.IsError || e.Unrecorded {
			u["status"] = "failed"
		}
	}
	c.as.srv.update(c.as.ID(), u)
}

// childApprover asks the parent session's client for a child's
// confirmations.
type childApprover struct {
	c     *children
	child team.Snapshot
}

func (a childApprover) Confirm(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
	c := a.c
	id := childCallID(a.child) + "/" + req.Intent.CallID
	show := func(call map[string]any) {
		c.mu.Lock()
		c.asked[[2]string{a.child.SessionID, req.Intent.CallID}] = id
		c.mu.Unlock()
		nameChild(call, a.child)
		call["toolCallId"] = id
		u := map[string]any{"sessionUpdate": "tool_call"}
		for k, v := range call {
			u[k] = v
		}
		c.as.srv.update(c.as.ID(), u)
	}
	return c.as.confirm(ctx, req, permissionTarget{sessionID: c.as.ID(), show: show})
}

// nameChild names the child in a permission request's call.
func nameChild(call map[string]any, child team.Snapshot) {
	title, _ := call["title"].(string)
	call["title"] = child.Path + ": " + title
	meta, _ := call["_meta"].(map[string]any)
	if octet, ok := meta["octet"].(map[string]any); ok {
		octet["agentPath"], octet["childSessionId"] = child.Path, child.SessionID
	}
}
