package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/tools/mcp"
)

const mcpUsage = "octet mcp list | unpin <server>"

// runMCP is `octet mcp`: list the configured MCP servers (without
// starting any) or forget a server's pinned tool definitions.
func runMCP(_ context.Context, args []string, e env) error {
	fs := newFlagSet("mcp", mcpUsage, e.stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		fs.Usage()
		return &exitError{code: exitUsage}
	}
	cfg, err := loadConfig(e, e.cwd, config.Flags{}, slog.New(slog.NewTextHandler(e.stderr, nil)))
	if err != nil {
		return err
	}
	pins := mcp.OpenPins(cfg.Home)
	switch args[0] {
	case "list":
		if len(args) != 1 {
			return usageErrorf("usage: octet mcp list")
		}
		listMCP(cfg, pins, e.stdout)
		return nil
	case "unpin":
		if len(args) != 2 {
			return usageErrorf("usage: octet mcp unpin <server>")
		}
		name := args[1]
		if !slices.ContainsFunc(cfg.MCPServers, func(s config.MCPServer) bool { return s.Name == name }) {
			return usageErrorf("no MCP server %q in %s/config.toml", name, cfg.Home)
		}
		if err := pins.Forget(name); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "forgot the pinned tool definitions of %s: its next start pins the definitions it presents then\n", name)
		return nil
	}
	return usageErrorf("unknown mcp command %q; usage: %s", args[0], mcpUsage)
}

// listMCP prints each configured server, whether it would start in this
// directory with no flags and why not, and how many tools are pinned.
func listMCP(cfg *config.Config, pins *mcp.PinStore, w io.Writer) {
	if len(cfg.MCPServers) == 0 {
		fmt.Fprintln(w, "no MCP servers configured ([mcp_servers.NAME] in config.toml)")
		return
	}
	for i := range cfg.MCPServers {
		s := &cfg.MCPServers[i]
		transport := "stdio " + s.Command
		if s.URL != "" {
			transport = "http " + s.URL
		}
		state := "starts"
		if why := cfg.MCPServerBlocked(s); why != "" {
			state = "not started: " + why
		}
		pinned := "never enabled: not pinned yet"
		if p, ok := pins.Server(s.Name); ok {
			pinned = fmt.Sprintf("%d tool definitions pinned", len(p))
		}
		fmt.Fprintf(w, "%s\t%s\n\t%s\n\t%s\n", s.Name, visible(transport), visible(state), pinned)
	}
}
