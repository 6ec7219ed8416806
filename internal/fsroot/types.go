package fsroot

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"time"
)

// FileInfo is the descriptor metadata of a file that was read.
type FileInfo struct {
	Size    int64
	Mode    fs.FileMode // ModeBits
	ModTime time.Time
}

// NotRegularError reports that a path names something other than a regular
// file (a directory, FIFO, socket or device). It is detected from the opened
// descriptor's metadata, so opening never blocks.
type NotRegularError struct {
	Path string
	Kind string
}

// Error describes the non-regular file.
func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is a %s, not a regular file", e.Path, e.Kind)
}

// TooLargeError reports a file larger than the caller's limit.
type TooLargeError struct {
	Path  string
	Limit int64
}

// Error describes the oversized file.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than the %d-byte limit", e.Path, e.Limit)
}

// ChangedError reports that the target of a mutation no longer matched the
// expected prior state when it was re-read immediately before commit.
type ChangedError struct {
	Path string
}

// Error describes the changed target.
func (e *ChangedError) Error() string {
	return fmt.Sprintf("%s changed on disk before the write could be committed", e.Path)
}

// Prior is the state a mutation expects its target to be in immediately
// before commit.
type Prior struct {
	// Any skips the comparison (an unconditional write).
	Any bool
	// Exists says the target must exist with content hashing to SHA256;
	// false means the target must be absent.
	Exists bool
	SHA256 [32]byte
}

// PriorOf returns the Prior for an existing target with content data.
func PriorOf(data []byte) Prior { return Prior{Exists: true, SHA256: sha256.Sum256(data)} }

// Absent is the Prior for a target that must not exist yet.
var Absent = Prior{}

// ModeBits are the bits of a mode fsroot reports and sets: the permission
// bits and set-user-ID, set-group-ID and sticky, numbered as the kernel
// numbers them (0o4000, 0o2000, 0o1000: bits Go's fs.FileMode leaves
// unused), not as fs.ModeSetuid and its kin. On Windows only the
// permission bits are ever set.
const ModeBits fs.FileMode = 0o7777

// WriteOptions tune WriteFile.
type WriteOptions struct {
	// CreateParents creates missing parent directories (NewDirMode) through
	// the same no-follow walk.
	CreateParents bool
	// Mode, when non-zero, is the file's ModeBits after the write
	// (a rewind restores a recorded mode); zero keeps the replaced file's
	// mode, or 0644 for a new file.
	Mode fs.FileMode
}

// Kind is the type of a file system object as Inspect found it. A
// symbolic link is reported as a link, never as what it points to.
type Kind uint8

// The kinds Inspect reports.
const (
	KindOther Kind = iota // a type this package does not name
	KindRegular
	KindDirectory
	KindSymlink
	KindFIFO
	KindSocket
	KindCharDevice
	KindBlockDevice
)

var kindNames = [...]string{
	KindOther:       "special file",
	KindRegular:     "regular file",
	KindDirectory:   "directory",
	KindSymlink:     "symbolic link",
	KindFIFO:        "FIFO",
	KindSocket:      "socket",
	KindCharDevice:  "character device",
	KindBlockDevice: "block device",
}

// String names the kind ("regular file", "symbolic link", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return kindNames[KindOther]
}
