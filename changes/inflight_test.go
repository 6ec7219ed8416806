package changes

import (
	"strings"
	"testing"
)

// TestStagedImagesSurviveExpiry: a change's images are needed from the
// moment Stage keeps them, before any checkpoint names them. Writing the
// new content must not expire the prior one it just kept, nor may later
// writes expire images an intent names; released and unnamed, they are
// the first to go.
func TestStagedImagesSurviveExpiry(t *testing.T) {
	s, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	s.SetMaxBytes(1500)
	r := &Recorder{Store: s}
	has := func(img *Image) bool { _, err := s.Get(img.SHA256); return err == nil }
	rec, ok, err := r.Stage("a.txt", &File{Data: []byte(strings.Repeat("a", 1000))}, &File{Data: []byte(strings.Repeat("A", 1000))})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if !has(rec.Before) || !has(rec.After) {
		t.Fatal("writing the new content expired the prior content Stage had just kept")
	}
	if err := s.WriteIntent("call-1", Intent{Records: []Record{rec}}); err != nil {
		t.Fatal(err)
	}
	r.Release(rec)
	if _, _, err := s.Put([]byte(strings.Repeat("x", 1000))); err != nil {
		t.Fatal(err)
	}
	if !has(rec.Before) || !has(rec.After) {
		t.Fatal("an image the intent names expired")
	}
	s.DropIntent("call-1")
	if _, _, err := s.Put([]byte(strings.Repeat("y", 1000))); err != nil {
		t.Fatal(err)
	}
	if has(rec.Before) && has(rec.After) {
		t.Fatal("unnamed, released images did not expire over the cap")
	}
}
