// Package images holds what octet knows of image input: the formats a
// model is given (PNG, JPEG, GIF, WebP, recognized by their bytes, never
// by a name or a client's word), their bounds, and the content-addressed
// store where the images of sessions are kept ($OCTET_HOME/images): a
// session's ledger names each image by its SHA-256, so an image of any
// size costs its record a few dozen bytes, a fork shares it, and the
// bytes sent again with every later request are read from one file.
package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/image/webp"

	"github.com/octet-agent/octet/internal/osfile"
)

// Bounds of image input.
const (
	// MaxBytes bounds one image (20 MiB, as the Responses API does).
	MaxBytes = 20 << 20
	// MaxPerPrompt bounds the images of one prompt.
	MaxPerPrompt = 8
	// MaxPromptBytes bounds the images of one prompt together: their
	// base64 fits one 64 MiB editor protocol message.
	MaxPromptBytes = 40 << 20
)

// Types are the image types a model is given, by MIME type.
var Types = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// Sniff returns the MIME type of an image in one of Types, recognized by
// its leading bytes, or "" for anything else.
func Sniff(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "image/gif"
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// Check returns data's MIME type, or an error saying why a model may not
// be given it: empty, over MaxBytes, or not of one of Types. declared,
// when not "", is the type a client gave it, which the bytes must agree
// with.
func Check(data []byte, declared string) (string, error) {
	switch {
	case len(data) == 0:
		return "", errors.New("the image is empty")
	case len(data) > MaxBytes:
		return "", fmt.Errorf("the image is %d bytes; at most %d (20 MiB) are taken", len(data), MaxBytes)
	}
	mime := Sniff(data)
	switch {
	case mime == "":
		return "", fmt.Errorf("the data is not a PNG, JPEG, GIF or WebP image (octet reads the type from the bytes)")
	case declared != "" && declared != mime:
		return "", fmt.Errorf("the image is declared %q but its bytes are %s", clip(declared), mime)
	}
	return mime, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// Store is a directory of images named by the hex SHA-256 of their bytes.
// It is safe for concurrent use, by any number of processes: an image is
// written whole under a temporary name and renamed into place, and the
// same bytes always get the same name.
type Store struct{ dir string }

// Open returns the store in dir (created, private, at the first Put).
func Open(dir string) *Store { return &Store{dir: dir} }

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Put keeps data durably (synced, with its directory entry) and returns
// its name, the hex SHA-256 of data.
func (s *Store) Put(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:])
	path := filepath.Join(s.dir, name)
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(len(data)) {
		return name, nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return "", fmt.Errorf("image store: %w", err)
	}
	f, err := os.CreateTemp(s.dir, ".tmp-"+name[:16]+"-*")
	if err != nil {
		return "", fmt.Errorf("image store: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // gone after the rename
	_, err = f.Write(data)
	if err == nil {
		err = osfile.Sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = osfile.SyncDir(s.dir)
	}
	if err != nil {
		return "", fmt.Errorf("image store: keep image %s: %w", name[:12], err)
	}
	return name, nil
}

// ErrMissing is returned (wrapped) by Get for an image the store does not
// have, or no longer has whole.
var ErrMissing = errors.New("image not in the store")

// Get returns the bytes of the image named name, checked against it.
func (s *Store) Get(name string) ([]byte, error) {
	if !validName(name) {
		return nil, fmt.Errorf("%w: %q is not an image name", ErrMissing, clip(name))
	}
	f, err := osfile.OpenNoFollow(filepath.Join(s.dir, name), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMissing, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("image store: read %s: %w", name[:12], err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != name {
		return nil, fmt.Errorf("%w: %s does not hold the image it names", ErrMissing, name[:12])
	}
	return data, nil
}

// validName reports whether name is a store name: 64 lowercase hex digits.
func validName(name string) bool {
	if len(name) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Size returns an image's width and height in pixels, read from its
// header (the image is not decoded). An image in none of Types, or whose
// header cannot be read or gives it no pixels, is an error.
func Size(data []byte) (width, height int, err error) {
	var cfg image.Config
	r := bytes.NewReader(data)
	switch Sniff(data) {
	case "image/png":
		cfg, err = png.DecodeConfig(r)
	case "image/jpeg":
		cfg, err = jpeg.DecodeConfig(r)
	case "image/gif":
		cfg, err = gif.DecodeConfig(r)
	case "image/webp":
		cfg, err = webp.DecodeConfig(r)
	default:
		return 0, 0, errors.New("not a PNG, JPEG, GIF or WebP image")
	}
	switch {
	case err != nil:
		return 0, 0, fmt.Errorf("read the image's size: %w", err)
	case cfg.Width < 1 || cfg.Height < 1:
		return 0, 0, fmt.Errorf("the image's header gives it no pixels (%d×%d)", cfg.Width, cfg.Height)
	}
	return cfg.Width, cfg.Height, nil
}
