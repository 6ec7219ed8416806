package session

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestImagesRoundTrip: a user entry's images are written with it and
// read back by Open and Inspect, byte for byte.
func TestImagesRoundTrip(t *testing.T) {
	s := newSession(t)
	media := &Media{Images: []Image{{MediaType: "image/png", Data: "iVBORw0KGgo="}, {MediaType: "image/jpeg", Data: "/9j/4AAQ"}}}
	mustAppend(t, s, Entry{Type: EntryUser, RunID: "r1", Text: "what is this?", Media: media})
	mustAppend(t, s, Entry{Type: EntryUser, RunID: "r2", Text: "no image"})
	s.Close()
	for name, open := range map[string]func(string) (*Session, error){"open": Open, "inspect": Inspect} {
		r, err := open(s.Path())
		if err != nil {
			t.Fatal(err)
		}
		b := r.Branch()
		if diff := cmp.Diff(media, b[0].Media); diff != "" || b[1].Media != nil {
			t.Errorf("%s: images (-want +got):\n%s\nsecond entry media %+v", name, diff, b[1].Media)
		}
		r.Close()
	}
}
