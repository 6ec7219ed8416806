package team

import (
	"context"
	"os"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
)

// TestChildSessionsCatalog: a team's children are found again from its
// provenance (by owner and by session id), with their last status.
func TestChildSessionsCatalog(t *testing.T) {
	f := newFixture(t, fixtureOpt{service: &ProductService})
	f.childSrv.Enqueue(providertest.Text("done"))
	tm := f.team()
	s, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "CATALOG-TASK"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, s.ID, StatusIdle)
	owner := f.root.Session().Header().ID
	cs, err := ChildSessions(f.cfg.Dir, owner)
	if err != nil || len(cs) != 1 {
		t.Fatalf("children %+v (%v)", cs, err)
	}
	c := cs[0]
	if c.SessionID != s.SessionID || c.ParentSessionID != owner || c.AgentPath != "root/worker1" || c.Status != StatusIdle || c.Shutdown || c.Task != "CATALOG-TASK" {
		t.Fatalf("child %+v", c)
	}
	if _, err := os.Stat(c.Path); err != nil {
		t.Fatalf("child path: %v", err)
	}
	tm.Shutdown(context.Background(), "run_test", SettleTimeout)
	got, ok, err := FindChildSession(f.cfg.Dir, s.SessionID)
	if err != nil || !ok || got.Status != StatusCompleted || !got.Shutdown {
		t.Fatalf("find after shutdown %+v %v %v", got, ok, err)
	}
	if cs, _ := ChildSessions(f.cfg.Dir, "someone-else"); len(cs) != 0 {
		t.Fatalf("another owner's children %+v", cs)
	}
	for _, id := range []string{"", "../x", ".hidden", "nope"} {
		if _, ok, _ := FindChildSession(f.cfg.Dir, id); ok {
			t.Fatalf("found %q", id)
		}
	}
}
