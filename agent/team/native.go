package team

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/octet-agent/octet/tools"
)

// The generic collaboration surface an embedder may install (opt-in, with
// NativeTools and Config.Native). The coding product never offers these
// tools; it uses ServiceTools.
const (
	NativeSpawn     = "spawn_agent"
	NativeSend      = "send_message"
	NativeWait      = "wait_agent"
	NativeList      = "list_agents"
	NativeInterrupt = "interrupt_agent"
	NativeFollowup  = "followup_task"
)

// NativeTools returns the generic delegation tools for the root agent of
// o: spawn_agent, followup_task, send_message, wait_agent, list_agents and
// interrupt_agent, with the semantics of the service tools of the same
// purpose. Under the generic team limits (Config.Service nil) and with
// Config.Native set, children get them too, bound to themselves, while
// depth remains (a child at the depth limit gets send_message only), and a
// child whose run completed is idle: followup_task gives it a new task in
// its own context.
func NativeTools(o *Owner, scope []string) []tools.Tool {
	return nativeTools(base{caller: "root", team: o.Team, current: o.Current, earlierMail: o.earlierMail}, standardEnum(scope), true)
}

// standardEnum is the subset of StandardTools in scope, in order.
func standardEnum(scope []string) []string {
	var enum []string
	for _, s := range StandardTools {
		if slices.Contains(scope, s) {
			enum = append(enum, s)
		}
	}
	return enum
}

func nativeTools(b base, enum []string, spawn bool) []tools.Tool {
	if !spawn {
		return []tools.Tool{sendMessageTool{b}}
	}
	return []tools.Tool{
		renamed{spawnTool{b, enum}, NativeSpawn, "Start a child agent on a self-contained task, with a fresh context (put everything it needs in the task), your model, instructions and authority. It runs in parallel with you; wait_agent returns its final answer."},
		followupTool{b},
		sendMessageTool{b},
		renamed{waitTool{b}, NativeWait, "Wait until the named child agents (default: all of yours) have finished, one of them sent you a message, or the timeout passes; returns their status, final answers and your messages. Page long answers with answer_offset."},
		renamed{listTool{b}, NativeList, "List your child agents with their status."},
		renamed{interruptTool{b}, NativeInterrupt, "Stop one of your child agents and anything it started."},
	}
}

// renamed is a delegation tool under another name and description.
type renamed struct {
	tools.Tool
	name, desc string
}

func (r renamed) Name() string        { return r.name }
func (r renamed) Description() string { return r.desc }

// Effects implements tools.EffectStater for the tool it renames (nil,
// stating nothing, when that tool states nothing).
func (r renamed) Effects() []tools.Effect {
	if es, ok := r.Tool.(tools.EffectStater); ok {
		return es.Effects()
	}
	return nil
}

// sendMessageTool sends to a descendant or a peer (steering at its next
// step, or queued for an idle one's next prompt) or, with agent_id
// "parent", to the caller's parent (its next wait).
type sendMessageTool struct{ base }

func (sendMessageTool) Name() string { return NativeSend }
func (sendMessageTool) Description() string {
	return `Send a message to one of your child agents or to a peer (another child of the agent that started you, by its agent_id): a running one gets it at its next step, an idle one with its next task. With agent_id "parent" it goes to the agent that started you (it gets it at its next wait).`
}
func (sendMessageTool) Schema() json.RawMessage { return json.RawMessage(messageSchema) }

func (t sendMessageTool) Execute(_ context.Context, inv tools.Invocation) (tools.Result, error) {
	tm, a, err := acting[messageArgs](t.base, inv.Arguments)
	if err != nil {
		return fail(err)
	}
	if a.ID == "parent" {
		err = tm.Post(t.caller, a.Message)
	} else {
		err = tm.Send(t.caller, a.ID, a.Message)
	}
	if err != nil {
		return fail(err)
	}
	return tools.Result{Text: "Message sent."}, nil
}

// followupTool gives a child a new task, queued while it is busy
// (Team.Followup).
type followupTool struct{ base }

func (followupTool) Name() string { return NativeFollowup }
func (followupTool) Description() string {
	return "Give one of your child agents a new task. It keeps its context: refer to what it did. An idle child (its last task completed) starts it now; a busy one queues it (at most 32) and starts it when its earlier tasks are done. To correct a running task, use send_message."
}
func (followupTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"agent_id":{"type":"string","minLength":1},"task":{"type":"string","minLength":1,"maxLength":131072}},"required":["agent_id","task"],"additionalProperties":false}`)
}

func (t followupTool) Execute(_ context.Context, inv tools.Invocation) (tools.Result, error) {
	tm, a, err := acting[struct {
		ID   string `json:"agent_id"`
		Task string `json:"task"`
	}](t.base, inv.Arguments)
	if err != nil {
		return fail(err)
	}
	s, err := tm.Followup(t.caller, a.ID, a.Task)
	if err != nil {
		return fail(err)
	}
	return jsonResult(viewOf(s), detailsOf(s))
}
