// Package fsroot performs descriptor-relative, no-follow file operations
// beneath one directory (the workspace root).
//
// Every path handed to a Root is a workspace-relative shape: absolute paths
// and ".." components are rejected before any system call. On Linux each
// path is opened with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) relative
// to the root descriptor; when the kernel refuses openat2 (ENOSYS, or EPERM
// from a seccomp filter) the Root falls back to a component walk that opens
// every directory with O_NOFOLLOW|O_DIRECTORY relative to the previous
// directory descriptor. Either way a symbolic link anywhere in the path is an
// error, and replacing a parent directory with a symlink while an operation
// runs cannot redirect it outside the root.
//
// Reads open the final object non-blocking, require a regular file from the
// descriptor's own metadata (a FIFO or device is an error, never a hang) and
// read at most limit+1 bytes. Mutations keep the parent directory descriptor
// open, write a sibling temporary file created with O_EXCL, fsync it, re-read
// and compare the target against the caller's expected prior state
// immediately before commit, rename relative to the same parent descriptor
// and fsync the directory.
//
// The guard applies to the explicit paths given to a Root. It is not process
// containment.
package fsroot

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// MaxFileBytes is the largest file a Root reads or writes by default
// (32 MiB, the product's per-file limit for read, edit and preview).
const MaxFileBytes = 32 << 20

// Root is an open workspace root. It is safe for concurrent use.
type Root struct {
	dir string
	fd  int
	// walk forces the component-walk resolver (tests, or after openat2
	// reported ENOSYS/EPERM once).
	walk atomic.Bool
	// forced records that the walk was requested by an option and must not
	// be reported as a fallback.
	forced bool
}

// Option configures Open.
type Option func(*Root)

// WithComponentWalk makes the Root resolve every path with the O_NOFOLLOW
// component walk instead of openat2. Tests use it to run the same table on
// both resolvers.
func WithComponentWalk() Option {
	return func(r *Root) { r.walk.Store(true); r.forced = true }
}

// Open opens root, which must be an existing directory given as an
// absolute path. Symbolic links in root itself are resolved once, here: the
// root is trusted, the paths beneath it are not.
func Open(root string, opts ...Option) (*Root, error) {
	if root == "" || !filepath.IsAbs(root) {
		return nil, fmt.Errorf("open workspace root %q: root must be an absolute path", root)
	}
	dir := filepath.Clean(root)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace root %s: %w", dir, err)
	}
	r := &Root{dir: dir, fd: fd}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// Dir returns the root's absolute path as given to Open (cleaned).
func (r *Root) Dir() string { return r.dir }

// UsesComponentWalk reports whether the Root resolves paths with the
// O_NOFOLLOW component walk (forced, or because openat2 was unavailable).
func (r *Root) UsesComponentWalk() bool { return r.walk.Load() }

// Close releases the root descriptor.
func (r *Root) Close() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	if err != nil {
		return fmt.Errorf("close workspace root %s: %w", r.dir, err)
	}
	return nil
}

// PathError is returned for a path whose shape is not workspace-relative.
type PathError struct {
	Path   string
	Reason string
}

// Error describes the rejected path.
func (e *PathError) Error() string {
	return fmt.Sprintf("invalid path %q: %s", e.Path, e.Reason)
}

// ErrSymlink reports a symbolic link somewhere in a path; built-in file
// operations never follow links.
var ErrSymlink = errors.New("path contains a symbolic link (links are not followed)")

// ErrEscape reports a path that would resolve outside the root.
var ErrEscape = errors.New("path resolves outside the workspace")

// CleanRel validates that p is a workspace-relative path shape and returns
// it cleaned. It rejects empty paths, absolute paths, ".." components and NUL
// bytes. The root itself is ".".
func CleanRel(p string) (string, error) {
	switch {
	case p == "":
		return "", &PathError{Path: p, Reason: "empty path"}
	case strings.IndexByte(p, 0) >= 0:
		return "", &PathError{Path: p, Reason: "path contains a NUL byte"}
	case filepath.IsAbs(p):
		return "", &PathError{Path: p, Reason: "absolute paths are not allowed; use a path relative to the workspace root"}
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", &PathError{Path: p, Reason: `".." components are not allowed`}
		}
	}
	return filepath.Clean(p), nil
}

// openFlags resolves rel (already cleaned) beneath the root and opens it with
// flags. O_NOFOLLOW and O_CLOEXEC are always added.
func (r *Root) open(rel string, flags int, mode uint32) (int, error) {
	if r.fd < 0 {
		return -1, errors.New("workspace root is closed")
	}
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	if !r.walk.Load() {
		fd, err := r.openat2(rel, flags, mode)
		if err == nil || (!errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM)) {
			return fd, mapErr(err)
		}
		// openat2 unavailable (old kernel or seccomp); remember and walk.
		r.walk.Store(true)
	}
	fd, err := openWalk(r.fd, rel, flags, mode)
	return fd, mapErr(err)
}

// explainNotDir turns ENOTDIR from opening a final symlink with
// O_DIRECTORY|O_NOFOLLOW into ErrSymlink, so the error names the cause.
func (r *Root) explainNotDir(rel string, err error) error {
	if !errors.Is(err, unix.ENOTDIR) {
		return err
	}
	dir, name := filepath.Split(rel)
	if dir == "" {
		dir = "."
	}
	pfd, perr := r.open(filepath.Clean(dir), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if perr != nil {
		return err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("%w: %w", ErrSymlink, err)
	}
	return err
}

// openWalk opens rel relative to dirfd one component at a time: every
// directory with O_NOFOLLOW|O_DIRECTORY from the previous directory
// descriptor, the final component with flags (which include O_NOFOLLOW).
func openWalk(dirfd int, rel string, flags int, mode uint32) (int, error) {
	if rel == "." {
		return openat(dirfd, ".", flags, mode)
	}
	parts := strings.Split(rel, "/")
	cur := dirfd
	defer func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}()
	for _, c := range parts[:len(parts)-1] {
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			return -1, ErrEscape
		}
		next, err := openat(cur, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOTDIR {
			var st unix.Stat_t
			if unix.Fstatat(cur, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
		}
		if err != nil {
			return -1, err
		}
		if cur != dirfd {
			unix.Close(cur)
		}
		cur = next
	}
	last := parts[len(parts)-1]
	if last == ".." {
		return -1, ErrEscape
	}
	return openat(cur, last, flags, mode)
}

func openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

// mapErr turns the kernel's answers for a refused link into ErrSymlink and
// for a refused escape into ErrEscape, keeping the errno wrapped.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%w: %w", ErrSymlink, err)
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: %w", ErrEscape, err)
	}
	return err
}
