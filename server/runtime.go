package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Runtime is what the server needs from configuration: where sessions
// live and how to build the agent for one session. The CLI fills it from
// flags, config files and credentials; tests fill it with a loopback
// provider.
type Runtime struct {
	// SessionsDir holds the session files ($OCTET_HOME/sessions).
	SessionsDir string
	// NewAgent builds the agent, its tools and broker for one open session.
	// It must install spec.Approver as the broker's Approver (and
	// spec.Rules as its Rules). Required.
	NewAgent func(ctx context.Context, spec AgentSpec) (*Built, error)
	// ResolveModel maps a model name (octet/setModel, octet/session/new) to
	// a provider model; nil uses provider.LookupModel and, for an unknown
	// name, a model with only that name.
	ResolveModel func(name string) (provider.Model, error)
	// ExplainError, when set, turns a run's failure into an actionable
	// sentence ("cannot reach the provider at …: check your network and
	// OPENAI_BASE_URL"), or "" when it has none. The sentence is added to
	// the octet/prompt error and to the window/showMessage text.
	ExplainError func(err error) string
	// Catalog, when set, is what octet/models lists (the configured
	// model, prices); nil lists DefaultCatalog.
	Catalog func() Catalog
}

// AgentSpec is what the server knows when it needs an agent.
type AgentSpec struct {
	// Session is the writable session the agent drives.
	Session *session.Session
	// Workspace is the session's absolute working directory.
	Workspace string
	// Model and Reasoning are what the client asked for ("" for the
	// configured default).
	Model, Reasoning string
	// Approver asks the editor to confirm effects (octet/confirmEffect or
	// window/showMessageRequest).
	Approver tools.Approver
	// Principal names the editor session the run acts for.
	Principal string
	// Rules keeps the session's standing approvals (approve for
	// session) in its ledger; install it as the broker's
	// BrokerConfig.Rules. A broker without it asks every time.
	Rules tools.RuleStore
	// Documents is the editor's overlay of open documents for this
	// workspace (nil when the workspace is in no editor root): pass it as
	// tools.Config.Documents so read and search see unsaved text and
	// edits of open documents go through the editor.
	Documents tools.Documents
	// Delegation, when set, connects the session's delegated children to
	// the editor: a runtime that delegates calls it on the team
	// configuration of the session's children (events, agent_updated,
	// approvals naming the child, cancel of a child's run).
	Delegation func(*team.Config)
	// Policy is the session's own effect policy as far as it is known
	// before its agent exists: octet/session/new's effectPolicy, or what a
	// resumed session recorded (nil: the launch policy). NewAgent builds
	// the broker at this policy (or the launch policy, when Policy is
	// looser) before anything that acts with the session's authority
	// starts: MCP servers follow the session's policy, never the launch
	// policy the editor started octet with. The caller records it and
	// applies it again afterwards (the ledger is the record).
	Policy *tools.Policy
	// Editor, when set, returns the client's name (initialize's
	// clientInfo) and the documents open in the editor within the
	// workspace (absolute paths), for the model's environment context. It
	// is called before each prompt; it must be quick.
	Editor func() (client string, open []string)
	// MCPServers are MCP servers the client handed in for this session
	// (ACP's session/new): they start under the rules of configured ones
	// (only under unsafe_host; pinned; never under --offline), asked for
	// by the client rather than enabled in config.toml.
	MCPServers []MCPServer
}

// MCPServer is an MCP server a client hands in: a stdio command, or a
// streamable HTTP URL.
type MCPServer struct {
	Name    string
	Command string
	Args    []string
	Env     map[string]string
	URL     string
	Headers map[string]string
}

// Built is an agent ready to drive a session.
type Built struct {
	// Agent drives the session; it must have been built on
	// AgentSpec.Session with AgentSpec.Approver in its broker.
	Agent *agent.Agent
	// Policy is the EffectiveToolPolicy snapshot reported to the client.
	Policy tools.EffectiveToolPolicy
	// Close releases the tools (bash spill files); it may be nil.
	Close func() error
	// Changes is the recorder the tools stage their changes with; its
	// store answers octet/session/diff. Nil: diffs of paths changed more
	// than once in a run are unavailable.
	Changes *changes.Recorder
	// Extensions are the session's MCP servers (octet/extensions/list);
	// nil: none.
	Extensions Extensions
}

