//go:build unix

package fsroot

import (
	"fmt"
	"path"

	"golang.org/x/sys/unix"
)

// Remove removes the regular file rel beneath the root, resolved with the
// same no-follow walk as WriteFile. The file is compared with prior
// immediately before the unlink (*ChangedError on mismatch; a prior of
// Absent makes an absent file a success), and the directory is fsynced.
// A symbolic link or a non-regular file is never removed.
func (r *Root) Remove(rel string, prior Prior) error {
	clean, err := CleanRel(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return &PathError{Path: rel, Reason: "path names the workspace root, not a file"}
	}
	dir, name := path.Split(clean)
	dir = path.Clean(dir)
	pfd, err := r.openParent(dir, false)
	if IsNotExist(err) && !prior.Exists {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open parent of %s: %w", clean, r.explainNotDir(dir, err))
	}
	defer unix.Close(pfd)
	if _, _, err := targetMode(pfd, name, clean); err != nil {
		return err
	}
	if err := compareAt(pfd, name, clean, prior); err != nil {
		return err
	}
	if err := unix.Unlinkat(pfd, name, 0); err != nil {
		if IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("remove %s: %w", clean, err)
	}
	if err := sysFsync(pfd); err != nil {
		return fmt.Errorf("fsync directory of %s: %w", clean, err)
	}
	return nil
}
