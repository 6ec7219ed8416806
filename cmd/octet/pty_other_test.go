//go:build unix && !linux

package main

import (
	"bytes"
	"os/exec"
	"testing"
)

// runOnPTY is Linux-only (pty_test.go); elsewhere the terminal tests skip.
func runOnPTY(t *testing.T, cmd *exec.Cmd, prompt, answer string) (*bytes.Buffer, bool, error) {
	t.Helper()
	t.Skip("pseudo-terminal tests run on Linux")
	return nil, false, nil
}