// runtimeBackend adapts a Runtime to the server's backend seam.
type runtimeBackend struct {
	rt *Runtime
	// documents returns the document overlay for a workspace (nil: none).
	documents func(workspace string) tools.Documents
	// lister keeps what listings read of each session file (nil: each
	// listing reads every file).
	lister *session.Lister
	// delegation returns the delegation hook of a root session (nil:
	// children are not shown).
	delegation func(rootID string) func(*team.Config)
	// editor returns AgentSpec.Editor for a workspace (nil: none).
	editor func(workspace string) func() (string, []string)
}

var _ backend = runtimeBackend{}

// Create implements backend.
func (b runtimeBackend) Create(ctx context.Context, spec sessionSpec) (sessionHandle, error) {
	if st, err := os.Stat(spec.Cwd); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", spec.Cwd)
	}
	var policy *tools.Policy
	if spec.EffectPolicy != "" {
		p, err := tools.ParsePolicy(spec.EffectPolicy)
		if err != nil {
			return nil, err
		}
		policy = &p
	}
	sess, err := session.Create(b.rt.SessionsDir, session.Header{Cwd: spec.Cwd, Title: spec.Title})
	if err != nil {
		return nil, err
	}
	h, err := b.attach(ctx, sess, spec.Model, spec.Reasoning, spec.Approver, policy)
	if err == nil && spec.EffectPolicy != "" {
		err = h.applyEffectPolicy(spec.EffectPolicy)
		if err != nil {
			_ = h.Close()
		}
	}
	if err != nil {
		// The file was created by this call and holds no entry: a
		// refused session/new leaves nothing behind.
		_ = sess.Close()
		_ = session.Remove(sess.Path())
		return nil, err
	}
	return h, nil
}

// Open implements backend.
func (b runtimeBackend) Open(ctx context.Context, id string, approver approverFunc) (sessionHandle, error) {
	if id == "" || filepath.Base(id) != id || id == "." || id == ".." {
		return nil, fmt.Errorf("%w: invalid session id %q", errNoSession, id)
	}
	path := filepath.Join(b.rt.SessionsDir, id+".jsonl")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", errNoSession, path)
	}
	sess, err := session.Open(path)
	if err != nil {
		return nil, err
	}
	h, err := b.attach(ctx, sess, "", "", approver, newRuleBook(sess, slog.Default()).recordedPolicy())
	if err != nil {
		_ = sess.Close()
		return nil, err
	}
	h.rules.restorePolicy(h.built.Agent.Broker())
	return h, nil
}

// Close releases what listing holds (the Lister's directory watch).
func (b runtimeBackend) Close() error {
	if b.lister != nil {
		return b.lister.Close()
	}
	return nil
}

// List implements backend.
func (b runtimeBackend) List(context.Context) ([]sessionInfo, error) {
	list := session.List
	if b.lister != nil {
		list = b.lister.List
	}
	infos, err := list(b.rt.SessionsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]sessionInfo, 0, len(infos))
	for _, in := range infos {
		// The file's mtime comes from the kernel's coarse clock and can
		// read a few ms before the header's creation time.
		updated := in.Updated
		if updated.Before(in.Created) {
			updated = in.Created
		}
		out = append(out, sessionInfo{
			SessionID: in.ID, Title: in.Title, Cwd: in.Cwd,
			CreatedAt: in.Created.UTC(), UpdatedAt: updated.UTC(), UsageUncertain: in.UsageUncertain,
		})
	}
	return out, nil
}

