package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Delegated children as child sessions: a session's children are found
// on disk through their teams' provenance (beside the session files) and,
// for those this host's sessions delegated to, through what their teams
// reported (status). A child's session is written only by its own agent:
// the host reads it (transcript, usage, diff), forks it into an ordinary
// session, and renames or deletes it only once its agent can no longer
// write it; a parent is deleted with its children's sessions and
// provenance, and only when none of them is live.

// seenChild is what this host saw of one child of its sessions.
type seenChild struct {
	rootID, agentID, agentPath, path string
	status                           team.Status
}

// live reports whether the child's agent may still write its session.
func live(s team.Status) bool { return s.Active() || s == team.StatusIdle }

// delegation is the hook the host installs for the children of session
// rootID: it records each child it hears of (and its status) before the
// front door's own hook f sees it.
func (h *Host) delegation(rootID string, f func(string, *team.Config)) func(*team.Config) {
	return func(cfg *team.Config) {
		f(rootID, cfg)
		onUpdate, onEvent := cfg.OnUpdate, cfg.OnEvent
		cfg.OnUpdate = func(child team.Snapshot) {
			h.sawChild(rootID, child, true)
			if onUpdate != nil {
				onUpdate(child)
			}
		}
		cfg.OnEvent = func(child team.Snapshot, ev agent.Event) {
			h.sawChild(rootID, child, false)
			if onEvent != nil {
				onEvent(child, ev)
			}
		}
	}
}

// sawChild records child of root session rootID, and its status when
// update is set (a status change) or when it is new.
func (h *Host) sawChild(rootID string, child team.Snapshot, update bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.seen[child.SessionID]
	if c == nil {
		c = &seenChild{rootID: rootID, agentID: child.ID, agentPath: child.Path, path: child.SessionPath, status: child.Status}
		h.seen[child.SessionID] = c
	}
	if update {
		c.status = child.Status
	}
}

// TeamsDir is where the delegated children of the sessions in
// sessionsDir keep their teams (provenance and child sessions).
func TeamsDir(sessionsDir string) string { return filepath.Join(sessionsDir, "teams") }

// teamsDir is where the host's sessions keep their teams.
func (h *Host) teamsDir() string { return TeamsDir(h.rt.SessionsDir) }

// Children are the delegated children's sessions of session parentID,
// from their teams' provenance on disk.
func (h *Host) Children(parentID string) ([]team.ChildSession, error) {
	cs, err := team.ChildSessions(h.teamsDir(), parentID)
	if err != nil {
		return cs, fmt.Errorf("list the child sessions of %s: %w", parentID, err)
	}
	return cs, nil
}

// FindChild finds the delegated child whose session is id: on disk
// through the teams' provenance, else among the children this host's
// sessions reported.
func (h *Host) FindChild(id string) (team.ChildSession, bool, error) {
	cs, found, err := team.FindChildSession(h.teamsDir(), id)
	if err != nil {
		return cs, true, fmt.Errorf("find child session %s: %w", id, err)
	}
	if found {
		return cs, true, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.seen[id]
	if !ok {
		return team.ChildSession{}, false, nil
	}
	return team.ChildSession{SessionID: id, Path: c.path, ParentSessionID: c.rootID, AgentID: c.agentID, AgentPath: c.agentPath, Status: c.status}, true, nil
}

// ChildStatus is the child's status as this host tells it: live from its
// team, else the last one its provenance recorded; a child recorded as
// pending, running or idle that no team of this host drives is
// disconnected (its octet stopped before it ended). live reports whether
// its agent may still write its session.
func (h *Host) ChildStatus(cs team.ChildSession) (status string, isLive bool) {
	h.mu.Lock()
	c := h.seen[cs.SessionID]
	h.mu.Unlock()
	if c != nil {
		return string(c.status), live(c.status)
	}
	if live(cs.Status) {
		return "disconnected", false
	}
	return string(cs.Status), false
}

// ListChildren lists the children of session parentID, each described
// like a session plus its parent, agent and status. A child whose file
// was deleted on its own is left out (its provenance stays).
func (h *Host) ListChildren(parentID string) ([]SessionInfo, error) {
	cs, err := h.Children(parentID)
	if err != nil && len(cs) == 0 {
		return nil, err
	}
	infos := map[string]session.Info{}
	listed := map[string]bool{}
	for _, c := range cs {
		if listed[c.Team] {
			continue
		}
		listed[c.Team] = true
		in, _ := session.List(c.Team) // a file that cannot be described is listed from provenance
		for _, i := range in {
			infos[i.ID] = i
		}
	}
	out := make([]SessionInfo, 0, len(cs))
	for _, c := range cs {
		if !childFileExists(c) {
			continue
		}
		st, _ := h.ChildStatus(c)
		row := SessionInfo{SessionID: c.SessionID, ParentSessionID: c.ParentSessionID, AgentID: c.AgentID, AgentPath: c.AgentPath, Status: st}
		if in, ok := infos[c.SessionID]; ok {
			row.Describe(in)
		}
		out = append(out, row)
	}
	return out, nil
}

// ChildView names one child of a session.
type ChildView struct {
	SessionID string `json:"sessionId"`
	AgentID   string `json:"agentId"`
	AgentPath string `json:"agentPath"`
	Status    string `json:"status"`
	Task      string `json:"task,omitempty"`
}

// ChildViews names the children of session parentID whose files are
// there (with their task, bounded); err is a failure to list some.
func (h *Host) ChildViews(parentID string) ([]ChildView, error) {
	cs, err := h.Children(parentID)
	views := make([]ChildView, 0, len(cs))
	for _, c := range cs {
		if !childFileExists(c) {
			continue
		}
		st, _ := h.ChildStatus(c)
		views = append(views, ChildView{SessionID: c.SessionID, AgentID: c.AgentID, AgentPath: c.AgentPath, Status: st, Task: Clip(c.Task, 200)})
	}
	return views, err
}

// childFileExists reports whether the child's session file is still there.
func childFileExists(c team.ChildSession) bool {
	_, err := os.Lstat(c.Path)
	return err == nil
}

// ChildRead is a read-only view of a child's session.
type ChildRead struct {
	Head       string
	Transcript TranscriptPage
	Usage      Usage
}

// ReadChild reads the child's session (read-only: its own agent is its
// only writer): its head, usage and the transcript page before beforeID
// (see PageTranscript).
func (h *Host) ReadChild(cs team.ChildSession, beforeID string, limit int) (ChildRead, error) {
	sess, err := session.Inspect(cs.Path)
	if err != nil {
		return ChildRead{}, fmt.Errorf("read child session %s: %w", cs.SessionID, err)
	}
	defer sess.Close()
	page, err := indexedPage(sess, cs.SessionID, beforeID, limit)
	if err != nil {
		return ChildRead{}, err
	}
	return ChildRead{Head: sess.Head(), Transcript: page, Usage: UsageOf(sess.Totals())}, nil
}

// ChildBusyError refuses to change the session of a child whose agent
// may still write it.
type ChildBusyError struct {
	Child team.ChildSession
	// Status is the child's status; What is the change refused
	// ("renamed", "deleted", "deleted with its parent").
	Status, What string
}

func (e *ChildBusyError) Error() string {
	return fmt.Sprintf("session %s is the delegated child %s of session %s and is %s: its own agent still writes it, so it cannot be %s",
		e.Child.SessionID, e.Child.AgentPath, e.Child.ParentSessionID, e.Status, e.What)
}

// RenameChild sets an ended child's title (checked with CheckTitle by
// the caller).
func (h *Host) RenameChild(cs team.ChildSession, title string) error {
	if st, live := h.ChildStatus(cs); live {
		return &ChildBusyError{Child: cs, Status: st, What: "renamed"}
	}
	sess, err := session.Open(cs.Path)
	if err != nil {
		return fmt.Errorf("rename child session %s: %w", cs.SessionID, err)
	}
	err = sess.SetTitle(title)
	if cerr := sess.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("rename child session %s: %w", cs.SessionID, err)
	}
	return nil
}

