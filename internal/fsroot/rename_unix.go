//go:build unix

package fsroot

import (
	"errors"

	"golang.org/x/sys/unix"
)

// forceLinkRename makes renameNoReplace take the link+unlink path; tests
// set it to exercise on Linux the fallback other systems and file systems
// use.
var forceLinkRename bool

// exclusiveRenameAt runs rename (the platform's exclusive rename of tmp to
// name within pfd) and falls back to renameLinkAt when the file system
// does not support it.
func exclusiveRenameAt(pfd int, tmp, name string, rename func() error) error {
	if !forceLinkRename {
		err := rename()
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.ENOTSUP) {
			return err
		}
	}
	return renameLinkAt(pfd, tmp, name)
}

// renameLinkAt renames tmp to name within pfd without replacing an
// existing name: linkat fails with EEXIST when name exists, and only then
// is tmp unlinked. A crash in between leaves the temporary behind, never
// a replaced target.
func renameLinkAt(pfd int, tmp, name string) error {
	if err := sysLinkat(pfd, tmp, pfd, name, 0); err != nil {
		return err
	}
	return unix.Unlinkat(pfd, tmp, 0)
}