func (b runtimeBackend) attach(ctx context.Context, sess *session.Session, model, reasoning string, approver approverFunc, policy *tools.Policy) (*runtimeSession, error) {
	rt := b.rt
	if rt.NewAgent == nil {
		return nil, errors.New("server: Runtime.NewAgent is nil")
	}
	hdr := sess.Header()
	rules := newRuleBook(sess, slog.Default())
	docs := b.documentsFor(hdr.Cwd)
	var delegation func(*team.Config)
	if b.delegation != nil {
		delegation = b.delegation(hdr.ID)
	}
	var editor func() (string, []string)
	if b.editor != nil {
		editor = b.editor(filepath.Clean(hdr.Cwd))
	}
	built, err := rt.NewAgent(ctx, AgentSpec{
		Session: sess, Workspace: hdr.Cwd, Model: model, Reasoning: reasoning,
		Approver: toolsApprover{approver}, Principal: "editor:" + hdr.ID, Rules: rules,
		Documents: docs, Delegation: delegation, Policy: policy, Editor: editor,
	})
	if err != nil {
		return nil, fmt.Errorf("build agent: %w", err)
	}
	if built == nil || built.Agent == nil {
		return nil, errors.New("build agent: factory returned no agent")
	}
	if reasoning != "" {
		built.Agent.SetReasoning(reasoning)
	}
	return &runtimeSession{rt: rt, sess: sess, built: built, startModel: built.Agent.Model(), rules: rules, docs: docs}, nil
}

// documentsFor returns the overlay for workspace, or nil.
func (b runtimeBackend) documentsFor(workspace string) tools.Documents {
	if b.documents == nil {
		return nil
	}
	return b.documents(filepath.Clean(workspace))
}

// toolsApprover adapts the server's approver to tools.Approver.
type toolsApprover struct{ f approverFunc }

var _ tools.Approver = toolsApprover{}

// Confirm implements tools.Approver.
func (a toolsApprover) Confirm(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
	ans, err := a.f(ctx, approvalRequest{
		RunID: req.Intent.RunID, CallID: req.Intent.CallID, Tool: req.Intent.Tool,
		Effect: req.Intent.Effect.String(), Title: req.Title, Detail: req.Detail, Diff: req.Diff,
		Digest: req.Digest, ExpiresAt: req.ExpiresAt, Scope: req.Scope, Arguments: req.Intent.Arguments,
	})
	if err != nil {
		return tools.Approval{}, err
	}
	return tools.Approval{Approved: ans.Approved, Digest: ans.Digest, ForSession: ans.ForSession, Reason: ans.Reason}, nil
}

// runtimeSession is one session with its agent.
type runtimeSession struct {
	rt    *Runtime
	sess  *session.Session
	built *Built
	// startModel is the model the session was built with (configured or
	// asked for at octet/session/new): octet/setModel allows it besides
	// the model table.
	startModel provider.Model
	// rules are the session's standing approvals and recorded policy.
	rules *ruleBook
	// docs is the editor's overlay for the workspace (nil: none): a
	// rewind of an open document goes through it, as an edit does.
	docs tools.Documents
	// rewindMu serializes rewinds of the session.
	rewindMu sync.Mutex

	closeOnce sync.Once
	closeErr  error
}

var _ sessionHandle = (*runtimeSession)(nil)

func (s *runtimeSession) ID() string    { return s.sess.Header().ID }
func (s *runtimeSession) Cwd() string   { return s.sess.Header().Cwd }
func (s *runtimeSession) Title() string { return s.sess.Title() }
func (s *runtimeSession) Head() string  { return s.sess.Head() }
func (s *runtimeSession) Policy() any   { return s.built.Agent.Broker().EffectiveToolPolicy() }

func (s *runtimeSession) Transcript() (any, error) {
	branch := s.sess.Branch()
	out := make([]transcriptEntry, 0, len(branch))
	for _, e := range branch {
		out = append(out, toTranscript(e))
	}
	return out, nil
}

func (s *runtimeSession) Usage() (any, bool) {
	t := s.sess.Totals()
	v := usageView{
		Input: t.Known.Input, CachedInput: t.Known.CachedInput, Output: t.Known.Output,
		Reasoning: t.Known.Reasoning, CostMicros: t.Known.CostPicodollars / 1_000_000,
		Requests: t.Requests, Complete: !t.Uncertain,
	}
	if t.Uncertain {
		v.Uncertainty = agent.DescribeUncertainty(t.Cause)
	}
	if err := s.built.Agent.CeilingRefusal(); err != nil {
		v.Refusal = err.Error()
	}
	return v, t.Uncertain
}

