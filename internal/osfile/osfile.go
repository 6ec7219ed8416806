// Package osfile wraps the few file primitives whose strongest form
// differs per platform: data sync, advisory whole-file locks, opening a
// final path component without following a link, exclusive rename and
// file identity.
//
//   - Sync: fdatasync on Linux, fcntl(F_FULLFSYNC) on macOS (plain fsync
//     there does not reach stable storage), FlushFileBuffers on Windows.
//   - Lock/TryLock/Unlock: flock on Linux and macOS, LockFileEx on Windows.
//   - RangeLock: on Linux, a byte-range lock of the open file description
//     (fcntl F_OFD_SETLK) that never conflicts with Lock, where the file
//     system keeps the two apart (RangeLockable).
//   - OpenNoFollow: O_NOFOLLOW on Unix; on Windows the file is opened with
//     FILE_FLAG_OPEN_REPARSE_POINT and refused when it is a reparse point
//     (symbolic link or junction).
//   - RenameNoReplace: renameat2(RENAME_NOREPLACE) on Linux,
//     renamex_np(RENAME_EXCL) on macOS, both falling back to link+unlink
//     where the file system refuses them; MoveFileEx without
//     MOVEFILE_REPLACE_EXISTING on Windows.
//   - LockLive: a writer-presence lock (an open-file-description lock on a
//     byte past the data, held until the file is closed) on Linux; other
//     platforms report errors.ErrUnsupported.
//
// Every function retries on EINTR.
package osfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// ErrSymlink reports that OpenNoFollow found a symbolic link (or, on
// Windows, another reparse point) as the final component.
var ErrSymlink = errors.New("path is a symbolic link (links are not followed)")

// ExecutableFile reports whether p names an executable regular file
// (following links), and returns it absolute: mode bits on Unix, the .exe
// extension under windows rules. It is how octet decides whether a
// configured program (a shell) can run before anything runs it.
func ExecutableFile(p string, windows bool) (string, bool) {
	if !filepath.IsAbs(p) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", false
		}
		p = abs
	}
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	if windows {
		return p, strings.EqualFold(filepath.Ext(p), ".exe")
	}
	return p, st.Mode().Perm()&0o111 != 0
}
