package session

import (
	"errors"
	"fmt"
)

// ErrReadOnly is returned by the append methods of a session opened with
// [Inspect].
var ErrReadOnly = errors.New("session opened read-only")

// ErrClosed is returned by methods of a closed session.
var ErrClosed = errors.New("session closed")

// ErrUnknownEntry is returned when an operation names an entry id the
// session does not hold.
var ErrUnknownEntry = errors.New("unknown entry")

// LimitError reports a session crossing one of the parsing bounds.
type LimitError struct {
	// Path is the session file.
	Path string
	// Limit names the bound: "file bytes", "records" or "record bytes".
	Limit string
	// Max is the bound's value.
	Max int64
	// Got is the value that crossed it (a lower bound when reading stopped
	// early).
	Got int64
	// Line is the line concerned, or 0.
	Line int
}

// Error names the file, the line if known, and the limit crossed.
func (e *LimitError) Error() string {
	where := e.Path
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.Path, e.Line)
	}
	return fmt.Sprintf("session %s: %s limit exceeded: %d > %s", where, e.Limit, e.Got, limitString(e.Limit, e.Max))
}

func limitString(limit string, max int64) string {
	if limit == "records" {
		return fmt.Sprintf("%d records", max)
	}
	if max >= 1<<20 && max%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", max>>20)
	}
	return fmt.Sprintf("%d bytes", max)
}

// CorruptError reports a record that cannot be parsed, or that breaks the
// ledger's structure, somewhere other than a torn final record. The file is
// never modified when this is returned.
type CorruptError struct {
	// Path is the session file.
	Path string
	// Line is the 1-based line number (the header is line 1).
	Line int
	// Offset is the byte offset of the line.
	Offset int64
	// Err says what is wrong.
	Err error
}

// Error names the file, line and offset of the damage.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("session %s:%d (offset %d): corrupt record: %v", e.Path, e.Line, e.Offset, e.Err)
}

// Unwrap returns what is wrong with the record.
func (e *CorruptError) Unwrap() error { return e.Err }

// ReadFailureAdvice says what a person can do about err, an error
// opening or reading a session: a record damaged before the file's end,
// which no open repairs (the file is left as it is), or a file written
// by a newer format. It is "" for any other error.
func ReadFailureAdvice(err error) string {
	if ce, ok := errors.AsType[*CorruptError](err); ok {
		return fmt.Sprintf("octet repairs only a torn last record and leaves this file as it is: restore it from a backup, keep the records before the damage by truncating the file to its first %d bytes (truncate -s %d FILE), or delete the session (octet sessions delete)", ce.Offset, ce.Offset)
	}
	if _, ok := errors.AsType[*VersionError](err); ok {
		return "a newer octet wrote it: open it with that version"
	}
	return ""
}

// VersionError reports a session written by an incompatible newer format.
type VersionError struct {
	// Path is the session file.
	Path string
	// Version is the version its header declares.
	Version int
}

// Error names the file and both versions.
func (e *VersionError) Error() string {
	return fmt.Sprintf("session %s: format version %d is newer than supported version %d", e.Path, e.Version, FormatVersion)
}
