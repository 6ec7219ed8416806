package config

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// createPrivate creates name, which must not exist (a stale one left by
// a crash is removed first), owned by the user with a protected DACL
// granting only the user full access, set as the file is created.
func createPrivate(name string) (*os.File, error) {
	me, err := currentUserSID()
	if err != nil {
		return nil, fmt.Errorf("find the current user: %w", err)
	}
	sd, err := windows.SecurityDescriptorFromString(fmt.Sprintf("O:%sD:P(A;;FA;;;%s)", me, me))
	if err != nil {
		return nil, fmt.Errorf("build a private security descriptor: %w", err)
	}
	sa := &windows.SecurityAttributes{SecurityDescriptor: sd}
	sa.Length = uint32(unsafe.Sizeof(*sa))
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	create := func() (windows.Handle, error) {
		return windows.CreateFile(p, windows.GENERIC_WRITE, 0, sa, windows.CREATE_NEW, windows.FILE_ATTRIBUTE_NORMAL|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	}
	h, err := create()
	if errors.Is(err, windows.ERROR_FILE_EXISTS) {
		if err := os.Remove(name); err != nil {
			return nil, err
		}
		h, err = create()
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(h), name), nil
}
