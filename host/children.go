package host

import (
	"path/filepath"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/session"
)

// teamsDir is where the product keeps its teams (cmd/octet: beside the
// session files).
func (h *Host) teamsDir() string { return filepath.Join(h.rt.SessionsDir, "teams") }

// ChildSessions are the delegated children's sessions of session
// parentID, from their teams' provenance on disk.
func (h *Host) ChildSessions(parentID string) ([]team.ChildSession, error) {
	return team.ChildSessions(h.teamsDir(), parentID)
}

// FindChildSession finds the delegated child whose session is id.
func (h *Host) FindChildSession(id string) (team.ChildSession, bool, error) {
	return team.FindChildSession(h.teamsDir(), id)
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
