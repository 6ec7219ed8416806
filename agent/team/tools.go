package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/tools"
)

// The tool names of the product's subagents service (the only delegation
// surface the root model of octet lsp and octet exec gets).
const (
	ToolSpawn     = "agents_spawn"
	ToolWait      = "agents_wait"
	ToolList      = "agents_list"
	ToolInterrupt = "agents_interrupt"
	ToolSend      = "agents_send"
	ToolFollowup  = "agents_followup"
)

// Wait bounds of agents_wait.
const (
	DefaultWait = 120 * time.Second
	MaxWait     = 600 * time.Second
	// maxFinalBytes bounds one child's answer in a wait result.
	maxFinalBytes = 8 << 10
	// maxErrorBytes bounds one child's error in a wait or list result
	// (a provider's failure message can be tens of KiB).
	maxErrorBytes = 1 << 10
)

// ServiceTools returns the subagents service's tools for the root agent
// of o. Each classifies as the Delegation effect (Controlled denies it;
// hosts do not register them there), is sequential and is never replayed
// after a crash (an unresolved call becomes indeterminate).
// scope is the root's standard tools (a subset of StandardTools): the
// only names a spawn may narrow a child's tools to.
func ServiceTools(o *Owner, scope []string) []tools.Tool {
	b := base{caller: "root", team: o.Team, current: o.Current, earlierMail: o.earlierMail}
	return []tools.Tool{spawnTool{b, standardEnum(scope)}, waitTool{b}, listTool{b}, sendTool{b}, renamed{followupTool{b}, ToolFollowup, followupDescription}, interruptTool{b}}
}

// followupDescription is agents_followup's description (the product's
// follow-up: an idle child only; a busy one takes messages).
const followupDescription = "Give one of your idle child agents (its last task completed; agents_wait and agents_list show it as idle) a new task. It keeps its context: refer to what it did and found. It starts at once and counts toward the 8 active children again. A child that is still pending or running takes messages (agents_send), not new tasks; a failed or stopped child takes nothing: start a new one. Idle children end when your turn ends."

// base is what every delegation tool shares: the agent it acts for and
// its team (team starts it at the first spawn; current is nil before).
type base struct {
	caller  string
	team    func() (*Team, error)
	current func() *Team
	// earlierMail, for the root's tools, reports mail to the root left by
	// earlier runs' teams (redelivered when a team starts): a wait starts
	// the team for it.
	earlierMail func() bool
}

// boundTo is the base of tools acting for agent id of t.
func boundTo(t *Team, id string) base {
	return base{caller: id, team: func() (*Team, error) { return t, nil }, current: func() *Team { return t }}
}

func (base) Concurrency() tools.Concurrency   { return tools.Sequential }
func (base) ReplaySafety() tools.ReplaySafety { return tools.ReplayUnsafe }
func (base) Classify(json.RawMessage) (tools.Effect, error) {
	return tools.Delegation, nil
}

// Effects implements tools.EffectStater: a session whose policy denies
// delegation is not offered the tool.
func (base) Effects() []tools.Effect { return []tools.Effect{tools.Delegation} }

// decode parses args strictly into v.
func decode(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

// errNoTeam is what a tool acting on the caller's children says before
// any was started in the run.
var errNoTeam = errors.New("no child agent was started in this turn (children of earlier turns have ended: their answers are in those turns' results); start one first")

// acting decodes a tool's arguments into a T and returns them with the
// caller's team of this run (errNoTeam before one started).
func acting[T any](b base, args json.RawMessage) (*Team, T, error) {
	var a T
	if err := decode(args, &a); err != nil {
		return nil, a, err
	}
	tm := b.current()
	if tm == nil {
		return nil, a, errNoTeam
	}
	return tm, a, nil
}

// messageArgs are the arguments of the tools that message a child.
type messageArgs struct {
	ID      string `json:"agent_id"`
	Message string `json:"message"`
}

// messageSchema is the schema of messageArgs.
const messageSchema = `{"type":"object","properties":{"agent_id":{"type":"string","minLength":1},"message":{"type":"string","minLength":1,"maxLength":131072}},"required":["agent_id","message"],"additionalProperties":false}`

// fail is a model-visible error result.
func fail(err error) (tools.Result, error) {
	return tools.Result{Text: err.Error(), IsError: true}, nil
}

// jsonResult renders v as the model-visible text, with details for
// frontends.
func jsonResult(v any, details map[string]any) (tools.Result, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Text: string(b), Details: details}, nil
}

