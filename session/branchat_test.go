package session

import (
	"slices"
	"testing"
)

// TestBranchBefore: BranchBefore gives the entries of the active branch
// just before each of its entries ("" the head's end), at most n, with
// the number of entries before them, kept or released alike; an entry
// of another branch or an unknown id has no place.
func TestBranchBefore(t *testing.T) {
	s, err := Create(t.TempDir(), Header{Cwd: "/ws"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ids []string
	for i := range 10 {
		e, err := s.AppendEntry(Entry{Type: EntryUser, Text: string(rune('a' + i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	if err := s.SetHead(ids[5]); err != nil { // ids[6:] leave the branch
		t.Fatal(err)
	}
	if _, err := s.AppendEntry(Entry{Type: EntryUser, Text: "fork"}); err != nil {
		t.Fatal(err)
	}
	branch := s.Branch()
	for _, released := range []bool{false, true} {
		if released {
			s.Release()
		}
		for end := range len(branch) + 1 {
			id := ""
			if end < len(branch) {
				id = branch[end].ID
			}
			for _, n := range []int{1, 3, 50} {
				page, older, ok, err := s.BranchBefore(id, n)
				start := max(0, end-n)
				if err != nil || !ok || older != start || !slices.EqualFunc(page, branch[start:end], sameEntry) {
					t.Errorf("released %v, before %q, %d: %d entries, %d older, %v %v; want %d, %d older", released, id, n, len(page), older, ok, err, end-start, start)
				}
			}
		}
		for _, id := range []string{ids[6], ids[9], "ffffffffffffffff"} {
			if _, _, ok, _ := s.BranchBefore(id, 5); ok {
				t.Errorf("%s, not on the branch, has a place", id)
			}
		}
	}
}

func sameEntry(a, b Entry) bool { return a.ID == b.ID && a.Text == b.Text }
