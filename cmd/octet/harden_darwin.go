package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hardenProcess refuses debugger attachment to octet's process
// (ptrace PT_DENY_ATTACH), the closest macOS has to Linux's
// PR_SET_DUMPABLE: task_for_pid needs entitlements or root there anyway.
// A same-user process can still read octet's environment through
// sysctl(KERN_PROCARGS2) (ps eww); docs/security.md says so.
func hardenProcess() error {
	if err := unix.PtraceDenyAttach(); err != nil {
		return fmt.Errorf("deny debugger attachment to octet's process (ptrace PT_DENY_ATTACH): %w", err)
	}
	return nil
}