// view is a child as the model sees it.
type view struct {
	ID     string   `json:"agent_id"`
	Path   string   `json:"agent_path"`
	Status Status   `json:"status"`
	Tools  []string `json:"tools,omitempty"`
	Final  string   `json:"final_answer,omitempty"`
	// A long answer is paged: its size, where this page starts and where
	// the next one does (absent on the last page).
	FinalBytes int    `json:"final_answer_bytes,omitempty"`
	Offset     int    `json:"final_answer_offset,omitempty"`
	Next       *int   `json:"final_answer_next_offset,omitempty"`
	Error      string `json:"error,omitempty"`
	// Queued counts follow-ups accepted and not yet delivered.
	Queued int `json:"queued_followups,omitempty"`
}

func viewOf(s Snapshot) view {
	return view{ID: s.ID, Path: s.Path, Status: s.Status, Tools: s.Tools, Error: clipMarked(s.Error, maxErrorBytes), Queued: s.Queued}
}

// clipMarked bounds s to n bytes on a rune boundary, marking a cut.
func clipMarked(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return clipText(s, n) + "…"
}

// withPage sets v's answer to the page of final starting at off (moved
// forward to a rune boundary) of at most n bytes (cut back to one).
func (v *view) withPage(final string, off, n int) {
	if final == "" {
		return
	}
	off = min(max(off, 0), len(final))
	for off < len(final) && !utf8.RuneStart(final[off]) {
		off++
	}
	end := min(off+n, len(final))
	for end < len(final) && end > off && !utf8.RuneStart(final[end]) {
		end--
	}
	v.Final = final[off:end]
	if off == 0 && end == len(final) {
		return
	}
	v.FinalBytes, v.Offset = len(final), off
	if end < len(final) {
		v.Next = &end
	}
}

// maxWaitText bounds the text of a wait result below the host's default
// model-visible limit (50 KiB), so the broker never has to cut it: the
// pages shrink until the whole result fits.
const maxWaitText = 40 << 10

// waitText renders the snapshots with answer pages from off, and the
// leased messages (whole: the answer pages and errors shrink to make
// room).
func waitText(snaps []Snapshot, off int, msgs []Message) (string, error) {
	for per := maxFinalBytes; ; per /= 2 {
		views := make([]view, 0, len(snaps))
		for _, s := range snaps {
			v := viewOf(s)
			v.withPage(s.Final, off, per)
			v.Error = clipMarked(v.Error, per)
			views = append(views, v)
		}
		res := map[string]any{"agents": views}
		if len(msgs) > 0 {
			res["messages"] = msgs
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			return "", err
		}
		if b.Len() <= maxWaitText || per <= 64 {
			return strings.TrimSuffix(b.String(), "\n"), nil
		}
	}
}

func detailsOf(snaps ...Snapshot) map[string]any {
	agents := make([]map[string]any, 0, len(snaps))
	for _, s := range snaps {
		agents = append(agents, map[string]any{
			"agentId": s.ID, "agentPath": s.Path, "sessionId": s.SessionID, "status": string(s.Status),
			"effective_tool_policy": s.Policy, "orchestration_provenance": s.Provenance,
		})
	}
	return map[string]any{"agents": agents}
}

type spawnTool struct {
	base
	scope []string
}

