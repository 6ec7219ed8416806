package winat

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// ErrReparsePoint reports a component whose attributes include
// FILE_ATTRIBUTE_REPARSE_POINT; it is never followed.
var ErrReparsePoint = errors.New("reparse point (symbolic link, junction or mount point)")

// Access rights of a directory handle that windows does not name.
const (
	FILE_ADD_FILE         = 0x0002
	FILE_ADD_SUBDIRECTORY = 0x0004
)

// Info is the metadata of an opened object, from its handle.
type Info = windows.ByHandleFileInformation

// IsDir reports whether info describes a directory.
func IsDir(info *Info) bool { return info.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY != 0 }

// IsReparse reports whether info describes a reparse point.
func IsReparse(info *Info) bool {
	return info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0
}

// Size is the file size info records.
func Size(info *Info) int64 { return int64(info.FileSizeHigh)<<32 | int64(info.FileSizeLow) }

// Open opens name, one path component (or "." for dir itself), relative
// to the directory handle dir with NtCreateFile: access and disposition
// (windows.FILE_OPEN, FILE_CREATE, ...) as given, the create options
// plus FILE_OPEN_REPARSE_POINT and synchronous I/O, attrs for a created
// object. A reparse point is closed again and refused with
// ErrReparsePoint. It returns the handle and its metadata.
func Open(dir windows.Handle, name string, access, disposition, options, attrs uint32) (windows.Handle, *Info, error) {
	h, info, err := OpenLink(dir, name, access, disposition, options, attrs)
	if err != nil {
		return windows.InvalidHandle, nil, err
	}
	if IsReparse(info) {
		windows.CloseHandle(h)
		return windows.InvalidHandle, nil, ErrReparsePoint
	}
	return h, info, nil
}

// OpenLink is Open, but a reparse point is returned opened (the link
// itself, never its target) for the caller to report.
func OpenLink(dir windows.Handle, name string, access, disposition, options, attrs uint32) (windows.Handle, *Info, error) {
	if err := checkComponent(name); err != nil {
		return windows.InvalidHandle, nil, err
	}
	if name == "." {
		name = "" // an empty name relative to RootDirectory is the directory itself
	}
	uname, err := windows.NewNTUnicodeString(name)
	if err != nil {
		return windows.InvalidHandle, nil, err
	}
	oa := windows.OBJECT_ATTRIBUTES{
		RootDirectory: dir,
		ObjectName:    uname,
		Attributes:    windows.OBJ_CASE_INSENSITIVE,
	}
	oa.Length = uint32(unsafe.Sizeof(oa))
	if attrs == 0 {
		attrs = windows.FILE_ATTRIBUTE_NORMAL
	}
	var h windows.Handle
	var iosb windows.IO_STATUS_BLOCK
	err = windows.NtCreateFile(&h, access|windows.SYNCHRONIZE|windows.FILE_READ_ATTRIBUTES, &oa, &iosb, nil,
		attrs, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, disposition,
		options|windows.FILE_OPEN_REPARSE_POINT|windows.FILE_SYNCHRONOUS_IO_NONALERT|windows.FILE_OPEN_FOR_BACKUP_INTENT, 0, 0)
	if err != nil {
		return windows.InvalidHandle, nil, MapStatus(err)
	}
	info := new(Info)
	if err := windows.GetFileInformationByHandle(h, info); err != nil {
		windows.CloseHandle(h)
		return windows.InvalidHandle, nil, fmt.Errorf("query the handle's attributes: %w", err)
	}
	return h, info, nil
}

// checkComponent refuses anything but one path component: the NT object
// manager would otherwise walk a "\"-separated name itself, reparse points
// included.
func checkComponent(name string) error {
	switch {
	case name == "":
		return syscall.ERROR_FILE_NOT_FOUND
	case name == "..":
		return fmt.Errorf("%q: parent components are not allowed", name)
	case strings.ContainsAny(name, `\/`) || strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%q is not a single path component", name)
	}
	return nil
}

// MapStatus turns an NTSTATUS from NtCreateFile or NtSetInformationFile
// into the syscall.Errno that os and io/fs compare against (ENOTDIR,
// EEXIST and ELOOP are the invented Errno values of package syscall).
func MapStatus(err error) error {
	s, ok := err.(windows.NTStatus)
	if !ok {
		return err
	}
	switch s {
	case windows.STATUS_NOT_A_DIRECTORY:
		return syscall.ENOTDIR
	case windows.STATUS_FILE_IS_A_DIRECTORY:
		return syscall.EISDIR
	case windows.STATUS_OBJECT_NAME_COLLISION:
		return syscall.EEXIST
	case windows.STATUS_REPARSE_POINT_ENCOUNTERED, windows.STATUS_STOPPED_ON_SYMLINK:
		return ErrReparsePoint
	case windows.STATUS_DIRECTORY_NOT_EMPTY:
		return syscall.ENOTEMPTY
	}
	return s.Errno()
}

