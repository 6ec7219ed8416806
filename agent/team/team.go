package team

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Status is an agent's state as the protocol's agent_updated names it.
type Status string

// Agent statuses.
const (
	StatusPending Status = "pending"
	StatusRunning Status = "running"
	// StatusIdle is a child whose run completed (of a service, or of a
	// generic team with Config.Native): it keeps its context and takes a
	// follow-up task.
	StatusIdle      Status = "idle"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Active reports whether s still holds a concurrency slot.
func (s Status) Active() bool { return s == StatusPending || s == StatusRunning }

// SettleTimeout is how long a shutdown waits for descendants to settle.
const SettleTimeout = 2 * time.Second

// Errors callers branch on.
var (
	// ErrShutdown refuses work after the team shut down.
	ErrShutdown = errors.New("delegation: the team has shut down")
	// ErrUnknownAgent names no child of the caller.
	ErrUnknownAgent = errors.New("delegation: no such child agent")
)

// PersistenceError is the diagnostic of a team whose provenance could not
// be written: it rejects new work and has cancelled every worker.
type PersistenceError struct{ Err error }

func (e *PersistenceError) Error() string {
	return "delegation stopped: its provenance could not be written (" + e.Err.Error() + "); every child agent was cancelled and no new one is started"
}

func (e *PersistenceError) Unwrap() error { return e.Err }

// Config configures a team. Root and Dir are required.
type Config struct {
	// Root is the owning agent; its session is the owner.
	Root *agent.Agent
	// RunID is the owning run (recorded in team_started).
	RunID string
	// Dir holds team directories (created 0700 when missing).
	Dir string
	// Limits bound the team (zero value: DefaultLimits); they must pass
	// Limits.Validate.
	Limits Limits
	// Service, when set, adds a service's stricter bounds; its children
	// sit exactly one level below the root.
	Service *Service
	// Native gives children of a generic team (Service nil) the native
	// tools (NativeTools) bound to themselves.
	Native bool
	// NewAgent builds a child's agent from its inherited configuration
	// (Session, Broker, Host and Principal filled in); the host replaces
	// what is per agent (its transport). release, if non-nil, is called
	// when the child is done. Nil: agent.New.
	NewAgent func(cfg agent.Config) (a *agent.Agent, release func(), err error)
	// Approver, when set, returns the approver of a child's broker (so a
	// prompt names the child); nil keeps the parent's.
	Approver func(child Snapshot) tools.Approver
	// OnUpdate observes every status change after it is durable.
	OnUpdate func(Snapshot)
	// OnEvent observes each child run event, in order; it paces the child.
	OnEvent func(child Snapshot, ev agent.Event)
	// Logger receives diagnostics (nil: discarded).
	Logger *slog.Logger
}

// Snapshot is an agent's state as list and wait report it.
type Snapshot struct {
	ID, Path, ParentID string
	// SessionID is the child's session; SessionPath its file (for a host
	// that shows it, never for the model).
	SessionID, SessionPath string
	Depth                  int
	Status                 Status
	Task                   string
	// Final is the child's last answer (set once it ended).
	Final string
	// Error explains a failure (or a follow-up that could not be delivered).
	Error string
	// Queued counts accepted follow-ups not yet delivered, oldest first;
	// Messages the direct messages queued for its next step or prompt.
	Queued, Messages int
	// Tools is the child's tool scope.
	Tools []string
	// Usage is the child's known usage; Uncertain marks it a subtotal.
	Usage     session.Usage
	Uncertain bool
	// Policy and Provenance describe its authority.
	Policy     tools.EffectiveToolPolicy
	Provenance Orchestration

	team *Team
}

// Interrupt interrupts the child on behalf of its parent (an editor's
// cancel of the child's run): only this child and its descendants stop.
func (s Snapshot) Interrupt() error {
	if s.team == nil || s.ParentID == "" {
		return ErrUnknownAgent
	}
	_, err := s.team.Interrupt(s.ParentID, s.ID)
	return err
}

// node is one agent of the team (the root is node "root").
type node struct {
	id, path string
	parent   *node
	depth    int
	task     string
	scope    []string
	narrowed bool
	agent    *agent.Agent
	broker   *tools.Broker
	host     *tools.Host
	sess     *session.Session
	release  func()
	ctx      context.Context
	cancel   context.CancelFunc
	status   Status
	final    string
	errText  string
	done     chan struct{} // closed once the child's run ended and its status is durable
	children []*node
	reserved int // children being spawned
	usage    session.Totals
	settled  bool
	run      *agent.Run // the child's run once started
	box      *mailbox   // messages to this agent
	// cmds wakes the child's owner goroutine (worker); see command.
	cmds chan command
	// inbox holds the direct messages accepted for the child and not yet
	// handed to it, oldest first (the first inPrompt of them are being
	// moved into its next prompt); steered the sizes of those handed to
	// its run as steering, in order, until its session holds them.
	inbox      []queuedMsg
	inboxBytes int
	inPrompt   int
	steered    []int
	// interrupted asks a generic team's child to stop its current or
	// reserved run and stay idle (Team.Interrupt).
	interrupted bool
	// announce tells the worker that the follow-up reserving the idle
	// child still has its delivery to record (a redelivery).
	announce bool
	// runCtx is the current run's context: the node's children derive
	// from it, so the end of each run stops them.
	runCtx    context.Context
	runCancel context.CancelFunc
	// runUnused: runCtx was made for the first run, which has not taken
	// it yet (see nextRunCtxLocked).
	runUnused bool
	finishing bool // an idle child is being ended for good
	// backlog holds the accepted follow-ups not yet acknowledged (durable
	// in the child's session), oldest first; backlogBytes their tasks'
	// bytes. followup marks a run whose task is backlog[0].
	backlog      []queuedTask
	backlogBytes int
	followup     bool
}

// Team is one owning run's delegation state.
type Team struct {
	cfg    Config
	lim    Limits
	id     string
	dir    *teamDir
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{} // child concurrency slots (Concurrent-1)
	waits  chan struct{} // concurrent wait slots (Total)
	log    *slog.Logger

	mu     sync.Mutex
	root   *node
	nodes  map[string]*node
	order  []*node
	total  int // agents started or being started, the root included
	seq    int
	failed error
	closed bool
	// msgIDs numbers the team's messages (every mailbox); backpressure
	// counts commands that found a worker's channel full.
	msgIDs       atomic.Int64
	backpressure atomic.Int64
	// mirrored: Shutdown built the children's mirror records; the cost
	// ledger no longer counts them live.
	mirrored bool
	// wg counts reserved spawns and running children; Shutdown waits on it.
	wg sync.WaitGroup
	// holdWork, set by tests before the first spawn, is called as each
	// child's owner goroutine starts (to order it after other work).
	holdWork func(agentID string)
}

// Start activates a team: its private directory and journal, with
// team_started durable.
func Start(cfg Config) (*Team, error) {
	if cfg.Root == nil || cfg.Dir == "" {
		return nil, errors.New("delegation: Config.Root and Config.Dir are required")
	}
	lim := cfg.Limits
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	owner := cfg.Root.Session().Header().ID
	id := "team_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	d, err := activate(cfg.Dir, Record{Kind: KindTeamStarted, Time: now(), Team: id, Owner: owner, RunID: cfg.RunID})
	if err != nil {
		return nil, fmt.Errorf("delegation: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Team{
		cfg: cfg, lim: lim, id: id, dir: d, ctx: ctx, cancel: cancel,
		sem: make(chan struct{}, lim.Concurrent-1), waits: make(chan struct{}, lim.Total),
		log: cfg.Logger, nodes: map[string]*node{}, total: 1,
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.root = &node{id: "root", path: "root", agent: cfg.Root, broker: cfg.Root.Broker(), sess: cfg.Root.Session(), ctx: ctx, cancel: cancel, runCtx: ctx, runCancel: cancel, status: StatusRunning, done: make(chan struct{})}
	t.root.box = newMailbox()
	t.nodes["root"] = t.root
	t.redeliver()
	return t, nil
}

func now() time.Time { return time.Now().UTC() }

// Dir returns the team directory's path.
func (t *Team) Dir() string { return t.dir.path }

// Err returns the persistence diagnostic of a failed team, or nil.
func (t *Team) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// record appends rec durably; a failure stops the team.
func (t *Team) record(rec Record) error {
	rec.Time = now()
	if err := t.dir.j.append(rec); err != nil {
		return t.fail(err)
	}
	return nil
}

// recordLocked is record for a caller holding t.mu.
func (t *Team) recordLocked(rec Record) error {
	rec.Time = now()
	if err := t.dir.j.append(rec); err != nil {
		t.failLocked(err)
		t.cancel()
		return t.failed
	}
	return nil
}

// fail records the persistence diagnostic, rejects new work and cancels
// every worker. It returns the diagnostic.
func (t *Team) fail(err error) error {
	t.mu.Lock()
	t.failLocked(err)
	perr := t.failed
	t.mu.Unlock()
	t.cancel()
	return perr
}

// failLocked records the first persistence failure (t.mu held).
func (t *Team) failLocked(err error) {
	if t.failed == nil {
		t.failed = &PersistenceError{Err: err}
		t.log.Error("delegation: provenance failed; cancelling every child", "team", t.id, "err", err)
	}
}

// SpawnRequest is one child to start.
type SpawnRequest struct {
	// Parent is the spawning agent's id ("root" for the root).
	Parent string
	// Task is the child's first prompt (at most MaxTextBytes).
	Task string
	// Tools narrows the child's tool scope to these standard tools (nil:
	// the parent's standard tools; an empty, non-nil list is refused).
	Tools []string
}

// Spawn starts a child of req.Parent. Every bound is checked before
// anything is written; the spawn record is durable before the child is
// visible or started.
func (t *Team) Spawn(req SpawnRequest) (Snapshot, error) {
	if strings.TrimSpace(req.Task) == "" {
		return Snapshot{}, errors.New("delegation: the task is empty")
	}
	if len(req.Task) > MaxTextBytes || !utf8.ValidString(req.Task) {
		return Snapshot{}, &LimitError{Limit: "text", Max: MaxTextBytes}
	}
	if err := t.ceilingRefusal(req.Parent); err != nil {
		return Snapshot{}, err
	}
	parent, err := t.reserve(req.Parent)
	if err != nil {
		return Snapshot{}, err
	}
	n, err := t.build(parent, req)
	if err != nil {
		t.unreserve(parent)
		return Snapshot{}, err
	}
	snap := t.snapshotOf(n)
	rec := Record{Kind: KindAgentSpawned, Agent: n.id, Path: n.path, Parent: parent.id, Session: n.sess.Header().ID, Depth: n.depth, Task: n.task, Tools: n.scope, Policy: &snap.Policy, Provenance: &snap.Provenance}
	if err := t.record(rec); err != nil {
		t.discard(n)
		t.unreserve(parent)
		return Snapshot{}, err
	}
	t.publish(parent, n)
	go t.work(n)
	return snap, nil
}

// ceilingRefusal refuses new delegated work (a spawn, a follow-up) once
// the caller's next request would be refused by a hard ceiling: the cost
// ceiling counts the root, its children and theirs together, so a child
// started then could make no request either.
func (t *Team) ceilingRefusal(callerID string) error {
	t.mu.Lock()
	n, ok := t.nodes[callerID]
	t.mu.Unlock()
	if !ok || n.agent == nil {
		return nil // the caller's own check names it (ErrUnknownAgent)
	}
	if err := n.agent.CeilingRefusal(); err != nil {
		return fmt.Errorf("delegation: no child agent is started: %w", err)
	}
	return nil
}

// reserve checks every bound for one more child of parentID and holds its
// slot (concurrency semaphore, total, per-parent count).
func (t *Team) reserve(parentID string) (*node, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed != nil {
		return nil, t.failed
	}
	if t.closed {
		return nil, ErrShutdown
	}
	parent, ok := t.nodes[parentID]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownAgent, parentID)
	}
	if !parent.status.Active() {
		return nil, fmt.Errorf("delegation: agent %s has ended and cannot spawn", parent.path)
	}
	maxDepth := t.lim.Depth
	if t.cfg.Service != nil {
		maxDepth = 1
	}
	if parent.depth+1 > maxDepth {
		return nil, &LimitError{Limit: "depth", Max: maxDepth}
	}
	if t.total >= t.lim.Total {
		return nil, &LimitError{Limit: "total", Max: t.lim.Total}
	}
	if err := t.activeSlotLocked(parent, nil); err != nil {
		return nil, err
	}
	if s := t.cfg.Service; s != nil {
		if len(t.order)+t.reservedLocked() >= s.RetainedPerOwner {
			return nil, &LimitError{Limit: "retained_per_owner", Max: s.RetainedPerOwner}
		}
	}
	select {
	case t.sem <- struct{}{}:
	default:
		return nil, &LimitError{Limit: "concurrent", Max: t.lim.Concurrent}
	}
	t.total++
	parent.reserved++
	t.wg.Add(1) // under t.mu before closed is set: Shutdown's Wait covers it
	return parent, nil
}

// activeSlotLocked checks the service's bound on parent's active children
// for one more (a spawn, or an idle child except taking a follow-up);
// t.mu held. Pending and running children count, and so does an idle
// child holding queued work (it is about to run again).
func (t *Team) activeSlotLocked(parent, except *node) error {
	s := t.cfg.Service
	if s == nil {
		return nil
	}
	active := parent.reserved
	for _, c := range parent.children {
		if c != except && (c.status.Active() || c.status == StatusIdle && len(c.backlog) > 0 && !c.finishing) {
			active++
		}
	}
	if active >= s.ActivePerParent {
		return &LimitError{Limit: "active_per_parent", Max: s.ActivePerParent}
	}
	return nil
}

// idles reports whether a child whose run completed stays idle, keeping
// its context for a follow-up: children of a service (the product's
// agents_followup) and of a generic team with the native tools.
func (t *Team) idles() bool { return t.cfg.Service != nil || t.followups() }

func (t *Team) reservedLocked() int {
	n := 0
	for _, x := range t.nodes {
		n += x.reserved
	}
	return n
}

// unreserve gives back a reservation whose spawn failed.
func (t *Team) unreserve(parent *node) {
	t.mu.Lock()
	t.total--
	parent.reserved--
	t.mu.Unlock()
	<-t.sem
	t.wg.Done()
}

// build makes the child's session, broker, tools and agent. Nothing of it
// is visible yet.
func (t *Team) build(parent *node, req SpawnRequest) (*node, error) {
	scope, narrowed, err := childScope(parent.agent, req.Tools)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.seq++
	seq := t.seq
	t.mu.Unlock()
	name := "worker" + strconv.Itoa(seq)
	n := &node{id: name, path: parent.path + "/" + name, parent: parent, depth: parent.depth + 1, task: req.Task, scope: scope, narrowed: narrowed, status: StatusPending, done: make(chan struct{}), box: newMailbox(), cmds: make(chan command, MaxCommands)}
	inherited, err := parent.agent.Inherit()
	if err != nil {
		return nil, fmt.Errorf("delegation: %w", err)
	}
	n.sess, err = session.CreateIn(t.dir.root, t.dir.path, session.Header{Cwd: parent.sess.Header().Cwd, Title: title(n.path, req.Task)})
	if err != nil {
		return nil, fmt.Errorf("delegation: create the child session: %w", err)
	}
	// The team's id makes the principal unique: a later run's worker1 is
	// another agent, which has read nothing (tools.FileTracker).
	principal := t.root.sess.Header().ID + "/" + t.id + "/" + n.path
	var approver tools.Approver
	if t.cfg.Approver != nil {
		approver = t.cfg.Approver(t.snapshotOf(n))
	}
	n.broker = parent.broker.Clone(principal, approver)
	if n.host, err = t.childHost(n); err != nil {
		t.discard(n)
		return nil, err
	}
	inherited.Session, inherited.Broker, inherited.Host, inherited.Principal = n.sess, n.broker, n.host, principal
	newAgent := t.cfg.NewAgent
	if newAgent == nil {
		newAgent = func(cfg agent.Config) (*agent.Agent, func(), error) {
			a, err := agent.New(cfg)
			return a, nil, err
		}
	}
	if n.agent, n.release, err = newAgent(inherited); err != nil {
		t.discard(n)
		return nil, fmt.Errorf("delegation: build the child agent: %w", err)
	}
	t.mu.Lock()
	pctx := nextRunCtxLocked(parent)
	t.mu.Unlock()
	if pctx.Err() != nil {
		t.discard(n)
		return nil, fmt.Errorf("delegation: the run of agent %s has ended; it cannot spawn", parent.path)
	}
	n.ctx, n.cancel = context.WithCancel(pctx)
	return n, nil
}

// nextRunCtxLocked returns n's current run context, making the one its
// first run will take when it has none yet: a child may spawn (or be
// spawned under) before its owner goroutine started that run. t.mu held.
func nextRunCtxLocked(n *node) context.Context {
	if n.runCtx == nil {
		n.runCtx, n.runCancel = context.WithCancel(n.ctx)
		n.runUnused = true
	}
	return n.runCtx
}

// childScope resolves the child's tool names: the parent's standard tools,
// narrowed by want (each of which the parent must have). An empty,
// non-nil want ("tools": []) is refused: read as "all of them", it gave
// bash to a child its parent asked to have none.
func childScope(parent *agent.Agent, want []string) (scope []string, narrowed bool, err error) {
	have := func(name string) bool {
		_, ok := parent.Host().Lookup(name)
		return ok
	}
	for _, s := range StandardTools {
		if have(s) {
			scope = append(scope, s)
		}
	}
	if want == nil {
		return scope, false, nil
	}
	if len(want) == 0 {
		return nil, false, fmt.Errorf("delegation: the tool list is empty: omit tools to give the child all of yours (%s), or name the ones it needs", strings.Join(scope, ", "))
	}
	var out []string
	for _, w := range want {
		if !slices.Contains(scope, w) {
			return nil, false, fmt.Errorf("delegation: tool %q is not in the parent's standard tools (%s)", w, strings.Join(scope, ", "))
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out, len(out) < len(scope), nil
}

// childHost is the child's tool host: its scope of the parent's tools,
// plus message_parent, or with Config.Native the native tools bound to it
// (spawn_agent and the rest only while depth remains).
func (t *Team) childHost(n *node) (*tools.Host, error) {
	h, err := n.parent.agent.Host().Filter(n.scope)
	if err != nil {
		return nil, fmt.Errorf("delegation: child tools: %w", err)
	}
	extra := []tools.Tool{messageParentTool{team: t, id: n.id}}
	if t.cfg.Native && t.cfg.Service == nil {
		extra = nativeTools(boundTo(t, n.id), standardEnum(n.scope), n.depth < t.lim.Depth)
	}
	for _, tl := range extra {
		if err := h.Register(tl); err != nil {
			return nil, fmt.Errorf("delegation: child tools: %w", err)
		}
	}
	return h, nil
}

// discard removes a child that was built but never published.
func (t *Team) discard(n *node) {
	if n.release != nil {
		n.release()
	}
	if n.sess != nil {
		name := filepath.Base(n.sess.Path())
		_ = n.sess.Close()
		_ = session.RemoveIn(t.dir.root, name)
	}
}

// publish makes a recorded child visible.
func (t *Team) publish(parent, n *node) {
	t.mu.Lock()
	parent.reserved--
	parent.children = append(parent.children, n)
	t.nodes[n.id] = n
	t.order = append(t.order, n)
	t.mu.Unlock()
	t.notify(n)
}

// notify reports n's state to OnUpdate.
func (t *Team) notify(n *node) {
	if t.cfg.OnUpdate != nil {
		t.cfg.OnUpdate(t.snapshot(n))
	}
}

// transition makes status durable, then visible.
func (t *Team) transition(n *node, st Status, detail string) error {
	if err := t.record(Record{Kind: KindAgentStatus, Agent: n.id, Path: n.path, Status: string(st), Text: bound(detail)}); err != nil {
		return err
	}
	t.mu.Lock()
	n.status = st
	t.mu.Unlock()
	t.notify(n)
	return nil
}

// work is the child's owner goroutine, from its spawn until the child
// is done for good: it runs the child's task and then its follow-ups,
// holding one concurrency slot while the child is pending or running,
// and while the child is idle it waits on its command channel (cmds).
func (t *Team) work(n *node) {
	defer t.wg.Done()
	if t.holdWork != nil {
		t.holdWork(n.id)
	}
	announce := false
	for {
		if announce && !t.announce(n) {
			t.settle(n, StatusCancelled, "")
			return
		}
		st, detail := t.deliver(n)
		idle, next := t.settle(n, st, detail)
		if next && t.reserveNext(n) {
			announce = true
			continue
		}
		if next { // a shutdown or an interrupt took n first
			<-t.sem
		}
		if !idle {
			return
		}
		var run bool
		if run, announce = t.awaitWork(n); !run {
			return
		}
	}
}

// settle makes the end of one run of n durable and visible. It reports
// whether n stays idle (it keeps its session and context: a generic
// team's child whose run completed, failed or was interrupted) and
// whether its backlog runs next (only after a completed run; after a
// failure or an interrupt the backlog waits for the next follow-up).
// Unless the backlog runs next, n's concurrency slot is given back before
// its end is visible, so whoever sees it can use the slot.
func (t *Team) settle(n *node, st Status, detail string) (idle, next bool) {
	undelivered := st == statusUndelivered
	if undelivered { // the child is as it was before the follow-up
		st = StatusCompleted
	}
	t.mu.Lock()
	// A generic team's child stays idle after any end of its run; a
	// service's only after a completed one.
	idle = (t.followups() || st == StatusCompleted && t.cfg.Service != nil) && !t.closed && !n.finishing && n.ctx.Err() == nil
	if n.interrupted && st == StatusCancelled && detail == "" {
		detail = "interrupted"
	}
	n.interrupted = false
	if left := len(n.inbox); left > 0 && !idle {
		detail = strings.TrimPrefix(detail+fmt.Sprintf("; %d message(s) sent to it were not delivered: it ended first", left), "; ")
	}
	t.mu.Unlock()
	n.runCancel() // whatever ended the run (completion, failure) stops the child's descendants
	if !idle {
		n.cancel()
	}
	totals := n.sess.Totals()
	final := lastAnswer(n.sess)
	t.mu.Lock()
	done := n.done // a follow-up may replace it once n is shown idle
	n.final, n.usage, n.settled = final, totals, true
	n.errText = ""
	if st != StatusCompleted || undelivered || detail != "" {
		n.errText = detail
	}
	t.mu.Unlock()
	shown := st
	if idle {
		shown = StatusIdle
	}
	next = idle && st == StatusCompleted && !undelivered
	if !next {
		<-t.sem
	}
	if err := t.transition(n, shown, detail); err != nil {
		// The team has failed and said so; the child did end.
		t.mu.Lock()
		n.status = shown
		t.mu.Unlock()
	}
	if !undelivered {
		n.parent.box.post(t.msgIDs.Add(1), n.path, statusNote(st, detail), true)
	}
	close(done)
	if !idle {
		t.closeNode(n)
	}
	return idle, next
}

// closeNode releases a child that is done for good.
func (t *Team) closeNode(n *node) {
	if n.release != nil {
		n.release()
	}
	_ = n.sess.Close()
}

// finishIdle ends an idle child for good with status st (shutdown,
// interrupt); it reports false when n is not idle.
func (t *Team) finishIdle(n *node, st Status) bool {
	t.mu.Lock()
	if n.status != StatusIdle || n.finishing {
		t.mu.Unlock()
		return false
	}
	n.finishing = true
	t.mu.Unlock()
	n.cancel()
	if err := t.transition(n, st, ""); err != nil {
		t.mu.Lock()
		n.status = st
		t.mu.Unlock()
	}
	t.closeNode(n)
	return true
}

// run starts one run of n (its prompt: the direct messages queued for it,
// then its task) and waits for it.
func (t *Team) run(n *node) (Status, string) {
	t.mu.Lock()
	if !n.runUnused { // a spawn made the first run's context already
		n.runCtx, n.runCancel = context.WithCancel(n.ctx)
	}
	n.runUnused = false
	if n.interrupted {
		n.runCancel()
	}
	ctx, task := n.runCtx, n.task
	msgs := t.takePromptLocked(n)
	t.mu.Unlock()
	if err := t.transition(n, StatusRunning, ""); err != nil {
		t.restorePrompt(n)
		return StatusCancelled, err.Error()
	}
	if ctx.Err() != nil {
		t.restorePrompt(n)
		return StatusCancelled, ""
	}
	r, err := n.agent.Prompt(ctx, promptText(msgs, task), agent.PromptOptions{})
	if err != nil {
		t.restorePrompt(n)    // the messages stay at the front, in order
		if ctx.Err() != nil { // interrupted or ended meanwhile: no retry
			return StatusCancelled, ""
		}
		if t.unacknowledged(n) {
			return statusUndelivered, err.Error()
		}
		return StatusFailed, err.Error()
	}
	t.mu.Lock()
	n.run = r
	if n.followup { // durable in the child's session: the delivery acknowledgement
		n.backlogBytes -= len(n.backlog[0].task)
		n.backlog = n.backlog[1:]
		n.followup = false
	}
	t.ackPromptLocked(n)
	n.errText = "" // an earlier failed attempt is over
	t.mu.Unlock()
	t.steer(n, r)
	return t.follow(n, r)
}

// follow drains the run's events (OnEvent paces the child) and, between
// them, the child's commands, then returns how the run ended.
func (t *Team) follow(n *node, r *agent.Run) (Status, string) {
	for events := r.Events(); events != nil; {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if t.cfg.OnEvent != nil {
				t.cfg.OnEvent(t.snapshot(n), ev)
			}
		case <-n.cmds:
			t.steer(n, r)
		}
	}
	res := r.Wait()
	switch res.Outcome {
	case agent.OutcomeCompleted:
		return StatusCompleted, ""
	case agent.OutcomeCancelled:
		return StatusCancelled, ""
	case agent.OutcomeMaxTurns:
		return StatusFailed, "the child reached its turn limit"
	}
	if res.Err != nil {
		return StatusFailed, res.Err.Error()
	}
	return StatusFailed, "the child's run failed"
}

// pathOf is the ancestry path of agent id ("root" for the root).
func (t *Team) pathOf(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, ok := t.nodes[id]; ok {
		return n.path
	}
	return id
}

// Interrupt stops a descendant of callerID and, with it, its own
// descendants; the request is durable first. A child of a generic team
// that is pending or running stops its current run and stays idle with
// its unacknowledged follow-ups kept, in order, for its next follow-up;
// any other child (an idle one, or any child of a service team) ends
// cancelled for good.
func (t *Team) Interrupt(callerID, agentID string) (Snapshot, error) {
	n, err := t.descendant(callerID, agentID)
	if err != nil {
		return Snapshot{}, err
	}
	if err := t.record(Record{Kind: KindInterruptRequested, Agent: n.id, Path: n.path}); err != nil {
		return Snapshot{}, err
	}
	if !t.interruptRun(n) {
		n.cancel()
		t.finishIdle(n, StatusCancelled)
	}
	return t.snapshot(n), nil
}

// descendant finds agentID below callerID.
func (t *Team) descendant(callerID, agentID string) (*node, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[agentID]
	if ok {
		for p := n.parent; p != nil; p = p.parent {
			if p.id == callerID {
				return n, nil
			}
		}
	}
	return nil, fmt.Errorf("%w %q below %s (children of earlier turns have ended; list your children for this turn's ids)", ErrUnknownAgent, agentID, callerID)
}

// child returns the snapshot of agentID below callerID.
func (t *Team) child(callerID, agentID string) (Snapshot, bool) {
	n, err := t.descendant(callerID, agentID)
	if err != nil {
		return Snapshot{}, false
	}
	return t.snapshot(n), true
}

// List returns the caller's descendants in spawn order.
func (t *Team) List(callerID string) []Snapshot {
	t.mu.Lock()
	var ns []*node
	for _, n := range t.order {
		for p := n.parent; p != nil; p = p.parent {
			if p.id == callerID {
				ns = append(ns, n)
				break
			}
		}
	}
	t.mu.Unlock()
	out := make([]Snapshot, 0, len(ns))
	for _, n := range ns {
		out = append(out, t.snapshot(n))
	}
	return out
}

// Wait blocks until every named child of callerID (all its children when
// ids is empty) has ended, a direct message for callerID is in its
// mailbox, timeout passes or ctx ends, and returns the children's
// snapshots. Waits are bounded by the total-agent limit.
func (t *Team) Wait(ctx context.Context, callerID string, ids []string, timeout time.Duration) ([]Snapshot, error) {
	select {
	case t.waits <- struct{}{}:
	default:
		return nil, &LimitError{Limit: "waits", Max: t.lim.Total}
	}
	defer func() { <-t.waits }()
	var targets []*node
	if len(ids) == 0 {
		t.mu.Lock()
		if c, ok := t.nodes[callerID]; ok {
			targets = slices.Clone(c.children)
		}
		t.mu.Unlock()
	}
	for _, id := range ids {
		n, err := t.descendant(callerID, id)
		if err != nil {
			return nil, err
		}
		targets = append(targets, n)
	}
	t.mu.Lock()
	caller, ok := t.nodes[callerID]
	t.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownAgent, callerID)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	t.mu.Lock()
	dones := make([]chan struct{}, len(targets))
	for i, n := range targets {
		dones[i] = n.done
	}
	t.mu.Unlock()
	for _, done := range dones {
		for waiting := true; waiting; {
			mail, has := caller.box.wake(true)
			if has { // a message for the caller ends the wait early
				return t.snapshots(targets), nil
			}
			select {
			case <-done:
				waiting = false
			case <-mail:
			case <-timer.C:
				return t.snapshots(targets), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return t.snapshots(targets), nil
}

func (t *Team) snapshots(ns []*node) []Snapshot {
	out := make([]Snapshot, 0, len(ns))
	for _, n := range ns {
		out = append(out, t.snapshot(n))
	}
	return out
}

// snapshot reads n under the team lock.
func (t *Team) snapshot(n *node) Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snapshotOf(n)
}

// snapshotOf describes n (caller holds t.mu or owns n exclusively).
func (t *Team) snapshotOf(n *node) Snapshot {
	s := Snapshot{ID: n.id, Path: n.path, Depth: n.depth, Status: n.status, Task: n.task, Final: n.final, Error: n.errText, Queued: len(n.backlog), Messages: len(n.inbox), Tools: slices.Clone(n.scope), team: t}
	if n.parent != nil {
		s.ParentID = n.parent.id
	}
	if n.sess != nil {
		s.SessionID, s.SessionPath = n.sess.Header().ID, n.sess.Path()
	}
	if n.settled {
		s.Usage, s.Uncertain = n.usage.Own, n.usage.Uncertain
	}
	if n.broker != nil {
		s.Policy = n.broker.EffectiveToolPolicy()
	}
	s.Provenance = Orchestration{
		Sandbox: ParentInherited, EffectPolicy: ParentInherited, ApprovalAuthority: ParentInherited,
		Environment: ParentInherited, WorkingDirectory: ParentInherited, ExtensionTrust: ParentInherited,
		ToolScope: ParentInherited, ExecutionLimits: ParentInherited,
	}
	if n.narrowed {
		s.Provenance.ToolScope = ChildOverride
	}
	return s
}

// Shutdown ends the team: it rejects new work, cancels every worker, waits
// up to settle for the descendants to end, records team_shutdown and
// returns one delegated-usage record per child for the root session (a
// child still running is mirrored with its known subtotal, uncertain).
func (t *Team) Shutdown(ctx context.Context, runID string, settle time.Duration) []session.Record {
	t.mu.Lock()
	t.closed = true
	workers := slices.Clone(t.order)
	t.mu.Unlock()
	t.cancel()
	for _, n := range workers {
		t.command(n, cmdShutdown)
	}
	allDone := make(chan struct{})
	go func() { t.wg.Wait(); close(allDone) }()
	timer := time.NewTimer(settle)
	defer timer.Stop()
	select {
	case <-allDone:
	case <-timer.C:
	case <-ctx.Done():
	}
	t.mu.Lock()
	ns := slices.Clone(t.order)
	t.mu.Unlock()
	for _, n := range ns {
		t.finishIdle(n, StatusCompleted)
	}
	recs := make([]session.Record, 0, len(ns))
	for _, n := range ns {
		recs = append(recs, session.DelegatedRecord(t.mirror(n, runID)))
	}
	t.mu.Lock()
	t.mirrored = true // the root session counts them once it appends recs
	t.mu.Unlock()
	_ = t.record(Record{Kind: KindTeamShutdown, Text: fmt.Sprintf("%d child agent(s)", len(ns))})
	go func() { <-allDone; _ = t.dir.close() }()
	return recs
}

// addLive adds the known usage of every child not yet mirrored to tot
// (the cost ledger, Owner.Ledger): each child session's own usage as it
// stands, its uncertainty counted as a delegated child's.
func (t *Team) addLive(tot *session.Totals) {
	t.mu.Lock()
	ns := slices.Clone(t.order)
	mirrored := t.mirrored
	t.mu.Unlock()
	if mirrored {
		return
	}
	for _, n := range ns {
		c := n.sess.Totals()
		k := &tot.Known
		k.Input, k.CachedInput, k.Output, k.Reasoning = k.Input+c.Own.Input, k.CachedInput+c.Own.CachedInput, k.Output+c.Own.Output, k.Reasoning+c.Own.Reasoning
		k.CostPicodollars += c.Own.CostPicodollars
		if c.Uncertain {
			if !tot.Uncertain {
				tot.Cause = session.UsageUncertain{Reason: "delegated_uncertain", RunID: t.cfg.RunID}
			}
			tot.Uncertain = true
			tot.DelegatedUncertain++
		}
	}
}

// mirror is n's delegated-usage record: its settled own usage, or the
// known subtotal of a child that did not settle, marked uncertain.
func (t *Team) mirror(n *node, runID string) session.DelegatedUsage {
	t.mu.Lock()
	settled, totals := n.settled, n.usage
	t.mu.Unlock()
	if !settled {
		totals = n.sess.Totals()
		totals.Uncertain = true
	}
	u := totals.Own
	u.RunID, u.Operation, u.Model = runID, "delegated", n.agent.Model().Name
	u.RequestID = ""
	return session.DelegatedUsage{ChildSession: n.sess.Header().ID, Usage: u, Uncertain: totals.Uncertain}
}

// title is a child session's title.
func title(path, task string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(task), "\n")
	const max = 80
	if len(line) > max {
		i := max
		for i > 0 && !utf8.RuneStart(line[i]) {
			i--
		}
		line = line[:i] + "…"
	}
	return path + ": " + line
}

// bound cuts s to MaxTextBytes on a rune boundary.
func bound(s string) string { return clipText(s, MaxTextBytes) }

// lastAnswer is the text of the session's last assistant entry.
func lastAnswer(s *session.Session) string {
	br := s.Branch()
	for i := len(br) - 1; i >= 0; i-- {
		if br[i].Type != session.EntryAssistant {
			continue
		}
		var b strings.Builder
		for _, it := range br[i].Items {
			if it.Type == session.ItemText {
				b.WriteString(it.Text)
			}
		}
		if b.Len() > 0 {
			return b.String()
		}
	}
	return ""
}
