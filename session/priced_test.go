package session

import (
	"testing"
)

// TestUnpricedUsage: a usage record priced at 0 is priced; one without a
// price (and a record from before the mark, without a cost) is counted
// unpriced, by a reader, a reopening writer and the listing alike; the
// fast decoder reads the mark.
func TestUnpricedUsage(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, Header{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	free := Usage{RunID: "r", Model: "free", Input: 10, Output: 5, Priced: true}
	none := Usage{RunID: "r", Model: "local", Input: 10, Output: 5}
	paid := Usage{RunID: "r", Model: "old", Input: 10, Output: 5, CostPicodollars: 7}
	for _, u := range []Usage{free, none, paid} {
		if err := s.Append(UsageRecord(u)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, got Totals) {
		t.Helper()
		if got.Unpriced != 1 || got.Requests != 3 {
			t.Errorf("%s: unpriced %d of %d, want 1 of 3", what, got.Unpriced, got.Requests)
		}
	}
	check("writer", s.Totals())
	path := s.Path()
	s.Close()
	r, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	check("reader", r.Totals())
	r.Close()
	infos, err := List(dir)
	if err != nil || len(infos) != 1 || infos[0].UnpricedRecords != 1 || infos[0].UsageRecords != 3 {
		t.Errorf("List = %+v, %v", infos, err)
	}
	line := appendUsage([]byte(`{"kind":"usage"`), &free)
	var u Usage
	if !decodeUsageFast(append(line, '}'), &u, nil) || !u.Priced {
		t.Errorf("the fast decoder refused or lost the mark: %s", line)
	}
}
