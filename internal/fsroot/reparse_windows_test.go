package fsroot

import (
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// makeJunction makes link a junction (a mount-point reparse point) to the
// absolute directory target with FSCTL_SET_REPARSE_POINT, which needs no
// privilege.
func makeJunction(link, target string) error {
	if err := os.Mkdir(link, 0o755); err != nil {
		return err
	}
	p, err := windows.UTF16PtrFromString(link)
	if err != nil {
		return err
	}
	h, err := windows.CreateFile(p, windows.GENERIC_WRITE, 0, nil, windows.OPEN_EXISTING,
		windows.FILE_FLAG_OPEN_REPARSE_POINT|windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	sub, _ := windows.UTF16FromString(`\??\` + target)
	prt, _ := windows.UTF16FromString(target)
	// REPARSE_DATA_BUFFER, MountPointReparseBuffer: tag, data length,
	// reserved, then four USHORT offsets/lengths and the path buffer
	// (substitute name, NUL, print name, NUL).
	pathBytes := 2 * (len(sub) + len(prt))
	dataLen := 8 + pathBytes
	buf := make([]byte, 8+dataLen)
	le := func(off int, v uint32, n int) {
		for i := range n {
			buf[off+i] = byte(v >> (8 * i))
		}
	}
	le(0, windows.IO_REPARSE_TAG_MOUNT_POINT, 4)
	le(4, uint32(dataLen), 2)
	le(8, 0, 2)                       // SubstituteNameOffset
	le(10, uint32(2*(len(sub)-1)), 2) // SubstituteNameLength
	le(12, uint32(2*len(sub)), 2)     // PrintNameOffset
	le(14, uint32(2*(len(prt)-1)), 2) // PrintNameLength
	copy(unsafe.Slice((*uint16)(unsafe.Pointer(&buf[16])), len(sub)), sub)
	copy(unsafe.Slice((*uint16)(unsafe.Pointer(&buf[16+2*len(sub)])), len(prt)), prt)
	var n uint32
	return windows.DeviceIoControl(h, windows.FSCTL_SET_REPARSE_POINT, &buf[0], uint32(len(buf)), nil, 0, &n, nil)
}
