// Package osfile wraps the few file primitives whose strongest form
// differs per platform: data sync, advisory whole-file locks, opening a
// final path component without following a link, exclusive rename and
// file identity.
//
//   - Sync: fdatasync on Linux, fcntl(F_FULLFSYNC) on macOS (plain fsync
//     there does not reach stable storage), FlushFileBuffers on Windows.
//   - Lock/Unlock: flock on Linux and macOS, LockFileEx on Windows.
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

import "errors"

// ErrSymlink reports that OpenNoFollow found a symbolic link (or, on
// Windows, another reparse point) as the final component.
var ErrSymlink = errors.New("path is a symbolic link (links are not followed)")
