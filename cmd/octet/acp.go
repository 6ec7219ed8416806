package main

import (
	"context"

	"github.com/octet-agent/octet/acp"
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
	defer d.w.close()
	err = acp.Serve(ctx, e.stdin, e.stdout, acp.Options{
		Runtime: d.rt, Logger: d.log, Version: versionString(), ConfigError: d.startErr,
	})
	if ctx.Err() != nil {
		return &exitError{code: exitCancelled}
	}
	return err
}
