// Package dialects is the command's entry to the editor protocols: it
// serves octet lsp (package server, LSP + octet/*) and octet acp (package
// acp) over the runtime the command built. It is the only package of
// cmd/octet that imports a dialect; everything else the command does
// (exec, sessions, rewind, diff) goes through the host (package host), as
// the dialects themselves do.
package dialects

import (
	"context"
	"io"
	"log/slog"

	"github.com/octet-agent/octet/acp"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/server"
)

// Options are what both dialects are served with.
type Options struct {
	// Runtime builds the sessions' agents.
	Runtime *host.Runtime
	// Logger receives the logs (stderr: stdout is the protocol).
	Logger *slog.Logger
	// Version is octet's version, reported to the client.
	Version string
	// ConfigError is a configuration problem found at startup, reported
	// to the client rather than refusing to serve.
	ConfigError error
}

// ErrExitWithoutShutdown is what ServeLSP returns when the client sent
// exit without a preceding shutdown (LSP asks for exit status 1 then).
var ErrExitWithoutShutdown = server.ErrExitWithoutShutdown

// ServeLSP speaks LSP + octet/* on in and out until the client exits, in
// ends or ctx is done (server.Serve).
func ServeLSP(ctx context.Context, in io.Reader, out io.Writer, o Options) error {
	return server.Serve(ctx, in, out, server.Options{
		Runtime: o.Runtime, Logger: o.Logger, Version: o.Version, ConfigError: o.ConfigError,
	})
}

// ServeACP speaks the Agent Client Protocol on in and out until in ends
// or ctx is done (acp.Serve).
func ServeACP(ctx context.Context, in io.Reader, out io.Writer, o Options) error {
	return acp.Serve(ctx, in, out, acp.Options{
		Runtime: o.Runtime, Logger: o.Logger, Version: o.Version, ConfigError: o.ConfigError,
	})
}
