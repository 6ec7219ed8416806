package session

import "testing"

// TestBranchAt: BranchAt gives each entry of the active branch its
// position (the index of the branch Branch returns), "" the position past
// the head, and no position to an entry of another branch or an unknown
// id.
func TestBranchAt(t *testing.T) {
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
	other, err := s.AppendEntry(Entry{Type: EntryUser, Text: "fork"})
	if err != nil {
		t.Fatal(err)
	}
	branch := s.Branch()
	for want, e := range branch {
		if got, pos, ok := s.BranchAt(e.ID); !ok || pos != want || len(got) != len(branch) {
			t.Errorf("%s: position %d %v, want %d", e.ID, pos, ok, want)
		}
	}
	if _, pos, ok := s.BranchAt(""); !ok || pos != len(branch) || branch[pos-1].ID != other.ID {
		t.Errorf(`"": position %d %v`, pos, ok)
	}
	for _, id := range []string{ids[6], ids[9], "ffffffffffffffff"} {
		if _, _, ok := s.BranchAt(id); ok {
			t.Errorf("%s, not on the branch, has a position", id)
		}
	}
}