func (spawnTool) Name() string { return ToolSpawn }
func (spawnTool) Description() string {
	return "Start a child agent on a self-contained task. The child has its own fresh context (it does not see this conversation: put everything it needs in the task), your model, instructions and authority, and your file and shell tools unless `tools` narrows them. It runs in parallel with you; call agents_wait to get its final answer. At most 8 children are active at once."
}
func (t spawnTool) Schema() json.RawMessage {
	enum, _ := json.Marshal(t.scope)
	if len(t.scope) == 0 {
		enum = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","minLength":1,"maxLength":131072,"description":"The complete task for the child: goal, relevant files, constraints, and what to report back."},"tools":{"type":"array","items":{"type":"string","enum":` + string(enum) + `},"uniqueItems":true,"description":"Narrow the child's tools to these, at least one (omit it for all of them)."}},"required":["task"],"additionalProperties":false}`)
}

func (t spawnTool) Execute(_ context.Context, inv tools.Invocation) (tools.Result, error) {
	var a struct {
		Task  string   `json:"task"`
		Tools []string `json:"tools"`
	}
	if err := decode(inv.Arguments, &a); err != nil {
		return fail(err)
	}
	tm, err := t.team()
	if err != nil {
		return fail(err)
	}
	s, err := tm.Spawn(SpawnRequest{Parent: t.caller, Task: a.Task, Tools: a.Tools})
	if err != nil {
		return fail(err)
	}
	return jsonResult(viewOf(s), detailsOf(s))
}

type waitTool struct{ base }

func (waitTool) Name() string { return ToolWait }
func (waitTool) Description() string {
	return "Wait until the named child agents (default: all of yours) have finished, one of them sent you a message, or the timeout passes, and return each one's status and final answer, and the messages you got. A child that is still running when the timeout passes is reported as running; call again to keep waiting. A long answer comes in pages: call again with answer_offset set to final_answer_next_offset for the rest."
}
func (waitTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"agent_ids":{"type":"array","items":{"type":"string"},"maxItems":32,"description":"The children to wait for (default: all of yours)."},"timeout_seconds":{"type":"integer","minimum":1,"maximum":600,"description":"How long to wait at most (default 120)."},"answer_offset":{"type":"integer","minimum":0,"description":"Read long final answers from this byte offset: the final_answer_next_offset of an earlier result."}},"additionalProperties":false}`)
}

func (t waitTool) Execute(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	var a struct {
		IDs     []string `json:"agent_ids"`
		Timeout int      `json:"timeout_seconds"`
		Offset  int      `json:"answer_offset"`
	}
	if err := decode(inv.Arguments, &a); err != nil {
		return fail(err)
	}
	timeout := DefaultWait
	if a.Timeout > 0 {
		timeout = min(time.Duration(a.Timeout)*time.Second, MaxWait)
	}
	tm := t.current()
	if tm == nil && t.earlierMail != nil && t.earlierMail() {
		var err error
		if tm, err = t.team(); err != nil {
			return fail(err)
		}
	}
	if tm == nil {
		return fail(errNoTeam)
	}
	snaps, err := tm.Wait(ctx, t.caller, a.IDs, timeout)
	if err != nil {
		return fail(err)
	}
	page, resolve := tm.Lease(t.caller, MaxPageBytes)
	text, err := waitText(snaps, a.Offset, page)
	if err != nil {
		resolve(false)
		return tools.Result{}, err
	}
	// The page is consumed only once this result is durable whole (the
	// run loop calls Commit); a call that ends otherwise restores it.
	context.AfterFunc(ctx, func() { resolve(false) })
	return tools.Result{Text: text, Details: tm.leasedDetails(detailsOf(snaps...), page), Commit: resolve}, nil
}

type listTool struct{ base }

func (listTool) Name() string { return ToolList }
func (listTool) Description() string {
	return "List your child agents of this run with their status."
}
func (listTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
}

func (t listTool) Execute(context.Context, tools.Invocation) (tools.Result, error) {
	tm := t.current()
	var snaps []Snapshot
	if tm != nil {
		snaps = tm.List(t.caller)
	}
	views := make([]view, 0, len(snaps))
	for _, s := range snaps {
		views = append(views, viewOf(s))
	}
	return jsonResult(map[string]any{"agents": views}, detailsOf(snaps...))
}

type interruptTool struct{ base }

func (interruptTool) Name() string { return ToolInterrupt }
func (interruptTool) Description() string {
	return "Stop one of your child agents (and anything it started). Its work so far stays in its session."
}
func (interruptTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"agent_id":{"type":"string","minLength":1}},"required":["agent_id"],"additionalProperties":false}`)
}

