package host

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// RewindParams are what a rewind asks for.
type RewindParams struct {
	SessionID string `json:"sessionId"`
	// EntryID is the entry whose state is restored; it may be on another
	// branch (rewinding a conversation rewind).
	EntryID string `json:"entryId"`
	// Files restores the files octet changed; Conversation moves the head.
	Files        bool `json:"files"`
	Conversation bool `json:"conversation"`
	// DryRun answers the changes and applies nothing.
	DryRun bool `json:"dryRun"`
	// Force lists the paths whose conflicts are overwritten.
	Force []string `json:"force"`
	// Paths, when not empty, limits a files rewind to these paths (as
	// the changes name them): an editor's per-file revert.
	Paths []string `json:"paths"`
}

// RewindChange is one path of a rewind.
type RewindChange struct {
	changes.Change
	// Conflict says why the path is (or would be) left as it is.
	Conflict string `json:"conflict,omitempty"`
}

// RewindResult is what a rewind did (or, dry, would do).
type RewindResult struct {
	Changes []RewindChange `json:"changes"`
	// Applied reports that the rewind was carried out: every change
	// without a conflict was made and, with conversation, the head moved.
	Applied bool `json:"applied"`
	// RewindEntryID is the ledger entry recording the rewind's file
	// changes (omitted when no file changed).
	RewindEntryID string `json:"rewindEntryId,omitempty"`
	// Head is the active head after the rewind.
	Head string `json:"head"`
	// Expired lists the entries between the two states whose checkpoint
	// expired (the store's cap): their changes can no longer be rewound,
	// and each path that needs one of their images is a conflict.
	Expired []string `json:"expired,omitempty"`
}

// Rewind rewinds the session with [Rewind], one rewind at a time; the
// caller has no run of the session active.
func (s *Session) Rewind(ctx context.Context, p RewindParams) (RewindResult, error) {
	s.rewindMu.Lock()
	defer s.rewindMu.Unlock()
	return Rewind(ctx, s.sess, restoreConfig(s.Cwd(), s.docs, s.built.Changes), p)
}

// RewindLedger rewinds sess, a session file the caller opened for
// writing without an agent (the CLI), with rec, the recorder of its
// workspace's change store: [Rewind] with the restore configuration an
// open session uses, without an editor's documents.
func RewindLedger(ctx context.Context, sess *session.Session, rec *changes.Recorder, p RewindParams) (RewindResult, error) {
	return Rewind(ctx, sess, restoreConfig(sess.Header().Cwd, nil, rec), p)
}