// maxRecoveredShown bounds the recovered outputs a resume returns.
const maxRecoveredShown = 8

// RecoveredOutput returns the session's last recovered outputs (partial
// text or reasoning of replaced attempts), oldest first.
func (s *runtimeSession) RecoveredOutput() any {
	all := s.sess.RecoveredOutputs()
	all = all[max(0, len(all)-maxRecoveredShown):]
	out := make([]recoveredView, 0, len(all))
	for _, o := range all {
		out = append(out, recoveredView{RunID: o.RunID, Channel: o.Channel, Text: o.Text, Attempt: o.Attempt})
	}
	return out
}

// recoveredView is the wire form of one recovered output.
type recoveredView struct {
	RunID   string `json:"runId"`
	Channel string `json:"channel"`
	Text    string `json:"text"`
	Attempt int    `json:"attempt"`
}

func (s *runtimeSession) SetHead(entryID string) error {
	if _, ok := s.sess.Entry(entryID); !ok {
		return fmt.Errorf("no entry %q in session %s", entryID, s.ID())
	}
	return s.sess.SetHead(entryID)
}

func (s *runtimeSession) Prompt(ctx context.Context, text string, withoutTools bool, deliver func(wireEvent) bool) (runHandle, error) {
	opts := agent.PromptOptions{WithoutTools: withoutTools}
	if deliver != nil {
		opts.Deliver = func(ev agent.Event) bool { return deliver(offered(ev)) }
	}
	r, err := s.built.Agent.Prompt(ctx, text, opts)
	if errors.Is(err, agent.ErrBusy) {
		return nil, errBusy
	}
	if err != nil {
		return nil, err
	}
	return &agentRun{r: r, explain: s.rt.ExplainError}, nil
}

func (s *runtimeSession) SetModel(name string) (string, error) {
	if name == s.startModel.Name {
		// The model the session was built with is always allowed.
		s.built.Agent.SetModel(s.startModel)
		return name, nil
	}
	resolve := s.rt.ResolveModel
	if resolve == nil {
		resolve = defaultResolveModel
	}
	m, err := resolve(name)
	if err != nil {
		return "", err
	}
	s.built.Agent.SetModel(m)
	return s.built.Agent.Model().Name, nil
}

func (s *runtimeSession) SetReasoning(effort string) (string, error) {
	if err := checkReasoning(effort); err != nil {
		return "", err
	}
	return s.built.Agent.SetReasoning(effort), nil
}

// checkReasoning refuses an effort the Responses API does not know.
func checkReasoning(effort string) error {
	switch effort {
	case "", "minimal", "low", "medium", "high", "xhigh", "none":
		return nil
	}
	return fmt.Errorf("unknown reasoning effort %q (minimal, low, medium, high, xhigh, none)", effort)
}

func (s *runtimeSession) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.built.Close != nil {
			errs = append(errs, s.built.Close())
		}
		errs = append(errs, s.sess.Close())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// defaultResolveModel knows the provider's model table only: a name the
// run could not be qualified for is refused now, not at the first retry.
func defaultResolveModel(name string) (provider.Model, error) {
	if m, ok := provider.LookupModel(name); ok {
		return m, nil
	}
	return provider.Model{}, UnknownModelError(name)
}

// UnknownModelError is the error for a model name octet does not know; it
// lists the names it does, plus extra (such as the configured model).
func UnknownModelError(name string, extra ...string) error {
	known := append(provider.ModelNames(), extra...)
	return fmt.Errorf("unknown model %q: use one of %s (or a dated snapshot of one, such as gpt-5-2025-08-07)",
		name, strings.Join(known, ", "))
}

// agentRun adapts *agent.Run to runHandle.
type agentRun struct {
	r       *agent.Run
	explain func(error) string
}

func (a *agentRun) ID() string { return a.r.ID() }

func (a *agentRun) Next() (wireEvent, bool) {
	for ev := range a.r.Events() {
		w := offered(ev)
		w.Body = w.appendBody(nil)
		return w, true
	}
	return wireEvent{}, false
}

