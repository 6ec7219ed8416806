package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hardenProcess makes octet's own process unreadable to the processes its
// tools start, which run as the same user: with PR_SET_DUMPABLE off,
// /proc/<octet>/environ (which may hold OPENAI_API_KEY), mem, maps and fd
// belong to root, ptrace and process_vm_readv are refused, and no core
// file is written. Commands octet runs are separate programs (execve
// makes them dumpable again) and get an environment without the key.
// What remains readable to them is listed in docs/security.md.
func hardenProcess() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make octet's process undumpable (prctl PR_SET_DUMPABLE): %w", err)
	}
	return nil
}
