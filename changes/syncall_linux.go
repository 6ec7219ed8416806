package changes

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncAll makes the files (all in the file system of dir) durable with
// one syncfs: the data and metadata of everything written there, their
// directory entries included. Since Linux 5.8 syncfs reports writeback
// errors; before, a failed writeback would go unseen, so the files are
// synced one by one there.
func syncAll(dir string, files []string) error {
	if !syncfsReportsErrors() {
		return syncEach(files)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncfs: %w", err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}

// syncfsReportsErrors reports whether the kernel is 5.8 or later.
func syncfsReportsErrors() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || major == 5 && minor >= 8
}