// Rename renames the object open as h to newName, one component relative
// to the directory handle dir (FILE_RENAME_INFORMATION.RootDirectory).
// With replace false an existing newName fails with syscall.EEXIST and
// is left as it was.
func Rename(h, dir windows.Handle, newName string, replace bool) error {
	if err := checkComponent(newName); err != nil {
		return err
	}
	u16, err := windows.UTF16FromString(newName)
	if err != nil {
		return err
	}
	u16 = u16[:len(u16)-1]
	// FILE_RENAME_INFORMATION: BOOLEAN ReplaceIfExists (padded), HANDLE
	// RootDirectory, ULONG FileNameLength, WCHAR FileName[].
	type header struct {
		ReplaceIfExists bool
		RootDirectory   windows.Handle
		FileNameLength  uint32
		FileName        [1]uint16
	}
	off := unsafe.Offsetof(header{}.FileName)
	buf := make([]uint64, (int(off)+2*len(u16)+7)/8+1) // 8-byte aligned
	hd := (*header)(unsafe.Pointer(&buf[0]))
	hd.ReplaceIfExists = replace
	hd.RootDirectory = dir
	hd.FileNameLength = uint32(2 * len(u16))
	copy(unsafe.Slice((*uint16)(unsafe.Pointer(uintptr(unsafe.Pointer(hd))+off)), len(u16)), u16)
	// The whole buffer: never shorter than sizeof(FILE_RENAME_INFORMATION),
	// which Windows checks; FileNameLength bounds the name.
	size := uint32(8 * len(buf))
	var iosb windows.IO_STATUS_BLOCK
	err = windows.NtSetInformationFile(h, &iosb, (*byte)(unsafe.Pointer(hd)), size, windows.FileRenameInformation)
	if err != nil {
		return MapStatus(err)
	}
	return nil
}

// Delete marks the object open as h (opened with DELETE access) for
// deletion: POSIX semantics where the file system has them (the name
// goes at once), else the classic disposition (the name goes when the
// last handle closes).
func Delete(h windows.Handle) error {
	type dispositionEx struct{ Flags uint32 }
	ex := dispositionEx{Flags: windows.FILE_DISPOSITION_DELETE | windows.FILE_DISPOSITION_POSIX_SEMANTICS}
	var iosb windows.IO_STATUS_BLOCK
	err := windows.NtSetInformationFile(h, &iosb, (*byte)(unsafe.Pointer(&ex)), uint32(unsafe.Sizeof(ex)), windows.FileDispositionInformationEx)
	if err == nil {
		return nil
	}
	switch err {
	case windows.STATUS_INVALID_INFO_CLASS, windows.STATUS_INVALID_PARAMETER, windows.STATUS_NOT_SUPPORTED,
		windows.STATUS_NOT_IMPLEMENTED, windows.STATUS_INVALID_DEVICE_REQUEST:
		// An older system, a file system without POSIX semantics, or Wine.
	default:
		return MapStatus(err)
	}
	type disposition struct{ DeleteFile bool }
	d := disposition{DeleteFile: true}
	if err := windows.NtSetInformationFile(h, &iosb, (*byte)(unsafe.Pointer(&d)), uint32(unsafe.Sizeof(d)), windows.FileDispositionInformation); err != nil {
		return MapStatus(err)
	}
	return nil
}

// Read reads from the synchronous handle h; end of file is 0, nil.
func Read(h windows.Handle, p []byte) (int, error) {
	var n uint32
	err := windows.ReadFile(h, p, &n, nil)
	if err == windows.ERROR_HANDLE_EOF || err == windows.ERROR_BROKEN_PIPE {
		return int(n), nil
	}
	return int(n), err
}

// WriteAll writes all of data to h.
func WriteAll(h windows.Handle, data []byte) error {
	for len(data) > 0 {
		var n uint32
		chunk := data[:min(len(data), 1<<30)]
		if err := windows.WriteFile(h, chunk, &n, nil); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// Dup duplicates h within this process, with the same access.
func Dup(h windows.Handle) (windows.Handle, error) {
	p := windows.CurrentProcess()
	var out windows.Handle
	if err := windows.DuplicateHandle(p, h, p, &out, 0, false, windows.DUPLICATE_SAME_ACCESS); err != nil {
		return windows.InvalidHandle, err
	}
	return out, nil
}