// offered is ev as a wireEvent whose body is encoded only when asked for
// (appendBody): a deliver function that refuses it encodes nothing.
func offered(ev agent.Event) wireEvent {
	w := wireEvent{Kind: ev.Kind(), Seq: ev.Seq(), event: ev}
	if d, ok := ev.(*agent.OutputDelta); ok {
		w.Channel = d.Channel
	}
	return w
}

func (a *agentRun) Steer(text string) (string, error) { return mapRunErr(a.r.Steer(text)) }

func (a *agentRun) FollowUp(text string) (string, error) { return mapRunErr(a.r.FollowUp(text)) }

func (a *agentRun) FinishNow(text string) error {
	_, err := mapRunErr("", a.r.FinishNow(text))
	return err
}

func (a *agentRun) Cancel() { a.r.Cancel() }

func (a *agentRun) Wait() runResult {
	res := a.r.Wait()
	u := res.Usage
	return runResult{
		Outcome: string(res.Outcome),
		Usage: usageView{
			Input: u.Input, CachedInput: u.CachedInput, Output: u.Output, Reasoning: u.Reasoning,
			CostMicros: u.CostPicodollars / 1_000_000, Requests: u.Requests, Complete: u.Complete,
		},
		Err: explained(res.Err, a.explain),
	}
}

// explained puts explain's sentence before err (first, so a shortened
// message keeps it; err itself stays in the chain).
func explained(err error, explain func(error) string) error {
	if err == nil || explain == nil {
		return err
	}
	if hint := explain(err); hint != "" {
		return fmt.Errorf("%s (%w)", hint, err)
	}
	return err
}

func mapRunErr(id string, err error) (string, error) {
	if errors.Is(err, agent.ErrRunEnded) {
		return "", errRunEnded
	}
	return id, err
}

// usageView is the wire form of usage in prompt results and resume.
type usageView struct {
	Input       int64 `json:"input"`
	CachedInput int64 `json:"cachedInput"`
	Output      int64 `json:"output"`
	Reasoning   int64 `json:"reasoning"`
	CostMicros  int64 `json:"costMicros"`
	Requests    int   `json:"requests"`
	Complete    bool  `json:"complete"`
	// Uncertainty says why usage is not complete; Refusal is the error a
	// hard ceiling gives the next prompt (both omitted when empty).
	Uncertainty string `json:"uncertainty,omitempty"`
	Refusal     string `json:"refusal,omitempty"`
}

// transcriptEntry is the wire form of one session entry.
type transcriptEntry struct {
	ID         string           `json:"id"`
	Parent     string           `json:"parent,omitempty"`
	Time       time.Time        `json:"time"`
	Type       string           `json:"type"`
	RunID      string           `json:"runId,omitempty"`
	Text       string           `json:"text,omitempty"`
	Items      []transcriptItem `json:"items,omitempty"`
	StopReason string           `json:"stopReason,omitempty"`
	Result     *transcriptTool  `json:"result,omitempty"`
	Summary    string           `json:"summary,omitempty"`
}

type transcriptItem struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	CallID    string `json:"callId,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

type transcriptTool struct {
	CallID  string         `json:"callId"`
	Tool    string         `json:"tool"`
	Text    string         `json:"text"`
	IsError bool           `json:"isError"`
	Details map[string]any `json:"details,omitempty"`
}

// toTranscript converts an entry, leaving out opaque reasoning content.
func toTranscript(e session.Entry) transcriptEntry {
	t := transcriptEntry{
		ID: e.ID, Parent: e.Parent, Time: e.Time.UTC(), Type: string(e.Type), RunID: e.RunID,
		Text: e.Text, StopReason: e.StopReason,
	}
	for _, it := range e.Items {
		t.Items = append(t.Items, transcriptItem{Type: it.Type, Text: it.Text, CallID: it.CallID, Name: it.Name, Arguments: it.Arguments})
	}
	if r := e.Result; r != nil {
		t.Result = &transcriptTool{CallID: r.CallID, Tool: r.Tool, Text: r.Text, IsError: r.IsError, Details: r.Details}
	}
	if c := e.Compaction; c != nil {
		t.Summary = c.Summary
	}
	return t
}
