// Package winat is the handle-relative, no-follow file primitives the
// workspace file operations use on Windows: every name is a single path
// component opened with NtCreateFile relative to an open directory handle
// (OBJECT_ATTRIBUTES.RootDirectory) and FILE_OPEN_REPARSE_POINT, and an
// object whose attributes include FILE_ATTRIBUTE_REPARSE_POINT (a
// symbolic link, junction, mount point or any other reparse point) is
// refused unless the caller asks to see it. Renames and deletions work on
// a handle opened that way, with the new name relative to the same
// directory handle. The package is empty on other systems.
package winat
