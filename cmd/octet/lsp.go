package main

import (
	"context"
)

func runLSP(ctx context.Context, args []string, e env) error {
	return usageErrorf("octet lsp: not wired yet")
}
