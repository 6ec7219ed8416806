package acp

import (
	"encoding/json"

	"github.com/octet-agent/octet/host"
)

// maxMCPServers bounds session/new's mcpServers.
const maxMCPServers = 32

// mcpServersOf decodes session/new's mcpServers: stdio servers
// ({name, command, args, env: [{name, value}]}) and streamable HTTP ones
// ({type: "http", name, url, headers: [{name, value}]}). SSE servers are
// refused (initialize advertises http only). They start under the rules
// of configured servers: only under unsafe_host, pinned, never under
// --offline.
func mcpServersOf(raw []json.RawMessage) ([]host.MCPServer, error) {
	if len(raw) > maxMCPServers {
		return nil, invalidParams("mcpServers has %d entries, at most %d", len(raw), maxMCPServers)
	}
	var out []host.MCPServer
	for i, r := range raw {
		var m struct {
			Type    string   `json:"type"`
			Name    string   `json:"name"`
			Command string   `json:"command"`
			Args    []string `json:"args"`
			Env     []pair   `json:"env"`
			URL     string   `json:"url"`
			Headers []pair   `json:"headers"`
		}
		if err := json.Unmarshal(r, &m); err != nil {
			return nil, invalidParams("mcpServers[%d]: %v", i, err)
		}
		s := host.MCPServer{Name: m.Name}
		switch m.Type {
		case "", "stdio":
			if m.Command == "" {
				return nil, invalidParams("mcpServers[%d] (%s): a stdio server needs a command", i, truncate(m.Name, 60))
			}
			s.Command, s.Args, s.Env = m.Command, m.Args, pairs(m.Env)
		case "http":
			if m.URL == "" {
				return nil, invalidParams("mcpServers[%d] (%s): an http server needs a url", i, truncate(m.Name, 60))
			}
			s.URL, s.Headers = m.URL, pairs(m.Headers)
		default:
			return nil, invalidParams("mcpServers[%d] (%s): transport %q is not supported (octet speaks stdio and http)", i, truncate(m.Name, 60), truncate(m.Type, 20))
		}
		out = append(out, s)
	}
	return out, nil
}

// pair is an ACP EnvVariable or HttpHeader.
type pair struct{ Name, Value string }

func pairs(ps []pair) map[string]string {
	if len(ps) == 0 {
		return nil
	}
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		m[p.Name] = p.Value
	}
	return m
}
