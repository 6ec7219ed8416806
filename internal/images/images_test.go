package images

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Minimal images of each type (their leading bytes are what counts).
var (
	pngHead  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	jpegHead = []byte("\xff\xd8\xff\xe0\x00\x10JFIF")
	gifHead  = []byte("GIF89a\x01\x00\x01\x00")
	webpHead = []byte("RIFF\x24\x00\x00\x00WEBPVP8 ")
)

// TestSize reads the size of each type from its header, and refuses what
// is not an image or has no readable header.
func TestSize(t *testing.T) {
	rect := image.Rect(0, 0, 300, 200)
	var p, j, g bytes.Buffer
	if err := png.Encode(&p, image.NewGray(rect)); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&j, image.NewGray(rect), nil); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&g, image.NewPaletted(rect, color.Palette{color.Black}), nil); err != nil {
		t.Fatal(err)
	}
	// An extended WebP (VP8X): its canvas is 300×200 (each side less one,
	// in 24 bits).
	vp8x := []byte("RIFF\x16\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00\x2b\x01\x00\xc7\x00\x00")
	for name, data := range map[string][]byte{"png": p.Bytes(), "jpeg": j.Bytes(), "gif": g.Bytes(), "webp": vp8x} {
		if w, h, err := Size(data); w != 300 || h != 200 || err != nil {
			t.Errorf("%s: Size = %d×%d, %v; want 300×200", name, w, h, err)
		}
	}
	for _, bad := range [][]byte{nil, []byte("<svg/>"), pngHead, p.Bytes()[:20]} {
		if w, h, err := Size(bad); err == nil {
			t.Errorf("Size(%q) = %d×%d; want an error", bad, w, h)
		}
	}
}

func TestCheck(t *testing.T) {
	for data, want := range map[string]string{string(pngHead): "image/png", string(jpegHead): "image/jpeg", string(gifHead): "image/gif", string(webpHead): "image/webp"} {
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
		{pngHead, "image/jpeg", `declared "image/jpeg" but its bytes are image/png`},
		{append(bytes.Clone(pngHead), make([]byte, MaxBytes)...), "", "at most 20971520"},
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
	name, err := s.Put(pngHead)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.Put(pngHead); again != name || err != nil {
		t.Errorf("second Put = %s, %v", again, err)
	}
	if got, err := s.Get(name); !bytes.Equal(got, pngHead) || err != nil {
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
	if err := os.WriteFile(filepath.Join(s.Dir(), name), jpegHead, 0o600); err != nil {
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

// FuzzSize: any bytes give a size of at least 1×1 or an error, never a
// panic.
func FuzzSize(f *testing.F) {
	for _, seed := range [][]byte{pngHead, jpegHead, gifHead, webpHead} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if w, h, err := Size(data); err == nil && (w < 1 || h < 1) {
			t.Errorf("Size = %d×%d with no error", w, h)
		}
	})
}