func (t interruptTool) Execute(_ context.Context, inv tools.Invocation) (tools.Result, error) {
	tm, a, err := acting[struct {
		ID string `json:"agent_id"`
	}](t.base, inv.Arguments)
	if err != nil {
		return fail(err)
	}
	s, err := tm.Interrupt(t.caller, a.ID)
	if err != nil {
		return fail(err)
	}
	return jsonResult(viewOf(s), detailsOf(s))
}

type sendTool struct{ base }

func (sendTool) Name() string { return ToolSend }
func (sendTool) Description() string {
	return "Send a message to one of your running child agents (a correction, an answer to its question, more context). It reaches the child at its next step, after its current tool calls. An idle child (its task completed) takes a new task with agents_followup instead; a failed or stopped one takes nothing: start a new one."
}
func (sendTool) Schema() json.RawMessage { return json.RawMessage(messageSchema) }

func (t sendTool) Execute(_ context.Context, inv tools.Invocation) (tools.Result, error) {
	tm, a, err := acting[messageArgs](t.base, inv.Arguments)
	if err != nil {
		return fail(err)
	}
	if err := tm.Send(t.caller, a.ID, a.Message); err != nil {
		if s, ok := tm.child(t.caller, a.ID); ok && s.Status == StatusIdle && tm.idles() {
			err = fmt.Errorf("%w; %s is idle: give it a new task with %s", err, s.Path, ToolFollowup)
		}
		return fail(err)
	}
	return tools.Result{Text: fmt.Sprintf("Message queued for %s; it arrives at its next step.", a.ID)}, nil
}

// ToolMessageParent is the tool a child gets to message its parent.
const ToolMessageParent = "message_parent"

// messageParentTool sends a child's message to its parent's mailbox.
type messageParentTool struct {
	team *Team
	id   string
}

func (messageParentTool) Name() string { return ToolMessageParent }
func (messageParentTool) Description() string {
	return "Send a message to the agent that gave you your task: a question you cannot answer yourself, a progress note, an intermediate result. It gets it the next time it waits for you. Keep working unless you need its answer; its reply reaches you as a message at your next step."
}
func (messageParentTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","minLength":1,"maxLength":131072}},"required":["message"],"additionalProperties":false}`)
}
func (messageParentTool) Concurrency() tools.Concurrency   { return tools.Sequential }
func (messageParentTool) ReplaySafety() tools.ReplaySafety { return tools.ReplayUnsafe }
func (messageParentTool) Classify(json.RawMessage) (tools.Effect, error) {
	return tools.Delegation, nil
}

// Effects implements tools.EffectStater.
func (messageParentTool) Effects() []tools.Effect { return []tools.Effect{tools.Delegation} }

func (t messageParentTool) Execute(_ context.Context, inv tools.Invocation) (tools.Result, error) {
	var a struct {
		Message string `json:"message"`
	}
	if err := decode(inv.Arguments, &a); err != nil {
		return fail(err)
	}
	if err := t.team.Post(t.id, a.Message); err != nil {
		return fail(err)
	}
	return tools.Result{Text: "Message sent."}, nil
}
