// Package fsroot performs descriptor-relative, no-follow file operations
// beneath one directory (the workspace root).
//
// Every path handed to a Root is a workspace-relative shape: absolute paths
// and ".." components are rejected before any system call. On Linux each
// path is opened with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) relative
// to the root descriptor; when the kernel refuses openat2 (ENOSYS, or EPERM
// from a seccomp filter) the Root falls back to a component walk that opens
// every directory with O_NOFOLLOW|O_DIRECTORY relative to the previous
// directory descriptor. Either way a symbolic link anywhere in the path is an
// error, and replacing a parent directory with a symlink while an operation
// runs cannot redirect it outside the root. On Windows each component is
// opened with NtCreateFile relative to the previous directory handle and
// FILE_OPEN_REPARSE_POINT, and a reparse point (symbolic link, junction,
// mount point) anywhere in the path is ErrSymlink (package winat).
//
// Reads open the final object non-blocking, require a regular file from the
// descriptor's own metadata (a FIFO or device is an error, never a hang) and
// read at most limit+1 bytes. Mutations keep the parent directory descriptor
// open, write a sibling temporary file created with O_EXCL, fsync it, re-read
// and compare the target against the caller's expected prior state
// immediately before commit, rename relative to the same parent descriptor
// and fsync the directory.
//
// The guard applies to the explicit paths given to a Root. It is not process
// containment.
package fsroot

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxFileBytes is the largest file a Root reads or writes by default
// (32 MiB, the product's per-file limit for read, edit and preview).
const MaxFileBytes = 32 << 20

// PathError is returned for a path whose shape is not workspace-relative.
type PathError struct {
	Path   string
	Reason string
}

// Error describes the rejected path.
func (e *PathError) Error() string {
	return fmt.Sprintf("invalid path %q: %s", e.Path, e.Reason)
}

// ErrSymlink reports a symbolic link somewhere in a path; built-in file
// operations never follow links.
var ErrSymlink = errors.New("path contains a symbolic link (links are not followed)")

// ErrEscape reports a path that would resolve outside the root.
var ErrEscape = errors.New("path resolves outside the workspace")

// CleanRel validates that p is a workspace-relative path shape and returns
// it cleaned. It rejects empty paths, absolute paths, ".." components and NUL
// bytes. The root itself is ".". On Windows both "/" and "\" separate
// components, and drive letters ("C:\x", "C:x"), UNC and device paths
// ("\\host\share", "\\?\C:\x") and rooted paths ("\x") are
// rejected like absolute paths; so is any other ":" (an alternate data
// stream). Each Windows component must also be a plain name: only
// letters, digits, marks, printable symbols and the ASCII punctuation
// listed in windowsNamePunct (an allowlist: control characters and
// <>:"|?* are not on it), no trailing dot or space, and not a device name
// (CON, PRN, AUX, NUL, COM0-9, LPT0-9, CONIN$, CONOUT$, with or without an
// extension). The Windows result is "/"-separated.
func CleanRel(p string) (string, error) { return cleanRel(p, runtime.GOOS == "windows") }

// cleanRel is CleanRel with the Windows rules selected by windows, so they
// are tested on every platform.
func cleanRel(p string, windows bool) (string, error) {
	switch {
	case p == "":
		return "", &PathError{Path: p, Reason: "empty path"}
	case strings.IndexByte(p, 0) >= 0:
		return "", &PathError{Path: p, Reason: "path contains a NUL byte"}
	case filepath.IsAbs(p), windows && windowsAbs(p):
		return "", &PathError{Path: p, Reason: "absolute paths are not allowed; use a path relative to the workspace root"}
	case windows && strings.IndexByte(p, ':') >= 0:
		return "", &PathError{Path: p, Reason: `":" is not allowed in a path on Windows (it names a drive or an alternate data stream)`}
	}
	sep := "/"
	if windows {
		sep = "/\\"
	}
	for _, c := range strings.FieldsFunc(p, func(r rune) bool { return strings.ContainsRune(sep, r) }) {
		if c == ".." {
			return "", &PathError{Path: p, Reason: `".." components are not allowed`}
		}
		if windows && c != "." {
			if reason := windowsName(c); reason != "" {
				return "", &PathError{Path: p, Reason: reason}
			}
		}
	}
	if windows {
		return path.Clean(strings.ReplaceAll(p, `\`, "/")), nil
	}
	return filepath.Clean(p), nil
}

// windowsAbs reports whether p is rooted or names a volume on Windows: a
// leading separator (which covers UNC "\\host" and device "\\?\"
// paths) or a drive letter, with or without a separator after it.
func windowsAbs(p string) bool {
	if p[0] == '/' || p[0] == '\\' {
		return true
	}
	return len(p) >= 2 && p[1] == ':' && ('a' <= p[0]|0x20 && p[0]|0x20 <= 'z')
}

// windowsNamePunct is the ASCII punctuation a Windows path component may
// hold besides letters, digits and the space.
const windowsNamePunct = "!#$%&'()+,-.;=@[]^_`{}~"

// windowsDevices are the names Win32 maps to devices in every directory,
// whatever the extension ("nul.txt" is NUL too).
var windowsDevices = map[string]bool{
	"CON": true, "PRN": true, "AUX": true, "NUL": true, "CONIN$": true, "CONOUT$": true,
	"COM0": true, "COM1": true, "COM2": true, "COM3": true, "COM4": true,
	"COM5": true, "COM6": true, "COM7": true, "COM8": true, "COM9": true,
	"COM\u00b9": true, "COM\u00b2": true, "COM\u00b3": true,
	"LPT0": true, "LPT1": true, "LPT2": true, "LPT3": true, "LPT4": true,
	"LPT5": true, "LPT6": true, "LPT7": true, "LPT8": true, "LPT9": true,
	"LPT\u00b9": true, "LPT\u00b2": true, "LPT\u00b3": true,
}

// windowsName returns why c cannot be a Windows path component, or "".
func windowsName(c string) string {
	if !utf8.ValidString(c) {
		return "a path component is not valid UTF-8"
	}
	for _, r := range c {
		switch {
		case r < utf8.RuneSelf && ('a' <= r|0x20 && r|0x20 <= 'z' || '0' <= r && r <= '9' || r == ' '):
		case r < utf8.RuneSelf && strings.ContainsRune(windowsNamePunct, r):
		case r >= utf8.RuneSelf && unicode.IsPrint(r):
		default:
			return fmt.Sprintf("character %q is not allowed in a path component on Windows", r)
		}
	}
	if last := c[len(c)-1]; last == '.' || last == ' ' {
		return "a path component ending in a dot or a space is not allowed on Windows (Windows strips it and would name another file)"
	}
	base, _, _ := strings.Cut(c, ".")
	if windowsDevices[strings.ToUpper(strings.TrimRight(base, " "))] {
		return fmt.Sprintf("%q names a device on Windows", c)
	}
	return ""
}
