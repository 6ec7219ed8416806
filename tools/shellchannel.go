package tools

import (
	"encoding/json"
	"os"
)

// This file connects the built-in bash tool to the broker's shell process
// channel. It lives beside the broker (not in bash.go) because the channel
// is the broker's contract; the bash tool only reports its exact call.

// ShellCall is one shell-channel call exactly as it would run: what the
// broker's read-only check (CheckReadOnly) decides on.
type ShellCall struct {
	// Command is the complete command line passed to Shell with -c.
	Command string
	// Dir is the absolute working directory the command runs in (the
	// workspace root); relative operands are resolved beneath it.
	Dir string
	// Env is exactly the environment the command gets.
	Env []string
	// Shell is the absolute path of the shell that runs Command.
	Shell string
}

var _ ShellCommander = (*BashTool)(nil)

// ShellCommand returns the exact call a bash invocation would make: the
// command, the workspace root it runs in, the environment it gets
// (commandEnv of the process environment, as run uses) and the resolved
// shell. It runs nothing.
func (t *BashTool) ShellCommand(args json.RawMessage) (ShellCall, error) {
	a, _, err := t.parse(args)
	if err != nil {
		return ShellCall{}, err
	}
	return ShellCall{Command: *a.Command, Dir: t.cfg.Root, Env: commandEnv(os.Environ(), t.cfg.ScrubEnv), Shell: t.shell}, nil
}
