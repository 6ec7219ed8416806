package team

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/octet-agent/octet/session"
)

// Reconcile makes the root session count what the children of its
// earlier teams recorded and the root does not count yet: a team whose
// process was killed (or whose run end could not be written) never
// mirrored its children. For each child of the root's teams under dir
// (Config.Dir) it compares the child session's own known usage with the
// delegated usage the root holds for it and appends the difference, as
// one delegated_usage record, marked uncertain when the child's usage is
// (a request in flight when it stopped, an unreadable session, a session
// removed before it was mirrored). Mirrored amounts only ever grow to
// the child's own, so nothing is counted twice, however often Reconcile
// runs. It does nothing unless root is a writable session that found no
// other live writer when it was opened (session.Session.Alone): a root
// driven by another process has live teams, which mirror their own
// children. A team journal damaged past its first line still counts its
// children: those it names before the damage and the session files in
// its directory it does not name (logged to log). It returns the records
// appended, and an error only when they could not be appended.
func Reconcile(root *session.Session, dir string, log *slog.Logger) (int, error) {
	if !root.Alone() {
		return 0, nil
	}
	children, err := ChildSessions(dir, root.Header().ID)
	if err != nil {
		// A damaged journal may have lost spawn records: the session
		// files it does not name are children too.
		children = append(children, unnamedSessions(dir, root.Header().ID, children)...)
		if log != nil {
			log.Warn("delegation: a team journal could not be read whole; its children are reconciled from the session files in its directory", "session", root.Header().ID, "err", err)
		}
	}
	if len(children) == 0 {
		return 0, nil
	}
	mirrored := make(map[string]mirror)
	for _, d := range root.Delegated() {
		m := mirrored[d.ChildSession]
		m.known = addUsage(m.known, d.Usage, 1)
		m.uncertain = m.uncertain || d.Uncertain
		mirrored[d.ChildSession] = m
	}
	var recs []session.Record
	for _, c := range children {
		if d, ok := unmirrored(c, mirrored[c.SessionID]); ok {
			recs = append(recs, session.DelegatedRecord(d))
		}
	}
	if len(recs) == 0 {
		return 0, nil
	}
	if err := root.Append(recs...); err != nil {
		return 0, fmt.Errorf("delegation: mirror the usage of %d child session(s) into session %s: %w", len(recs), root.Header().ID, err)
	}
	return len(recs), nil
}

// mirror is what a root holds for one child: the sum of its mirrored
// known usage, and whether any of it was marked uncertain.
type mirror struct {
	known     session.Usage
	uncertain bool
}

// unmirrored is the delegated-usage record child c still needs in its
// root, which holds m for it; ok is false when it needs none (or when c
// is live: a team still runs it).
func unmirrored(c ChildSession, m mirror) (session.DelegatedUsage, bool) {
	var own session.Usage
	uncertain := false
	s, err := session.Inspect(c.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Removed: what it used is unknown unless it was mirrored.
		uncertain = m == mirror{}
	case err != nil:
		uncertain = true
	default:
		live, _ := s.WriterLive()
		t := s.Totals()
		s.Close()
		if live {
			return session.DelegatedUsage{}, false
		}
		own, uncertain = t.Own, t.Uncertain
	}
	delta := addUsage(own, m.known, -1)
	if delta == (session.Usage{}) && (!uncertain || m.uncertain) {
		return session.DelegatedUsage{}, false
	}
	delta.RunID, delta.Operation = c.RunID, "delegated"
	return session.DelegatedUsage{ChildSession: c.SessionID, Usage: delta, Uncertain: uncertain}, true
}

// addUsage returns a + sign·b over the counted fields (no field goes
// below zero), without a's or b's labels.
func addUsage(a, b session.Usage, sign int64) session.Usage {
	f := func(x, y int64) int64 { return max(0, x+sign*y) }
	return session.Usage{
		Input: f(a.Input, b.Input), CachedInput: f(a.CachedInput, b.CachedInput),
		Output: f(a.Output, b.Output), Reasoning: f(a.Reasoning, b.Reasoning),
		CostPicodollars: f(a.CostPicodollars, b.CostPicodollars),
	}
}
