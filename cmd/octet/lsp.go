package main

import (
	"context"
	"errors"
	"log/slog"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/octet-agent/octet/cmd/octet/internal/dialects"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/host/stack"
	"github.com/octet-agent/octet/internal/config"
)

const lspUsage = "octet lsp [flags]   (speaks LSP + octet/* on stdin/stdout)"

func runLSP(ctx context.Context, args []string, e env) error {
	e, restore := editorStdio(e)
	defer restore()
	d, err := startDialect("lsp", lspUsage, args, e)
	if err != nil {
		return err
	}
	defer d.w.Close()
	err = dialects.ServeLSP(ctx, e.stdin, e.stdout, d.options())
	switch {
	case errors.Is(err, dialects.ErrExitWithoutShutdown):
		return &exitError{code: exitFailed}
	case ctx.Err() != nil:
		return &exitError{code: exitCancelled}
	}
	return err
}

// dialect is what an editor protocol (octet lsp, octet acp) serves: the
// runtime over the workspaces' configuration and agents.
type dialect struct {
	rt  *host.Runtime
	w   *stack.Workspaces
	log *slog.Logger
	// startErr is a mistake in a configuration file found at startup: the
	// dialect serves anyway and reports it (fixing the file is enough).
	startErr error
}

// options are what the dialect is served with.
func (d *dialect) options() dialects.Options {
	return dialects.Options{Runtime: d.rt, Logger: d.log, Version: versionString(), ConfigError: d.startErr}
}

// startDialect parses the editor protocol command's flags and builds its
// runtime (stack.Workspaces). The caller closes d.w.
func startDialect(name, usage string, args []string, e env) (*dialect, error) {
	var flags config.Flags
	fs := newFlagSet(name, usage, e.stdout)
	addPolicyFlags(fs, &flags)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageErrorf("%s takes no arguments: %s", name, usage)
	}
	// An editor that closes its end of stdout must not kill octet with
	// SIGPIPE before the runs are settled: the write fails instead, and the
	// server treats it as the client gone (runs cancelled, settled, exit).
	signal.Ignore(syscall.SIGPIPE)
	log := newLogger(e.stderr, e.lookup)
	w := stack.NewWorkspaces(e.lookup, flags, log)
	// Resolve what does not depend on the workspace now. A flag mistake
	// fails at startup; a mistake in a file (config.toml, credentials) does
	// not: the editor gets its handshake, the error (file:line) as a
	// message, and again from every request that needs the configuration,
	// which reads it anew (fixing the file is enough).
	startErr := w.LoadGlobal()
	if _, ok := errors.AsType[*config.UsageError](startErr); ok {
		w.Close()
		return nil, startErr
	}
	if startErr != nil {
		log.Error(startErr.Error())
	}
	home, origin, err := config.HomeOrigin(e.lookup)
	if err != nil {
		w.Close()
		return nil, err
	}
	if origin == config.HomeFromAccount {
		log.Warn("HOME is not set: octet keeps its state in " + home + ", in the account's home directory (set OCTET_HOME to choose another)")
	} else {
		log.Info("octet's state directory", "dir", home, "from", origin)
	}
	return &dialect{rt: w.Runtime(filepath.Join(home, "sessions")), w: w, log: log, startErr: startErr}, nil
}
