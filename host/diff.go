package host

import (
	"fmt"
	"unicode/utf8"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/session"
)

// Diff returns what octet's tools changed in run runID of sess ("" = the
// last run on the active branch), one change per path, and the run it
// resolved to ("" when the session has no run): the changes recorded in
// the run's tool results on the active branch, folded per path with the
// images in rec's store.
func Diff(sess *session.Session, rec *changes.Recorder, runID string) ([]changes.Change, string, error) {
	branch, err := sess.LoadBranch()
	if err != nil {
		return nil, "", err
	}
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
		return nil, "", inputErrorf("no run %q on the active branch of session %s: give a runId from its transcript, or none for the last run", runID, id)
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

// FileTexts returns the whole text a recorded change of the session
// replaced and the one it left (nil for an absent side), read back from
// the change store, for a dialect that shows a change as whole files; ok
// is false when a side was not kept, is a directory, is not UTF-8 text
// or is over maxBytes.
func (s *Session) FileTexts(rec changes.Record, maxBytes int64) (old, updated *string, ok bool) {
	side := func(img *changes.Image) (*string, bool) {
		if img == nil {
			return nil, true
		}
		if img.Dir || img.Unstored || img.Size > maxBytes || s.built.Changes == nil {
			return nil, false
		}
		b, err := s.built.Changes.Content(changes.StateOf(img))
		if err != nil || !utf8.Valid(b) {
			return nil, false
		}
		t := string(b)
		return &t, true
	}
	old, okOld := side(rec.Before)
	updated, okNew := side(rec.After)
	return old, updated, okOld && okNew && (old != nil || updated != nil)
}