// Rewind rewinds sess to entry p.EntryID: its files (p.Files) and its
// conversation (p.Conversation), or, with p.DryRun, only answers what
// would change. cfg restores the paths: its Root is the workspace, its
// Changes the recorder whose store holds the images, its Documents the
// editor's overlay (nil: none).
//
// With files, the plan (every path's change, its images kept in the
// store) is appended to the ledger as a rewind entry after the head
// before any file is touched; then the paths are restored; then, with
// conversation, the head moves to the entry. A crash in between leaves
// the plan in the ledger: a later rewind to the same entry completes it,
// one to the entry before it undoes what was done (a path still in its
// prior state is expected, not a conflict). The caller runs one rewind of
// a session at a time, with no run active.
func Rewind(ctx context.Context, sess *session.Session, cfg *tools.Config, p RewindParams) (RewindResult, error) {
	target, err := branchTo(sess, p.EntryID)
	if err != nil {
		return RewindResult{}, err
	}
	res := RewindResult{Changes: []RewindChange{}, Head: sess.Head()}
	var preps []tools.Restoration
	if p.Files {
		if preps, err = prepareRewind(sess, cfg, target, p); err != nil {
			return RewindResult{}, err
		}
		if !p.DryRun { // the staged images are pinned until the checkpoint names them
			defer cfg.Changes.Release(plannedRecords(preps)...)
		}
		res.Expired = expiredEntries(sess, cfg, target)
		for _, rs := range preps {
			res.Changes = append(res.Changes, RewindChange{Change: rs.Record.Change, Conflict: rs.Conflict})
		}
	}
	if p.DryRun {
		return res, nil
	}
	res.Applied = true
	id := sess.Header().ID
	if recs := plannedRecords(preps); len(recs) > 0 {
		cp := changes.CheckpointID(id, fmt.Sprintf("rewind-%d", time.Now().UnixNano()))
		if cfg.Changes != nil && cfg.Changes.Store != nil {
			if err := cfg.Changes.Store.Commit(cp, recs); err != nil {
				return RewindResult{}, fmt.Errorf("record the rewind's checkpoint for session %s (nothing was changed): %w", id, err)
			}
		}
		e, err := sess.AppendEntry(session.Entry{
			Type: session.EntryRewind,
			Text: fmt.Sprintf("rewind of %d file(s) to entry %s", len(recs), p.EntryID),
			Result: &session.ToolResult{Tool: "rewind", Details: map[string]any{
				changes.DetailsKey: recs, "entryId": p.EntryID, checkpointKey: cp,
			}},
		})
		if err != nil {
			return RewindResult{}, fmt.Errorf("record the rewind plan in session %s (nothing was changed): %w", id, err)
		}
		res.RewindEntryID = e.ID
		for _, i := range applyOrder(preps) {
			if err := cfg.ApplyRestore(ctx, preps[i]); err != nil {
				res.Changes[i].Conflict = err.Error()
				res.Applied = false
			}
		}
	}
	if p.Conversation && res.Applied {
		if err := sess.SetHead(p.EntryID); err != nil {
			return RewindResult{}, fmt.Errorf("move the head of session %s to %s (the files were rewound): %w", id, p.EntryID, err)
		}
	}
	res.Head = sess.Head()
	return res, nil
}

// prepareRewind plans the paths to restore to their state at the last
// entry of target and prepares each (staging its images unless dry).
func prepareRewind(sess *session.Session, cfg *tools.Config, target []session.Entry, p RewindParams) ([]tools.Restoration, error) {
	if fi, err := os.Stat(cfg.Root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("the workspace of session %s, %s, is not there (moved or removed?): a files rewind restores files in it; put it back, then rewind again (nothing was changed)", sess.Header().ID, cfg.Root)
	}
	active, err := sess.LoadBranch()
	if err != nil {
		return nil, err
	}
	common := 0
	for common < len(active) && common < len(target) && active[common].ID == target[common].ID {
		common++
	}
	as, err := branchSteps(sess, active, common)
	if err != nil {
		return nil, err
	}
	ts, err := branchSteps(sess, target, common)
	if err != nil {
		return nil, err
	}
	plan := changes.PlanRewind(as, ts, common)
	if err := knownPaths(plan, p); err != nil {
		return nil, err
	}
	var out []tools.Restoration
	for _, r := range plan {
		if len(p.Paths) > 0 && !slices.Contains(p.Paths, r.Path) {
			continue
		}
		rs, needed, err := cfg.PrepareRestore(r, slices.Contains(p.Force, r.Path), !p.DryRun)
		if err != nil {
			if !p.DryRun {
				cfg.Changes.Release(plannedRecords(out)...)
			}
			return nil, fmt.Errorf("rewind %s (nothing was changed): %w", r.Path, err)
		}
		if needed {
			out = append(out, rs)
		}
	}
	return cfg.SettlePlan(out, !p.DryRun), nil
}

// knownPaths refuses a rewind limited to paths (p.Paths) one of which
// octet did not change between the two states: answering that nothing
// needed restoring would tell an editor's revert it was done.
func knownPaths(plan []changes.Restore, p RewindParams) error {
	for _, path := range p.Paths {
		if !slices.ContainsFunc(plan, func(r changes.Restore) bool { return r.Path == path }) {
			return inputErrorf("paths: octet did not change %q after entry %s (on this branch or the entry's): name paths as the changes of octet/session/diff or a tool_finished do", path, p.EntryID)
		}
	}
	return nil
}

// restoreConfig is the tools configuration a rewind restores paths with:
// the workspace, its change store rec and the editor's overlay docs (nil:
// none). Paths come from the ledger, so an external one octet changed may
// be restored.
func restoreConfig(workspace string, docs tools.Documents, rec *changes.Recorder) *tools.Config {
	return &tools.Config{Root: workspace, AllowExternalPaths: true, Documents: docs, Changes: rec}
}

