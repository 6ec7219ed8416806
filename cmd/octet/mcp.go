package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/tools/mcp"
)

// mcpGroup is `octet mcp`: list the configured MCP servers (without
// starting any) or forget a server's pinned tool definitions.
var mcpGroup = group{name: "mcp", subs: []subcommand{
	{"list", "octet mcp list", mcpList},
	{"unpin", "octet mcp unpin <server>", mcpUnpin},
}}

func mcpList(_ context.Context, args []string, e env) error {
	const synopsis = "octet mcp list"
	if _, err := parseSub(newFlagSet("mcp list", synopsis, e.stdout), synopsis, args, 0); err != nil {
		return err
	}
	cfg, err := loadConfig(e, e.cwd, config.Flags{}, newLogger(e.stderr, e.lookup))
	if err != nil {
		return err
	}
	listMCP(cfg, mcp.OpenPins(cfg.Home), e.stdout)
	return nil
}

func mcpUnpin(_ context.Context, args []string, e env) error {
	const synopsis = "octet mcp unpin <server>"
	pos, err := parseSub(newFlagSet("mcp unpin", synopsis, e.stdout), synopsis, args, 1)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(e, e.cwd, config.Flags{}, newLogger(e.stderr, e.lookup))
	if err != nil {
		return err
	}
	name := pos[0]
	if !slices.ContainsFunc(cfg.MCPServers, func(s config.MCPServer) bool { return s.Name == name }) {
		return usageErrorf("no MCP server %q in %s (octet mcp list shows the servers)", visible(name), filepath.Join(cfg.Home, "config.toml"))
	}
	if err := mcp.OpenPins(cfg.Home).Forget(name); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "forgot the pinned tool definitions of %s: its next start pins the definitions it presents then\n", name)
	return nil
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
