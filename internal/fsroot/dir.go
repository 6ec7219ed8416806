//go:build unix

package fsroot

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"golang.org/x/sys/unix"
)

// NewDirMode is the permission bits of a directory fsroot creates as a
// missing parent (CreateParents), exactly: not filtered by the umask.
const NewDirMode fs.FileMode = 0o755

// Mkdir makes rel beneath the root a directory with mode (ModeBits;
// 0755 when it has no permission bit set): missing parents are created
// (NewDirMode) with the same no-follow walk as WriteFile, an existing
// directory gets mode, and the parent directory is fsynced. Anything but a directory in the way is an
// error; a symbolic link is never followed.
func (r *Root) Mkdir(rel string, mode fs.FileMode) error {
	clean, err := CleanRel(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return &PathError{Path: rel, Reason: "path names the workspace root"}
	}
	if mode&fs.ModePerm == 0 {
		mode = 0o755
	}
	dir, name := path.Split(clean)
	pfd, err := r.openParent(path.Clean(dir), true)
	if err != nil {
		return fmt.Errorf("open parent of %s: %w", clean, r.explainNotDir(path.Clean(dir), err))
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, name, uint32(mode&fs.ModePerm)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create directory %s: %w", clean, err)
	}
	fd, err := openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", clean, mapErr(err))
	}
	defer unix.Close(fd)
	// Mkdirat's mode is filtered by the umask; the recorded mode is exact.
	if err := unix.Fchmod(fd, uint32(mode&ModeBits)); err != nil {
		return fmt.Errorf("set the mode of directory %s: %w", clean, err)
	}
	if err := sysFsync(pfd); err != nil {
		return fmt.Errorf("fsync directory of %s: %w", clean, err)
	}
	return nil
}

// RemoveDir removes the empty directory rel beneath the root, resolved
// with the same no-follow walk, and fsyncs its parent. An absent rel is a
// success; a directory that is not empty, or anything that is not a
// directory, is left in place and reported.
func (r *Root) RemoveDir(rel string) error {
	clean, err := CleanRel(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return &PathError{Path: rel, Reason: "path names the workspace root"}
	}
	dir, name := path.Split(clean)
	pfd, err := r.openParent(path.Clean(dir), false)
	if IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open parent of %s: %w", clean, r.explainNotDir(path.Clean(dir), err))
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("inspect %s: %w", clean, err)
	}
	if kindFromMode(uint32(st.Mode)) != KindDirectory {
		return fmt.Errorf("%s is a %s, not a directory: left in place", clean, kindOf(uint32(st.Mode)))
	}
	if err := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("directory %s is not empty (it holds entries octet did not create): %w", clean, err)
		}
		return fmt.Errorf("remove directory %s: %w", clean, err)
	}
	if err := sysFsync(pfd); err != nil {
		return fmt.Errorf("fsync directory of %s: %w", clean, err)
	}
	return nil
}
