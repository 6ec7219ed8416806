package proc

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/octet-agent/octet/internal/sandbox"
)

// ErrGuardLost reports that the guard ended without reporting that the
// command's process tree was gone (it was killed, or stopped answering and
// was killed by octet). The command's process group has been killed; a
// process that left the group may survive.
var ErrGuardLost = errors.New("process guard lost")

// Command describes a command to run under a guard.
type Command struct {
	// Path is the program to execute (an absolute path; PATH is not
	// searched).
	Path string
	// Args is the complete argument vector, Args[0] included.
	Args []string
	// Dir is the working directory ("" = octet's).
	Dir string
	// Env is the command's environment.
	Env []string
	// Stdin, Stdout and Stderr are handed to the command (duplicates,
	// passed to its guard with the command); nil means /dev/null. The
	// caller keeps its copies and should close them once Prepare or
	// Start returned.
	Stdin, Stdout, Stderr *os.File
	// Grace is how long the process tree gets between SIGTERM and
	// SIGKILL when it is stopped.
	Grace time.Duration
	// Sandbox, when non-nil, confines the command and everything it
	// starts (see internal/sandbox). Start fails rather than run it
	// unconfined. Windows refuses a sandboxed command.
	Sandbox *sandbox.Spec
}

// Status is how a command ended.
type Status struct {
	// Code is the exit code, or -1 when the command was killed by a
	// signal or its status is unknown.
	Code int
	// Signal is the signal that killed the command, or 0.
	Signal syscall.Signal
}

// String describes the status ("exit code 3", "signal killed").
func (s Status) String() string {
	if s.Signal != 0 {
		return "signal " + s.Signal.String()
	}
	return "exit code " + strconv.Itoa(s.Code)
}
