package images

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Minimal images of each type (their leading bytes are what counts).
var (
	png  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	jpeg = []byte("\xff\xd8\xff\xe0\x00\x10JFIF")
	gif  = []byte("GIF89a\x01\x00\x01\x00")
	webp = []byte("RIFF\x24\x00\x00\x00WEBPVP8 ")
)

func TestCheck(t *testing.T) {
	for data, want := range map[string]string{string(png): "image/png", string(jpeg): "image/jpeg", string(gif): "image/gif", string(webp): "image/webp"} {
		if got, err := Check([]byte(data), ""); got != want || err != nil {
			t.Errorf("Check(%q) = %q, %v; want %s", data[:4], got, err, want)
		}
		if _, err := Check([]byte(data), want); err != nil {
			t.Errorf("declared %s: %v", want, err)
		}
	}
	for _, c := range []struct {
		data     []byte
		declared string
		want     string
	}{
		{nil, "", "empty"},
		{[]byte("<svg xmlns=…>"), "image/svg+xml", "not a PNG, JPEG, GIF or WebP"},
		{[]byte("RIFF\x00\x00\x00\x00WAVE"), "", "not a PNG"},
		{png, "image/jpeg", `declared "image/jpeg" but its bytes are image/png`},
		{append(bytes.Clone(png), make([]byte, MaxBytes)...), "", "at most 20971520"},
	} {
		if _, err := Check(c.data, c.declared); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%.8q, %q) = %v, want %q", c.data, c.declared, err, c.want)
		}
	}
}

// TestStore: an image comes back by its name, the same bytes get the same
// name, a name that is not one or a file that does not hold its image is
// missing.
func TestStore(t *testing.T) {
	s := Open(filepath.Join(t.TempDir(), "images"))
	name, err := s.Put(png)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.Put(png); again != name || err != nil {
		t.Errorf("second Put = %s, %v", again, err)
	}
	if got, err := s.Get(name); !bytes.Equal(got, png) || err != nil {
		t.Errorf("Get = %q, %v", got, err)
	}
	if fi, err := os.Stat(s.Dir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("store directory: %v %v", fi.Mode(), err)
	}
	for _, bad := range []string{"../../etc/passwd", strings.Repeat("A", 64), name[:63], ""} {
		if _, err := s.Get(bad); !errors.Is(err, ErrMissing) {
			t.Errorf("Get(%q) = %v, want ErrMissing", bad, err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), name), jpeg, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(name); !errors.Is(err, ErrMissing) {
		t.Errorf("Get of a file that does not hold its image = %v", err)
	}
	entries, _ := os.ReadDir(s.Dir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
