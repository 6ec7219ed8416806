package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/octet-agent/octet/host/stack"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider"
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
	cfg, err := stack.LoadConfig(e.lookup, e.cwd, config.Flags{}, newLogger(e.stderr, e.lookup))
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
	cfg, err := stack.LoadConfig(e.lookup, e.cwd, config.Flags{}, newLogger(e.stderr, e.lookup))
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
// directory with no flags and why not, and how many tools are pinned (or
// why the pins cannot be read).
func listMCP(cfg *config.Config, pins *mcp.PinStore, w io.Writer) {
	if len(cfg.MCPServers) == 0 {
		fmt.Fprintln(w, "no MCP servers configured ([mcp_servers.NAME] in config.toml)")
		return
	}
	pinErr := pins.Check()
	if pinErr != nil {
		fmt.Fprintf(w, "every MCP tool is withheld: %s\n", visible(pinErr.Error()))
	}
	for i := range cfg.MCPServers {
		s := &cfg.MCPServers[i]
		transport := "stdio " + s.Command
		if s.URL != "" {
			transport = "http " + provider.RedactURL(s.URL) // a query may carry a key
		}
		state := "starts"
		if why := cfg.MCPServerBlocked(s); why != "" {
			state = "not started: " + why
		}
		pinned := "never enabled: not pinned yet"
		if p, ok := pins.Server(s.Name); pinErr != nil {
			pinned = "pins unreadable (above)"
		} else if ok {
			pinned = fmt.Sprintf("%d tool definitions pinned", len(p))
		}
		fmt.Fprintf(w, "%s\t%s\n\t%s\n\t%s\n", s.Name, visible(transport), visible(state), pinned)
	}
}

// checkToolsFlag refuses, before anything starts, a --tools name
// mcp__<server>__<tool> whose server is not configured.
func checkToolsFlag(cfg *config.Config) error {
	if cfg.Tools.Source != config.SourceFlag {
		return nil
	}
	for _, n := range cfg.Tools.Value {
		server, _, ok := config.SplitMCPToolName(n)
		if ok && !slices.ContainsFunc(cfg.MCPServers, func(s config.MCPServer) bool { return s.Name == server }) {
			return usageErrorf("--tools %s: no MCP server %q is configured (octet mcp list shows the servers; an [mcp_servers.NAME] table in %s defines one)",
				n, server, filepath.Join(cfg.Home, "config.toml"))
		}
	}
	return nil
}

// checkListedTools refuses a --tools name of a running server's tool
// that the server does not list (infos: the servers as started), once it
// has listed its tools; a tool of a server that is not running cannot be
// known, and is warned about.
func checkListedTools(cfg *config.Config, infos []mcp.ServerInfo, log *slog.Logger) error {
	if cfg.Tools.Source != config.SourceFlag {
		return nil
	}
	for _, n := range cfg.Tools.Value {
		server, _, ok := config.SplitMCPToolName(n)
		i := slices.IndexFunc(infos, func(s mcp.ServerInfo) bool { return s.Name == server })
		if !ok || i < 0 {
			continue
		}
		si := infos[i]
		if si.State != mcp.StateRunning {
			why := si.State
			if si.Reason != "" {
				why += ": " + si.Reason
			}
			log.Warn(fmt.Sprintf("--tools names %s, but MCP server %s is not running (%s), so that tool is not offered", n, server, why))
			continue
		}
		if !slices.ContainsFunc(si.Tools, func(t mcp.ToolInfo) bool { return t.Name == n }) {
			names := make([]string, len(si.Tools))
			for i, t := range si.Tools {
				names[i] = t.Name
			}
			return usageErrorf("--tools %s: MCP server %s has no such tool; it lists %s", n, server, strings.Join(names, ", "))
		}
	}
	return nil
}
