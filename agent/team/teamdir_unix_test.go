//go:build unix

package team

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/octet-agent/octet/agent"
)

// TestChildSessionsFollowNoSwappedTeamDirectory: the team directory is
// replaced by a link to another directory after activation. A spawned
// child's session is created in the directory the team opened, and a
// child whose build fails has its session removed from there; nothing is
// created or removed at the link's target.
func TestChildSessionsFollowNoSwappedTeamDirectory(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	f.stalls(1)
	newAgent := f.cfg.NewAgent
	var built []string // where each child's session was while its agent was built
	fail := false
	f.cfg.NewAgent = func(cfg agent.Config) (*agent.Agent, func(), error) {
		built = append(built, cfg.Session.Path())
		if fail {
			return nil, nil, errors.New("no agent")
		}
		return newAgent(cfg)
	}
	tm := f.team()
	outside := t.TempDir()
	moved := tm.Dir() + ".moved"
	if err := os.Rename(tm.Dir(), moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, tm.Dir()); err != nil {
		t.Fatal(err)
	}
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "long"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusRunning)
	name := filepath.Base(built[0])
	if _, err := os.Lstat(filepath.Join(moved, name)); err != nil {
		t.Errorf("the child's session is not in the team directory: %v", err)
	}
	fail = true
	if _, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "fails"}); err == nil {
		t.Fatal("a spawn whose agent cannot be built succeeded")
	}
	if len(built) != 2 {
		t.Fatalf("agents built for %v", built)
	}
	if _, err := os.Lstat(filepath.Join(moved, filepath.Base(built[1]))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed child's session was not removed from the team directory: %v", err)
	}
	if ents, err := os.ReadDir(outside); err != nil || len(ents) != 0 {
		t.Errorf("the link's target holds %v (%v)", ents, err)
	}
}
