//go:build unix

package fsroot

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

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
		fd, err := sysOpenat(dirfd, name, flags, mode)
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
