// Command octet is the octet coding-agent runtime: an LSP-style server for
// editors (octet lsp), a headless runner (octet exec), session inspection
// (octet sessions), a self-contained demo (octet demo) and octet version.
//
// This package only parses flags and wires the library packages together.
// Exit codes (documented in the README):
//
//	0    success; for exec, the run completed
//	1    the run failed, or a runtime error (provider unreachable, I/O)
//	2    usage or configuration error (bad flag, conflicting flags, unknown
//	     tool, config file error, missing or unsafe credentials)
//	3    exec: the run stopped at its turn limit (max_turns)
//	130  exec: cancelled by SIGINT, SIGTERM or SIGHUP
//	141  exec, demo: standard output closed (… | head); the run was cancelled
//	     and settled, not killed by SIGPIPE
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Exit codes.
const (
	exitOK        = 0
	exitFailed    = 1
	exitUsage     = 2
	exitMaxTurns  = 3
	exitCancelled = 130
)

// env is the process environment the command runs in; tests substitute it.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	lookup func(string) (string, bool)
	cwd    string
	// tty opens the controlling terminal for approval prompts; nil or an
	// error means "no terminal".
	tty func() (io.ReadWriteCloser, error)
	// stdinIsTerminal reports whether stdin is an interactive terminal.
	stdinIsTerminal bool
	// stdoutIsTerminal reports whether stdout is a terminal, and
	// stdoutIsPipe whether it is a pipe: answer text then streams as it
	// arrives; otherwise (a file) only committed answer text is written.
	stdoutIsTerminal, stdoutIsPipe bool
	// stderrIsTerminal reports whether stderr is a terminal: reasoning
	// summaries are then dimmed.
	stderrIsTerminal bool
	// stdinIsData reports whether stdin is a pipe or a regular file: exec
	// appends it to a prompt argument as a context block.
	stdinIsData bool
	// setDefaultLog installs the process's default logger (what packages
	// without a logger of their own log to); nil leaves it (tests).
	setDefaultLog func(*slog.Logger)
}

func main() {
	// Before anything reads a credential: the tools octet runs must not
	// be able to read this process's environment or memory.
	if err := hardenProcess(); err != nil {
		fmt.Fprintf(os.Stderr, "octet: %v\n", err)
		os.Exit(exitFailed)
	}
	ctx, stop := signal.NotifyContext(context.Background(), cancelSignals()...)
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "octet: current directory: %v\n", err)
		os.Exit(exitFailed)
	}
	e := env{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		lookup: os.LookupEnv, cwd: cwd, tty: openTTY,
		stdinIsTerminal: isTerminal(os.Stdin), stdoutIsTerminal: isTerminal(os.Stdout), stderrIsTerminal: isTerminal(os.Stderr),
		stdoutIsPipe: isPipe(os.Stdout), stdinIsData: isPipe(os.Stdin) || isRegular(os.Stdin),
		setDefaultLog: slog.SetDefault,
	}
	code := run(ctx, os.Args[1:], e)
	stop()
	os.Exit(code)
}

// cancelSignals are the signals that cancel the command: a run settles
// with its checkpoint instead of dying mid-write. SIGHUP (the terminal
// closed) is one unless it is ignored (nohup): Notify would undo that.
func cancelSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

const usageText = `usage: octet <command> [flags]

commands:
  demo                      run the whole stack against the built-in scripted provider
  lsp [flags]               serve the editor protocol on stdin/stdout
  acp [flags]               serve the Agent Client Protocol (Zed) on stdin/stdout
  exec [flags] "prompt"     run one prompt headless in the current directory
                            ("-" reads the prompt from stdin)
  sessions list             list sessions with their cost
  sessions show <id>        print a session's transcript (with entry ids), usage and cost
  sessions export <id>      print a session as redacted JSONL
  sessions diff <id>        print what octet's tools changed in the last run
  sessions rewind <id> <entry> [--files] [--conversation] [--dry-run]
                            restore the files octet changed after an entry
                            and/or move the conversation back to it
  sessions delete <id>...   delete sessions (with their child agents' sessions)
  sessions prune --older-than <age> [--failed] [--dry-run]
                            delete the sessions not updated for <age> (30d, 12h)
  models [--json]           list the models: octet's table merged with the
                            endpoint's own list (what octet does not know: unknown)
  login [--provider NAME]   ask for the selected provider's API key (not echoed)
                            and save it in octet's credentials file, private to you
  mcp list                  list the configured MCP servers (starts none)
  mcp unpin <server>        forget a server's pinned tool definitions
  version                   print the version
  help [command]            print this, or a command's help

Session and entry ids may be given as any unambiguous prefix.
Run "octet <command> -h" (or "octet help <command>") for a command's flags.
`

// commandNames are the commands dispatch knows (help excepted).
var commandNames = []string{"demo", "lsp", "acp", "exec", "sessions", "models", "login", "mcp", "version"}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usageText)
		return exitUsage
	}
	// Approval notices come from the agent's goroutine while the renderer
	// writes events: one lock orders every write to stdout and stderr. The
	// editor dialects keep their own files: their stdout is written only
	// by the protocol's framer, under its own lock, and must stay an
	// *os.File the runtime can poll (editorStdio).
	cmd, rest := args[0], args[1:]
	if cmd != "lsp" && cmd != "acp" {
		var mu sync.Mutex
		e.stdout = &lockedWriter{mu: &mu, w: e.stdout}
		e.stderr = &lockedWriter{mu: &mu, w: e.stderr}
	}
	if e.setDefaultLog != nil {
		e.setDefaultLog(newLogger(e.stderr, e.lookup))
	}
	return report(dispatch(ctx, cmd, rest, e), e)
}

// dispatch runs command cmd with its arguments.
func dispatch(ctx context.Context, cmd string, args []string, e env) error {
	switch cmd {
	case "demo":
		return runDemo(ctx, args, e)
	case "lsp":
		return runLSP(ctx, args, e)
	case "acp":
		return runACP(ctx, args, e)
	case "exec":
		return runExec(ctx, args, e)
	case "sessions":
		return sessionsGroup.run(ctx, args, e)
	case "models":
		return runModels(ctx, args, e)
	case "login":
		return runLogin(ctx, args, e)
	case "mcp":
		return mcpGroup.run(ctx, args, e)
	case "version", "--version", "-version":
		return runVersion(args, e)
	case "help", "-h", "--help", "-help":
		return runHelp(ctx, args, e)
	}
	if s := closestName(cmd, commandNames); s != "" {
		return usageErrorf("unknown command %q; did you mean %q? (octet help lists the commands)", cmd, s)
	}
	return usageErrorf("unknown command %q; run octet help", cmd)
}

// isPipe reports whether f is a pipe (or FIFO).
func isPipe(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeNamedPipe != 0
}

// isRegular reports whether f is a regular file.
func isRegular(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode().IsRegular()
}

// lockedWriter serialises writes to w under a lock shared by writers.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// exitError carries a specific exit code (and an optional message).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// report prints err (if any) and maps it to an exit code.
func report(err error, e env) int {
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	if xe, ok := errors.AsType[*exitError](err); !ok || xe.err != nil {
		fmt.Fprintf(e.stderr, "octet: %s\n", visible(err.Error()))
	}
	return code
}
