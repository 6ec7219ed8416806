package team

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestReconcileMirrorsOnlyWhatIsMissing: a team whose run end was
// mirrored into the root needs nothing more; a team whose mirror never
// reached the root (its process killed: here its records are dropped)
// is reconciled from its children's ledgers once they are no longer
// live, exactly once however often Reconcile runs; and a root another
// writer holds is left alone.
func TestReconcileMirrorsOnlyWhatIsMissing(t *testing.T) {
	f := newFixture(t, fixtureOpt{service: &ProductService})
	use := provider.Usage{InputTokens: 1_000, OutputTokens: 10}
	f.childSrv.Enqueue(
		providertest.Text("a done").WithUsage(use).ForRequestContaining("CHILD-A"),
		providertest.Text("b done").WithUsage(use).ForRequestContaining("CHILD-B"),
	)
	root := f.root.Session()
	dir := f.cfg.Dir

	// Team one ends normally: its mirror records reach the root.
	one := f.team()
	a, err := one.Spawn(SpawnRequest{Parent: "root", Task: "CHILD-A"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, one, a.ID, StatusIdle)
	if err := root.Append(one.Shutdown(context.Background(), "run_one", 5*time.Second)...); err != nil {
		t.Fatal(err)
	}
	if n, err := Reconcile(root, dir, nil); n != 0 || err != nil {
		t.Fatalf("reconcile after a mirrored team: %d records, %v", n, err)
	}

	// Team two's child settles, but its mirror is lost.
	two := f.team()
	b, err := two.Spawn(SpawnRequest{Parent: "root", Task: "CHILD-B"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, two, b.ID, StatusIdle)
	if n, err := Reconcile(root, dir, nil); n != 0 || err != nil {
		t.Fatalf("reconcile while the child is live: %d records, %v", n, err)
	}
	two.Shutdown(context.Background(), "run_two", 5*time.Second) // records dropped
	before := root.Totals()
	other, err := session.Open(root.Path())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Reconcile(other, dir, nil); n != 0 || err != nil || other.Alone() {
		t.Fatalf("reconcile through a second writer: %d records, %v (alone %v)", n, err, other.Alone())
	}
	other.Close()
	for i := range 2 {
		n, err := Reconcile(root, dir, nil)
		if err != nil || n != map[int]int{0: 1, 1: 0}[i] {
			t.Fatalf("reconcile %d: %d records, %v", i+1, n, err)
		}
	}
	after := root.Totals()
	if got, want := after.Delegated.Input-before.Delegated.Input, use.InputTokens; got != want {
		t.Fatalf("reconciled input %d, want child B's %d", got, want)
	}
	if after.Delegated.Input != 2*use.InputTokens || after.Delegated.CostPicodollars != 2*costOf(t, use) || after.Uncertain {
		t.Fatalf("root totals %+v, want both children counted once, known", after)
	}
}

// TestReconcileDamagedJournal: a team whose mirror never reached the
// root and whose journal has a damaged line still has every child
// reconciled: the ones its journal names before the damage, and the
// session files in its directory it does not name. The whole team was
// skipped (only logged): its children's usage never counted in the
// root, which did not even become uncertain.
func TestReconcileDamagedJournal(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	use := provider.Usage{InputTokens: 1_000, OutputTokens: 10}
	f.childSrv.Enqueue(
		providertest.Text("a done").WithUsage(use).ForRequestContaining("CHILD-A"),
		providertest.Text("b done").WithUsage(use).ForRequestContaining("CHILD-B"),
	)
	root := f.root.Session()
	tm := f.team()
	a, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "CHILD-A"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tm.Spawn(SpawnRequest{Parent: "root", Task: "CHILD-B"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, tm, a.ID, StatusCompleted)
	waitStatus(t, tm, b.ID, StatusCompleted)
	tm.Shutdown(context.Background(), "run_x", 5*time.Second) // records dropped
	journal := filepath.Join(tm.Dir(), JournalName)
	data, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	damaged := false
	for i, l := range lines {
		if bytes.Contains(l, []byte(`"agent_spawned"`)) && bytes.Contains(l, []byte(b.SessionID)) {
			lines[i], damaged = []byte("{damaged\n"), true
		}
	}
	if !damaged {
		t.Fatal("no spawn record of the second child")
	}
	if err := os.WriteFile(journal, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := Reconcile(root, f.cfg.Dir, nil); n != 2 || err != nil {
		t.Fatalf("reconcile of a damaged team: %d records, %v; want 2", n, err)
	}
	if got := root.Totals(); got.Delegated.Input != 2*use.InputTokens || got.Delegated.CostPicodollars != 2*costOf(t, use) || got.Uncertain {
		t.Fatalf("root totals %+v, want both children counted once, known", got)
	}
	if n, err := Reconcile(root, f.cfg.Dir, nil); n != 0 || err != nil {
		t.Fatalf("second reconcile: %d records, %v", n, err)
	}
}
