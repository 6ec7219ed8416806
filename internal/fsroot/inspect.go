//go:build unix

package fsroot

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// kindFromMode maps a stat mode to a Kind.
func kindFromMode(mode uint32) Kind {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return KindRegular
	case unix.S_IFDIR:
		return KindDirectory
	case unix.S_IFLNK:
		return KindSymlink
	case unix.S_IFIFO:
		return KindFIFO
	case unix.S_IFSOCK:
		return KindSocket
	case unix.S_IFCHR:
		return KindCharDevice
	case unix.S_IFBLK:
		return KindBlockDevice
	}
	return KindOther
}

// Inspect resolves rel (workspace-relative) beneath the root with the same
// no-follow resolver as every other operation and reports what the final
// component is and its hard-link count, without opening it for reading:
// on Linux the object is opened O_PATH|O_NOFOLLOW (which never blocks on a
// FIFO and needs no read permission) and fstat'ed.
//
// A symbolic link as the final component is reported as KindSymlink with a
// nil error (the link itself, not its target). A symbolic link in any
// parent component is an error wrapping ErrSymlink; an absent path is an
// error for which IsNotExist is true; a path shape that is not
// workspace-relative is a *PathError. The root itself is ".". The path is
// cleaned first (CleanRel), so "link/" reports the link "link" itself.
func (r *Root) Inspect(rel string) (Kind, uint64, error) {
	clean, err := CleanRel(rel)
	if err != nil {
		return KindOther, 0, err
	}
	var st unix.Stat_t
	if err := r.inspect(clean, &st); err != nil {
		return KindOther, 0, fmt.Errorf("inspect %s: %w", clean, err)
	}
	return kindFromMode(uint32(st.Mode)), uint64(st.Nlink), nil
}
