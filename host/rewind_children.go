package host

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/session"
)

// withChildSteps returns the steps of branch (session sess's, as Steps
// made them) with, after the last entry of each run from index from on,
// the steps of the delegated children that run started and of their own
// children, to any depth: a rewind of those entries undoes what the
// children changed too. A child's steps follow its run's last entry (the
// run ends after its children); a path both a child and the run changed
// is expected in the state the later of the two left, so a concurrent
// order the ledgers cannot tell apart is a conflict, never a guess.
func withChildSteps(sess *session.Session, branch []session.Entry, steps []changes.Step, from int) ([]changes.Step, error) {
	last := map[string]int{}
	for i := from; i < len(branch); i++ {
		if r := branch[i].RunID; r != "" {
			last[r] = i
		}
	}
	if len(last) == 0 {
		return steps, nil
	}
	teams := teamsDirOf(sess.Path())
	// A team whose journal cannot be read (damaged, of any session) is
	// left out: its children's changes stay as they are, as before.
	kids, _ := team.ChildSessions(teams, sess.Header().ID)
	after := map[int][]changes.Step{}
	for _, c := range kids {
		i, ok := last[c.RunID]
		if !ok {
			continue
		}
		cs, err := descendantSteps(teams, c, 1)
		if err != nil {
			return nil, err
		}
		after[i] = append(after[i], cs...)
	}
	if len(after) == 0 {
		return steps, nil
	}
	out := make([]changes.Step, 0, len(steps)+len(kids))
	for i, st := range steps {
		out = append(out, st)
		out = append(out, after[i]...)
	}
	return out, nil
}

// descendantSteps returns the steps of child c's active branch, then
// those of the children each of its runs started, to any depth.
func descendantSteps(teams string, c team.ChildSession, depth int) ([]changes.Step, error) {
	if depth > team.MaxDepth {
		return nil, nil
	}
	out, err := childBranchSteps(c)
	if err != nil {
		return nil, err
	}
	kids, _ := team.ChildSessions(teams, c.SessionID) // as in withChildSteps
	for _, k := range kids {
		ks, err := descendantSteps(teams, k, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, ks...)
	}
	return out, nil
}

// childBranchSteps reads child c's session (read-only) and returns the
// steps of its active branch; a child whose file is gone has none.
func childBranchSteps(c team.ChildSession) ([]changes.Step, error) {
	s, err := session.Inspect(c.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the session of delegated child %s (%s): %w", c.AgentPath, c.SessionID, err)
	}
	defer s.Close()
	branch, err := s.LoadBranch()
	if err != nil {
		return nil, fmt.Errorf("read the session of delegated child %s (%s): %w", c.AgentPath, c.SessionID, err)
	}
	return Steps(c.SessionID, branch)
}

// teamsDirOf returns the teams directory of the session file at path: a
// root session's sessions directory's, or, for a child session (kept in
// its team's directory), the teams directory holding that team.
func teamsDirOf(path string) string {
	dir := filepath.Dir(path)
	if up := filepath.Dir(dir); filepath.Base(up) == "teams" {
		return up
	}
	return TeamsDir(dir)
}
