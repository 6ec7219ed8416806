package host

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

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Host is the host of the sessions of one front door (an editor
// connection, a CLI command): it creates, opens, lists, forks and deletes
// them over one Runtime. It is safe for concurrent use; Close releases
// what listing holds.
type Host struct {
	rt  *Runtime
	log *slog.Logger
	// lister keeps what listings read of each session file.
	lister *session.Lister
	// models is the endpoint's model list as last read (catalog.go).
	models *modelList

	mu sync.Mutex
	// seen are the delegated children this host's sessions reported, by
	// child session id (children.go).
	seen map[string]*seenChild
}

// New returns the host of rt's sessions, logging to log (nil:
// slog.Default()).
func New(rt *Runtime, log *slog.Logger) *Host {
	if log == nil {
		log = slog.Default()
	}
	return &Host{rt: rt, log: log, lister: new(session.Lister), models: new(modelList), seen: map[string]*seenChild{}}
}

// Runtime is the configuration the host builds sessions with.
func (h *Host) Runtime() *Runtime { return h.rt }

// Close releases what listing holds (the listing's directory watch).
func (h *Host) Close() error { return h.lister.Close() }

// Binding is what a front door hands the host for one session it opens:
// how the session asks its person, and what of the client its tools and
// children see.
type Binding struct {
	// Approver confirms the session's effects (nil: the broker denies
	// what needs a person).
	Approver tools.Approver
	// Documents, when set, returns the client's documents for the
	// session's workspace (nil: none): AgentSpec.Documents.
	Documents func(workspace string) tools.Documents
	// Delegation, when set, connects the delegated children of session
	// sessionID to the front door (AgentSpec.Delegation).
	Delegation func(sessionID string, cfg *team.Config)
	// Editor, when set, returns AgentSpec.Editor for the session's
	// workspace: the client's name and the documents open in it.
	Editor func(workspace string) func() (client string, open []string)
	// MCPServers are MCP servers the client handed in for the session.
	MCPServers []MCPServer
}

// Spec is what a new session asks for.
type Spec struct {
	// Cwd is the session's workspace, an absolute directory.
	Cwd   string
	Title string
	// Model and Reasoning are the session's selection ("" for the
	// configured default).
	Model, Reasoning string
	// Policy is the session's own effect policy (nil: the launch
	// policy); one looser than the launch policy is refused
	// (tools.ErrPolicyLooser).
	Policy *tools.Policy
}

// Create makes a new durable session and the agent that drives it. A
// refused creation leaves no file behind.
func (h *Host) Create(ctx context.Context, spec Spec, b Binding) (*Session, error) {
	if st, err := os.Stat(spec.Cwd); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", spec.Cwd)
	}
	sess, err := session.Create(h.rt.SessionsDir, session.Header{Cwd: spec.Cwd, Title: spec.Title})
	if err != nil {
		return nil, fmt.Errorf("create session in %s: %w", h.rt.SessionsDir, err)
	}
	s, err := h.attach(ctx, sess, spec.Model, spec.Reasoning, b, spec.Policy, true)
	if err != nil {
		// The file was created by this call and holds no entry: a
		// refused creation leaves nothing behind.
		_ = sess.Close()
		_ = session.Remove(sess.Path())
		return nil, err
	}
	return s, nil
}

// Open reopens the existing session id (writable) with a fresh agent at
// the effect policy it recorded; [ErrNoSession] when there is none.
func (h *Host) Open(ctx context.Context, id string, b Binding) (*Session, error) {
	if id == "" || filepath.Base(id) != id || id == "." || id == ".." {
		return nil, fmt.Errorf("%w: invalid session id %q", ErrNoSession, id)
	}
	path := h.path(id)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoSession, path)
	}
	sess, err := session.Open(path)
	if err != nil {
		return nil, err
	}
	s, err := h.attach(ctx, sess, "", "", b, NewRuleBook(sess, h.log).RecordedPolicy(), false)
	if err != nil {
		_ = sess.Close()
		return nil, err
	}
	s.rules.RestorePolicy(s.Broker())
	return s, nil
}

// path is the file of session id.
func (h *Host) path(id string) string { return filepath.Join(h.rt.SessionsDir, id+".jsonl") }