// DeleteChild removes an ended child's session file (its provenance and
// the parent's mirrored usage stay).
func (h *Host) DeleteChild(cs team.ChildSession) error {
	if st, live := h.ChildStatus(cs); live {
		return &ChildBusyError{Child: cs, Status: st, What: "deleted"}
	}
	if err := session.Remove(cs.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete child session %s: %w", cs.SessionID, err)
	}
	h.forget(cs)
	return nil
}

// forget drops what the host saw of the children cs.
func (h *Host) forget(cs ...team.ChildSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cs {
		delete(h.seen, c.SessionID)
	}
}

// DeletableParent returns the children of session parentID, refusing
// (ChildBusyError) when one of them is live: a parent goes with its
// children's sessions and provenance.
func (h *Host) DeletableParent(parentID string) ([]team.ChildSession, error) {
	cs, err := h.Children(parentID)
	if err != nil {
		return nil, fmt.Errorf("delete session %s: %w", parentID, err)
	}
	for _, c := range cs {
		if st, live := h.ChildStatus(c); live {
			return nil, &ChildBusyError{Child: c, Status: st, What: "deleted with its parent"}
		}
	}
	return cs, nil
}

// DeleteTeams removes the team directories of a deleted parent's
// children cs (their sessions and provenance).
func (h *Host) DeleteTeams(cs []team.ChildSession) error {
	done := map[string]bool{}
	var errs []error
	for _, c := range cs {
		if done[c.Team] || c.Team == "" {
			continue
		}
		done[c.Team] = true
		if err := os.RemoveAll(c.Team); err != nil {
			errs = append(errs, err)
		}
	}
	h.forget(cs...)
	return errors.Join(errs...)
}

// ForkChild forks a child's session: a new, ordinary session (no
// parent) whose transcript is the child's up to entryID. The fork acts
// with its parent's authority, as the child did: parentPolicy, the
// parent's live policy when it is open (nil: the policy its file
// recorded).
func (h *Host) ForkChild(ctx context.Context, cs team.ChildSession, entryID string, b Binding, parentPolicy *tools.Policy) (*Session, error) {
	src, err := session.Inspect(cs.Path)
	if err != nil {
		return nil, fmt.Errorf("read child session %s: %w", cs.SessionID, err)
	}
	hdr := src.Header()
	prefix, err := ForkPrefix(cs.SessionID, src.Branch(), entryID)
	_ = src.Close()
	if err != nil {
		return nil, err
	}
	policy := parentPolicy
	if policy == nil {
		policy = h.RecordedPolicy(cs.ParentSessionID)
	}
	s, err := h.ForkFrom(ctx, hdr, entryID, prefix, b, policy)
	if err != nil {
		return nil, fmt.Errorf("fork session %s at %s: %w", cs.SessionID, entryID, err)
	}
	return s, nil
}

// DiffChild returns what run runID of the child session at path changed
// ("" = its last run), read with this session's change store (a child's
// tools are its parent's).
func (s *Session) DiffChild(path, runID string) ([]changes.Change, string, error) {
	sess, err := session.Inspect(path)
	if err != nil {
		return nil, "", err
	}
	defer sess.Close()
	return Diff(sess, s.built.Changes, runID)
}

// Clip bounds s to n bytes on a rune boundary, marking a cut with "…".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
