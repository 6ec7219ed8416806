package server

import (
	"context"
	"fmt"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/session"
)

// differ is implemented by session handles that can answer
// octet/session/diff.
type differ interface {
	// Diff returns the cumulative changes of run runID ("" = the last run
	// on the active branch) and the run it resolved to ("" when the
	// session has no run).
	Diff(runID string) (changes []changes.Change, run string, err error)
}

// diffResult is the answer to octet/session/diff.
type diffResult struct {
	// RunID is the run the changes are of (the last run when none was
	// named); omitted when the session has no run yet.
	RunID   string           `json:"runId,omitempty"`
	Changes []changes.Change `json:"changes"`
}

// sessionDiff handles octet/session/diff: what octet's tools changed in
// the workspace in one run, one entry per path.
func (s *Server) sessionDiff(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		RunID     string `json:"runId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if cs, ok, err := s.asChild(p.SessionID); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return s.diffChild(ctx, cs, p.RunID)
	}
	ss, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	d, ok := ss.handle.(differ)
	if !ok {
		return nil, jsonrpc2.NewError(jsonrpc2.InternalError, "this server's sessions cannot report their changes")
	}
	// Reading the images may take a moment: let later messages in.
	jsonrpc2.Async(ctx)
	chs, run, err := d.Diff(p.RunID)
	if err != nil {
		return nil, err
	}
	if chs == nil {
		chs = []changes.Change{}
	}
	return rawResult(diffResult{RunID: run, Changes: chs})
}

// Diff implements differ with [Diff].
func (s *runtimeSession) Diff(runID string) ([]changes.Change, string, error) {
	return Diff(s.sess, s.built.Changes, runID)
}

// Diff returns what octet's tools changed in run runID of sess ("" = the
// last run on the active branch), one change per path, and the run it
// resolved to ("" when the session has no run): the changes recorded in
// the run's tool results on the active branch, folded per path with the
// images in rec's store.
func Diff(sess *session.Session, rec *changes.Recorder, runID string) ([]changes.Change, string, error) {
	branch := sess.Branch()
	id := sess.Header().ID
	if runID == "" {
		runID = lastRun(branch)
		if runID == "" {
			return nil, "", nil
		}
	}
	var recs []changes.Record
	found := false
	for _, e := range branch {
		if e.RunID != runID {
			continue
		}
		found = true
		if e.Type != session.EntryToolResult || e.Result == nil {
			continue
		}
		rs, err := changes.FromDetails(e.Result.Details)
		if err != nil {
			return nil, "", fmt.Errorf("session %s entry %s: %w", id, e.ID, err)
		}
		recs = append(recs, rs...)
	}
	if !found {
		return nil, "", invalidParams("no run %q on the active branch of session %s: give a runId from its transcript, or none for the last run", runID, id)
	}
	return rec.Cumulative(recs), runID, nil
}

// lastRun returns the run id of the newest entry of branch that has one.
func lastRun(branch []session.Entry) string {
	for i := len(branch) - 1; i >= 0; i-- {
		if id := branch[i].RunID; id != "" {
			return id
		}
	}
	return ""
}