// attach builds the agent of sess at policy (nil: the launch policy) and,
// with record, records the policy in the ledger and applies it.
func (h *Host) attach(ctx context.Context, sess *session.Session, model, reasoning string, b Binding, policy *tools.Policy, record bool) (*Session, error) {
	rt := h.rt
	if rt.NewAgent == nil {
		return nil, errors.New("host: Runtime.NewAgent is nil")
	}
	hdr := sess.Header()
	rules := NewRuleBook(sess, h.log)
	var docs tools.Documents
	if b.Documents != nil {
		docs = b.Documents(filepath.Clean(hdr.Cwd))
	}
	spec := AgentSpec{
		Session: sess, Workspace: hdr.Cwd, Model: model, Reasoning: reasoning,
		Approver: b.Approver, Principal: "editor:" + hdr.ID, Rules: rules,
		Documents: docs, Policy: policy, MCPServers: b.MCPServers,
	}
	if model != "" {
		m, err := h.resolveModel(model)
		if err != nil {
			return nil, &InputError{Msg: err.Error()}
		}
		spec.Resolved = m
	}
	if b.Delegation != nil {
		spec.Delegation = h.delegation(hdr.ID, b.Delegation)
	}
	if b.Editor != nil {
		spec.Editor = b.Editor(filepath.Clean(hdr.Cwd))
	}
	built, err := rt.NewAgent(ctx, spec)
	if err != nil {
		return nil, &AgentError{Err: err}
	}
	if built == nil || built.Agent == nil {
		return nil, &AgentError{Err: errors.New("factory returned no agent")}
	}
	s := &Session{rt: rt, sess: sess, built: built, startModel: built.Agent.Model(), rules: rules, docs: docs, resolve: h.resolveModel, catalog: h.Catalog}
	if err := s.settleSelection(model, reasoning, h.log); err != nil {
		_ = s.closeAgent()
		return nil, err
	}
	if record && policy != nil {
		if _, err := s.SetEffectPolicy(*policy); err != nil {
			_ = s.closeAgent()
			return nil, err
		}
	}
	// Until its first run the session keeps no typed branch: the file
	// holds it, and an agent's run types it again.
	sess.Release()
	s.startPrewarm(h.log)
	return s, nil
}

// SessionInfo is one row of a session listing.
type SessionInfo struct {
	SessionID      string    `json:"sessionId"`
	Title          string    `json:"title"`
	Cwd            string    `json:"cwd"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	UsageUncertain bool      `json:"usageUncertain"`
	// A delegated child's row names its parent, agent and status.
	ParentSessionID string `json:"parentSessionId,omitempty"`
	AgentID         string `json:"agentId,omitempty"`
	AgentPath       string `json:"agentPath,omitempty"`
	Status          string `json:"status,omitempty"`
}

// List describes the sessions on disk without parsing whole files,
// newest first.
func (h *Host) List(context.Context) ([]SessionInfo, error) {
	infos, err := h.lister.List(h.rt.SessionsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]SessionInfo, 0, len(infos))
	for _, in := range infos {
		row := SessionInfo{SessionID: in.ID}
		row.Describe(in)
		out = append(out, row)
	}
	return out, nil
}

// Describe fills the row's title, cwd, times and uncertainty from in.
func (row *SessionInfo) Describe(in session.Info) {
	// The file's mtime comes from the kernel's coarse clock and can read
	// a few ms before the header's creation time.
	updated := in.Updated
	if updated.Before(in.Created) {
		updated = in.Created
	}
	row.Title, row.Cwd, row.CreatedAt, row.UpdatedAt, row.UsageUncertain = in.Title, in.Cwd, in.Created.UTC(), updated.UTC(), in.UsageUncertain
}

// Delete removes session id's file and listing cache ([ErrNoSession]
// when there is none). The caller has closed it.
func (h *Host) Delete(id string) error {
	if !ValidSessionID(id) {
		return fmt.Errorf("%w: invalid session id %q", ErrNoSession, id)
	}
	err := session.Remove(h.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNoSession, id)
	}
	return err
}

// ValidSessionID reports whether id can name a file in the sessions
// directory (no path separators, no dot names).
func ValidSessionID(id string) bool {
	return id != "" && filepath.Base(id) == id && id != "." && id != ".." && !strings.HasPrefix(id, ".")
}

// RecordedPolicy is the effect policy session id last recorded, read
// without opening it for writing (nil: none).
func (h *Host) RecordedPolicy(id string) *tools.Policy {
	if !ValidSessionID(id) {
		return nil
	}
	sess, err := session.Inspect(h.path(id))
	if err != nil {
		return nil
	}
	defer sess.Close()
	return NewRuleBook(sess, h.log).RecordedPolicy()
}
