package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// runtimeBackend adapts a Runtime to the server's backend seam.
type runtimeBackend struct {
	rt *host.Runtime
	// documents returns the document overlay for a workspace (nil: none).
	documents func(workspace string) tools.Documents
	// lister keeps what listings read of each session file (nil: each
	// listing reads every file).
	lister *session.Lister
	// delegation returns the delegation hook of a root session (nil:
	// children are not shown).
	delegation func(rootID string) func(*team.Config)
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
		_ = os.Remove(sess.Path())
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
	h, err := b.attach(ctx, sess, "", "", approver, host.NewRuleBook(sess, slog.Default()).RecordedPolicy())
	if err != nil {
		_ = sess.Close()
		return nil, err
	}
	h.rules.RestorePolicy(h.built.Agent.Broker())
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
	rules := host.NewRuleBook(sess, slog.Default())
	docs := b.documentsFor(hdr.Cwd)
	var delegation func(*team.Config)
	if b.delegation != nil {
		delegation = b.delegation(hdr.ID)
	}
	built, err := rt.NewAgent(ctx, host.AgentSpec{
		Session: sess, Workspace: hdr.Cwd, Model: model, Reasoning: reasoning,
		Approver: toolsApprover{approver}, Principal: "editor:" + hdr.ID, Rules: rules,
		Documents: docs, Delegation: delegation, Policy: policy,
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
	rt    *host.Runtime
	sess  *session.Session
	built *host.Built
	// startModel is the model the session was built with (configured or
	// asked for at octet/session/new): octet/setModel allows it besides
	// the model table.
	startModel provider.Model
	// rules are the session's standing approvals and recorded policy.
	rules *host.RuleBook
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
	m, err := s.rt.Resolve(name)
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
