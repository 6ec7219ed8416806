//go:build unix

package osfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Lock takes an advisory lock on the whole of f with flock: exclusive when
// exclusive is set, shared otherwise. It blocks until the lock is granted.
func Lock(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	return flock(f, how)
}

// TryLock is Lock without waiting: ok is false when another open file
// holds a conflicting lock.
func TryLock(f *os.File, exclusive bool) (ok bool, err error) {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	err = flock(f, how|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// Unlock releases the lock Lock took.
func Unlock(f *os.File) error { return flock(f, unix.LOCK_UN) }

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// OpenNoFollow is os.OpenFile with O_NOFOLLOW: a symbolic link as the
// final component of name is an error wrapping ErrSymlink (links in parent
// components are followed; callers pass paths whose parents they trust).
func OpenNoFollow(name string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag|unix.O_NOFOLLOW, perm)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%w: %w", ErrSymlink, err)
	}
	return f, err
}

// FileID returns the open file's identity on its device (the inode
// number).
func FileID(f *os.File) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return uint64(st.Ino), nil
}

// renameLinkUnlink renames oldpath to newpath without replacing an
// existing newpath, for file systems without an exclusive rename: link
// fails with EEXIST when newpath exists, and only then is oldpath removed.
// Between the two steps both names exist; a crash there leaves the
// temporary behind, never a replaced target.
func renameLinkUnlink(oldpath, newpath string) error {
	if err := os.Link(oldpath, newpath); err != nil {
		return err
	}
	return os.Remove(oldpath)
}

// exclusiveRename runs rename (the platform's exclusive rename) and falls
// back to link+unlink when the file system does not support it.
func exclusiveRename(oldpath, newpath string, rename func(string, string) error) error {
	if !forceLinkUnlink {
		err := rename(oldpath, newpath)
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.ENOTSUP) {
			return wrapRename(oldpath, newpath, err)
		}
	}
	return wrapRename(oldpath, newpath, renameLinkUnlink(oldpath, newpath))
}

// forceLinkUnlink makes RenameNoReplace take the link+unlink path; tests
// set it to exercise the fallback on Linux.
var forceLinkUnlink bool

func wrapRename(oldpath, newpath string, err error) error {
	var le *os.LinkError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &le):
		return err
	}
	return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
}

// SyncDir makes the entries of the directory dir (creations, renames,
// removals) durable by syncing the directory itself.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// SyncRoot is SyncDir for a directory held open as root.
func SyncRoot(root *os.Root) error {
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
