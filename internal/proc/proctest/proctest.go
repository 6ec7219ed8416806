// Package proctest holds helpers for tests that check which processes
// still run (Linux /proc). Only tests import it.
package proctest

import (
	"bytes"
	"fmt"
	"os"
)

// Gone reports whether pid no longer runs: it is absent, or a zombie
// (exited, waiting to be reaped).
func Gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