// checkpointKey holds a rewind entry's checkpoint id in its details (a
// tool result's is changes.CheckpointID of its call).
const checkpointKey = "checkpoint"

// expiredEntries returns the entries after the branch point of the active
// branch and target whose checkpoint expired.
func expiredEntries(sess *session.Session, cfg *tools.Config, target []session.Entry) []string {
	if cfg.Changes == nil || cfg.Changes.Store == nil {
		return nil
	}
	active := sess.Branch()
	common := 0
	for common < len(active) && common < len(target) && active[common].ID == target[common].ID {
		common++
	}
	var out []string
	for _, e := range append(slices.Clone(active[common:]), target[common:]...) {
		if e.Result == nil || e.Result.Details[changes.DetailsKey] == nil || slices.Contains(out, e.ID) {
			continue
		}
		cp, _ := e.Result.Details[checkpointKey].(string)
		if cp == "" {
			cp = changes.CheckpointID(sess.Header().ID, e.Result.CallID)
		}
		if _, ok := cfg.Changes.Store.Expired(cp); ok {
			out = append(out, e.ID)
		}
	}
	return out
}

// applyOrder returns the indexes of the restorations of preps (sorted by
// path) to apply, in order: every one but the removals of directories,
// then those, children before parents (a directory a command created is
// emptied first).
func applyOrder(preps []tools.Restoration) []int {
	var out, rmdirs []int
	for i, rs := range preps {
		switch {
		case rs.Conflict != "":
		case rs.RemovesDir():
			rmdirs = append(rmdirs, i)
		default:
			out = append(out, i)
		}
	}
	slices.Reverse(rmdirs)
	return append(out, rmdirs...)
}

// plannedRecords returns the records of the paths a rewind restores.
func plannedRecords(preps []tools.Restoration) []changes.Record {
	var out []changes.Record
	for _, rs := range preps {
		if rs.Conflict == "" {
			out = append(out, rs.Record)
		}
	}
	return out
}

// Steps returns the changes each entry of branch (session sessionID's)
// recorded, as a rewind plans with them.
func Steps(sessionID string, branch []session.Entry) ([]changes.Step, error) {
	out := make([]changes.Step, len(branch))
	for i, e := range branch {
		if e.Result == nil || (e.Type != session.EntryToolResult && e.Type != session.EntryRewind) {
			continue
		}
		recs, err := changes.FromDetails(e.Result.Details)
		if err != nil {
			return nil, fmt.Errorf("session %s entry %s: %w", sessionID, e.ID, err)
		}
		intended, _ := e.Result.Details[changes.IntentKey].(bool)
		out[i] = changes.Step{Records: recs, Rewind: e.Type == session.EntryRewind || intended}
	}
	return out, nil
}

// branchSteps returns the steps a rewind plans with for branch: its
// entries' and, past the first from entries, its delegated children's.
func branchSteps(sess *session.Session, branch []session.Entry, from int) ([]changes.Step, error) {
	steps, err := Steps(sess.Header().ID, branch)
	if err != nil {
		return nil, err
	}
	return withChildSteps(sess, branch, steps, from)
}

// branchTo returns the entries from the root to entryID, on any branch.
func branchTo(sess *session.Session, entryID string) ([]session.Entry, error) {
	var rev []session.Entry
	for id := entryID; id != ""; {
		e, ok := sess.Entry(id)
		if !ok {
			if id == entryID {
				return nil, inputErrorf("no entry %q in session %s: use an entry id from octet/session/transcript", entryID, sess.Header().ID)
			}
			return nil, fmt.Errorf("session %s: entry %s names a missing parent %s", sess.Header().ID, rev[len(rev)-1].ID, id)
		}
		rev = append(rev, e)
		if len(rev) > session.MaxRecords {
			return nil, fmt.Errorf("session %s: the parents of entry %s form a cycle", sess.Header().ID, entryID)
		}
		id = e.Parent
	}
	slices.Reverse(rev)
	return rev, nil
}
