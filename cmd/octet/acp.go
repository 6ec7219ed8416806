package main

import (
	"context"

	"github.com/octet-agent/octet/cmd/octet/internal/dialects"
)

const acpUsage = "octet acp [flags]   (speaks the Agent Client Protocol on stdin/stdout)"

// runACP serves the Agent Client Protocol (Zed and the other ACP
// clients) with the same flags, configuration and agent as octet lsp.
func runACP(ctx context.Context, args []string, e env) error {
	e, restore := editorStdio(e)
	defer restore()
	d, err := startDialect("acp", acpUsage, args, e)
	if err != nil {
		return err
	}
	defer d.w.Close()
	err = dialects.ServeACP(ctx, e.stdin, e.stdout, d.options())
	if ctx.Err() != nil {
		return &exitError{code: exitCancelled}
	}
	return err
}
