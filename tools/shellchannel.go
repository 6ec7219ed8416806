package tools

import "encoding/json"

// This file connects the built-in bash tool to the broker's shell process
// channel. It lives beside the broker (not in bash.go) because the channel
// is the broker's contract; the bash tool only reports its exact command.

var _ ShellCommander = (*BashTool)(nil)

// ShellCommand returns the exact command line a bash call would run, for
// the broker's read-only allowlist. It runs nothing.
func (t *BashTool) ShellCommand(args json.RawMessage) (string, error) {
	a, _, err := t.parse(args)
	if err != nil {
		return "", err
	}
	return *a.Command, nil
}
