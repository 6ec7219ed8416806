package changes

import (
	"fmt"
	"strings"
	"testing"
)

// TestStoreExpiresWholeCheckpoints: past the cap, blobs no checkpoint
// needs go first; then the oldest checkpoint goes whole — every blob of
// it that no newer checkpoint needs, however recently used — and says so
// (Expired), while a blob it shares with a newer one stays.
func TestStoreExpiresWholeCheckpoints(t *testing.T) {
	s, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	s.SetMaxBytes(140) // expiry goes down to 126
	blob := func(name string) *Image {
		t.Helper()
		sum, _, err := s.Put([]byte(fmt.Sprintf("%-8s%s", name, strings.Repeat("x", 22)))) // 30 bytes
		if err != nil {
			t.Fatal(err)
		}
		return &Image{SHA256: sum, Size: 30}
	}
	change := func(path string, before, after *Image) Record {
		return Record{Change: Change{Path: path, Kind: Modify}, Before: before, After: after}
	}
	has := func(img *Image) bool { _, err := s.Get(img.SHA256); return err == nil }

	a1, shared := blob("a1"), blob("shared")
	if err := s.Commit("A", []Record{change("a", a1, shared)}); err != nil {
		t.Fatal(err)
	}
	u := blob("unref") // named by no checkpoint (a snapshot's unchanged file)
	b1 := blob("b1")
	if err := s.Commit("B", []Record{change("b", shared, b1)}); err != nil {
		t.Fatal(err)
	}
	// 120 bytes, then 150 with c1: the unreferenced blob goes first.
	blob("a1") // reused: the most recently used blob now
	c1 := blob("c1")
	if has(u) {
		t.Error("the blob no checkpoint needs was kept")
	}
	if !has(a1) || !has(shared) || !has(b1) || !has(c1) {
		t.Fatal("a checkpoint's blob expired before the unreferenced one")
	}
	if _, ok := s.Expired("A"); ok {
		t.Error("checkpoint A expired early")
	}
	if err := s.Commit("C", []Record{change("c", nil, c1)}); err != nil {
		t.Fatal(err)
	}
	// Over the cap again: checkpoint A, the oldest, goes whole.
	d1 := blob("d1")
	if err := s.Commit("D", []Record{change("d", nil, d1)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Expired("A"); !ok {
		t.Error("checkpoint A did not expire")
	}
	if has(a1) {
		t.Error("checkpoint A's own blob was kept (it was the most recently used)")
	}
	if !has(shared) || !has(b1) || !has(c1) || !has(d1) {
		t.Error("a blob a live checkpoint needs expired")
	}
	for _, id := range []string{"B", "C", "D"} {
		if _, ok := s.Expired(id); ok {
			t.Errorf("checkpoint %s expired", id)
		}
	}
}
