package main

import (
	"context"
	"errors"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/octet-agent/octet/acp"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/server"
)

const acpUsage = "octet acp [flags]   (speaks the Agent Client Protocol on stdin/stdout)"

// runACP serves the Agent Client Protocol (Zed and the other ACP
// clients) with the same flags, configuration and agent as octet lsp.
func runACP(ctx context.Context, args []string, e env) error {
	var flags config.Flags
	fs := newFlagSet("acp", acpUsage, e.stderr)
	addPolicyFlags(fs, &flags)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("acp takes no arguments: %s", acpUsage)
	}
	signal.Ignore(syscall.SIGPIPE)
	log := newLogger(e.stderr, e.lookup)
	w := &workspaces{e: e, flags: flags, log: log, contexts: map[string]*watchedContext{}}
	defer w.close()
	// As for lsp: a flag mistake fails now; a mistake in a file is logged
	// and reported by session/new until it is fixed.
	startErr := w.loadGlobal()
	if _, ok := errors.AsType[*config.UsageError](startErr); ok {
		return startErr
	}
	if startErr != nil {
		log.Error(startErr.Error())
	}
	home, err := config.HomeDir(e.lookup)
	if err != nil {
		return err
	}
	rt := &server.Runtime{
		SessionsDir: filepath.Join(home, "sessions"), NewAgent: w.newAgent,
		ResolveModel: w.resolveModel, ExplainError: w.explain, Catalog: w.catalog,
	}
	err = acp.Serve(ctx, interruptibleStdin(e.stdin), e.stdout, acp.Options{
		Runtime: rt, Logger: log, Version: versionString(), ConfigError: startErr,
	})
	if ctx.Err() != nil {
		return &exitError{code: exitCancelled}
	}
	return err
}
