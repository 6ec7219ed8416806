package session

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/octet-agent/octet/internal/osfile"
)

// A sessionDir is the directory a session file lives in: reached by path
// ([Create], [Open]), or through a descriptor its caller opened
// ([CreateIn], [RemoveIn]). Every operation on the session file's name,
// its temporary file and its listing cache goes through it, so a session
// created in a directory held open is never reached through a link that
// later replaced the directory.
type sessionDir interface {
	// path is the directory's path, for Path and messages.
	path() string
	// openFile opens name in the directory without following a link in
	// the directory's path.
	openFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	// createTemp creates a new file named after pattern ("*" replaced by
	// a random string) and returns it with its name.
	createTemp(pattern string) (*os.File, string, error)
	// renameNoReplace renames oldname to newname, failing with an error
	// that is fs.ErrExist when newname exists.
	renameNoReplace(oldname, newname string) error
	remove(name string) error
	// sync makes the directory's entries durable.
	sync() error
	close() error
}

// pathDir is a directory reached by path; a link as the final component
// of a name in it is not followed.
type pathDir string

func (d pathDir) path() string { return string(d) }

func (d pathDir) openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return osfile.OpenNoFollow(filepath.Join(string(d), name), flag, perm)
}

func (d pathDir) createTemp(pattern string) (*os.File, string, error) {
	f, err := os.CreateTemp(string(d), pattern)
	if err != nil {
		return nil, "", err
	}
	return f, filepath.Base(f.Name()), nil
}

func (d pathDir) renameNoReplace(oldname, newname string) error {
	return osfile.RenameNoReplace(filepath.Join(string(d), oldname), filepath.Join(string(d), newname))
}

func (d pathDir) remove(name string) error { return os.Remove(filepath.Join(string(d), name)) }
func (d pathDir) sync() error              { return osfile.SyncDir(string(d)) }
func (d pathDir) close() error             { return nil }

// rootDir is a directory held open as an [os.Root]: nothing in it is
// reached by path, and no link leads out of it.
type rootDir struct {
	root *os.Root
	dir  string // its path, for messages
}

func (d rootDir) path() string { return d.dir }

func (d rootDir) openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return d.root.OpenFile(name, flag, perm)
}

func (d rootDir) createTemp(pattern string) (*os.File, string, error) {
	for {
		var b [8]byte
		rand.Read(b[:])
		before, after, _ := strings.Cut(pattern, "*")
		name := before + hex.EncodeToString(b[:]) + after
		f, err := d.root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			return f, name, err
		}
	}
}

// renameNoReplace links newname to oldname, which fails when newname
// exists, and then removes oldname (an os.Root has no exclusive rename).
func (d rootDir) renameNoReplace(oldname, newname string) error {
	if err := d.root.Link(oldname, newname); err != nil {
		return err
	}
	return d.root.Remove(oldname)
}

func (d rootDir) remove(name string) error { return d.root.Remove(name) }

func (d rootDir) sync() error { return osfile.SyncRoot(d.root) }

func (d rootDir) close() error { return d.root.Close() }
