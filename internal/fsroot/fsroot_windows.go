package fsroot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrUnsupported is returned by every workspace file operation on
// Windows: the no-follow, handle-relative resolver is not built there yet,
// and following links instead would silently weaken the contract, so the
// operation is refused.
var ErrUnsupported = errors.New("workspace file operations are not supported on windows yet (no-follow resolution is not implemented; use WSL)")

// Root is an open workspace root. On Windows it only records the
// directory: every file operation fails with ErrUnsupported.
type Root struct {
	dir string
}

// Option configures Open.
type Option func(*Root)

// WithComponentWalk has no effect on Windows.
func WithComponentWalk() Option { return func(*Root) {} }

// Open checks that root is an existing directory given as an absolute
// path.
func Open(root string, opts ...Option) (*Root, error) {
	if root == "" || !filepath.IsAbs(root) {
		return nil, fmt.Errorf("open workspace root %q: root must be an absolute path", root)
	}
	dir := filepath.Clean(root)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace root %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open workspace root %s: not a directory", dir)
	}
	r := &Root{dir: dir}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// Dir returns the root's absolute path as given to Open (cleaned).
func (r *Root) Dir() string { return r.dir }

// UsesComponentWalk reports false: there is no resolver on Windows yet.
func (r *Root) UsesComponentWalk() bool { return false }

// Close does nothing on Windows.
func (r *Root) Close() error { return nil }

func unsupported(op, rel string) error {
	if _, err := CleanRel(rel); err != nil {
		return err
	}
	return fmt.Errorf("%s %s: %w", op, rel, ErrUnsupported)
}

// ReadFile fails with ErrUnsupported.
func (r *Root) ReadFile(rel string, limit int64) ([]byte, FileInfo, error) {
	return nil, FileInfo{}, unsupported("read", rel)
}

// ReadPrefix fails with ErrUnsupported.
func (r *Root) ReadPrefix(rel string, limit int64) ([]byte, bool, error) {
	return nil, false, unsupported("read", rel)
}

// WriteFile fails with ErrUnsupported.
func (r *Root) WriteFile(rel string, data []byte, prior Prior, opts WriteOptions) error {
	return unsupported("write", rel)
}

// OpenDir fails with ErrUnsupported.
func (r *Root) OpenDir(rel string) (*os.File, error) {
	return nil, unsupported("open directory", rel)
}

// Inspect fails with ErrUnsupported.
func (r *Root) Inspect(rel string) (Kind, uint64, error) {
	return KindOther, 0, unsupported("inspect", rel)
}

// Mode fails with ErrUnsupported.
func (r *Root) Mode(rel string) (fs.FileMode, error) {
	return 0, unsupported("inspect", rel)
}

// Remove fails with ErrUnsupported.
func (r *Root) Remove(rel string, prior Prior) error { return unsupported("remove", rel) }

// Mkdir fails with ErrUnsupported.
func (r *Root) Mkdir(rel string, mode fs.FileMode) error { return unsupported("mkdir", rel) }

// RemoveDir fails with ErrUnsupported.
func (r *Root) RemoveDir(rel string) error { return unsupported("remove", rel) }

// ReadHostPrefix reads at most limit bytes of the regular file at path,
// an absolute path the user controls (their own configuration, never a
// workspace file). Links are followed; anything but a regular file is a
// *NotRegularError.
func ReadHostPrefix(path string, limit int64) (data []byte, truncated bool, err error) {
	if limit <= 0 {
		limit = MaxFileBytes
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, false, &NotRegularError{Path: path, Kind: "special file"}
	}
	buf, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(buf)) > limit {
		return buf[:limit], true, nil
	}
	return buf, false, nil
}

// IsNotExist reports whether err means the path does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
