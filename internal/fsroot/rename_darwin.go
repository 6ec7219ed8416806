package fsroot

import "golang.org/x/sys/unix"

// renameNoReplace renames tmp to name within pfd, failing with EEXIST
// when name exists: renameatx_np(RENAME_EXCL), or link+unlink on file
// systems that refuse it.
func renameNoReplace(pfd int, tmp, name string) error {
	return exclusiveRenameAt(pfd, tmp, name, func() error {
		return unix.RenameatxNp(pfd, tmp, pfd, name, unix.RENAME_EXCL)
	})
}
