package host

import (
	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/tools"
)

// Configuration is data (package internal/config: names, checked price
// specs, limits, each with its source); the functions below assemble it
// into what the runtime is built of: the broker's policies, the tools'
// configuration and the accounting.

// ToolPolicy is the broker's launch policy cfg names. A name the broker
// does not know (configuration and broker out of step, which a test
// rules out) is the strictest policy: it fails closed.
func ToolPolicy(cfg *config.Config) tools.Policy {
	p, err := tools.ParsePolicy(cfg.EffectPolicy.Value.String())
	if err != nil {
		return tools.ControlledBashApproval
	}
	return p
}

// toolsSetting converts a configuration setting to the broker's evidence
// form.
func toolsSetting[T any](s config.Setting[T]) tools.Setting[T] {
	return tools.Setting[T]{Value: s.Value, Source: tools.Source(s.Source)}
}

// EffectiveToolPolicy returns the {value, source} evidence snapshot the
// broker carries for cfg. shellSelection is the selection class the bash
// tool's resolver reports (never a path). The capability entries describe
// what the run may do, not only the allow_* keys (config.Capabilities).
func EffectiveToolPolicy(cfg *config.Config, shellSelection tools.ShellSelection) tools.EffectiveToolPolicy {
	edit, write, process, shell := cfg.Capabilities()
	return tools.EffectiveToolPolicy{
		EffectPolicy: tools.Setting[tools.Policy]{Value: ToolPolicy(cfg), Source: tools.Source(cfg.EffectPolicy.Source)},
		WorkspaceConfinement: tools.Setting[bool]{
			Value: !cfg.AllowExternalPaths.Value, Source: tools.Source(cfg.AllowExternalPaths.Source),
		},
		AllowEdit:    toolsSetting(edit),
		AllowWrite:   toolsSetting(write),
		AllowProcess: toolsSetting(process),
		AllowShell:   toolsSetting(shell),
		ShellPath: tools.Setting[tools.ShellPathValue]{
			Value: tools.ShellPathValue{Selection: shellSelection}, Source: tools.Source(cfg.ShellPath.Source),
		},
		BashTimeoutMs:   tools.Setting[int64]{Value: cfg.BashTimeout.Value.Milliseconds(), Source: tools.Source(cfg.BashTimeout.Source)},
		MaxOutputBytes:  toolsSetting(cfg.MaxOutputBytes),
		AllowRemoteRead: tools.Setting[bool]{Value: false, Source: tools.SourceDefault},
		Sandbox:         tools.HostSandbox(cfg.SandboxProfile(), tools.Source(cfg.Sandbox.Source)),
	}
}

// SandboxPaths is the user's widening of every OS sandbox (bash's and
// sandboxed MCP servers'): sandbox_read_paths and sandbox_write_paths.
func SandboxPaths(cfg *config.Config) tools.SandboxConfig {
	return tools.SandboxConfig{ReadPaths: cfg.SandboxReadPaths.Value, WritePaths: cfg.SandboxWritePaths.Value}
}

// ToolsConfig returns the built-in tools' configuration for the workspace
// root (an absolute path).
func ToolsConfig(cfg *config.Config, root string) tools.Config {
	return tools.Config{
		Root:               root,
		ScrubEnv:           cfg.KeyVariables(),
		AllowExternalPaths: cfg.AllowExternalPaths.Value,
		BashTimeout:        cfg.BashTimeout.Value,
		BashMaxOutputBytes: int(cfg.MaxOutputBytes.Value),
		ShellPath:          cfg.ShellPath.Value,
		Sandbox:            SandboxPaths(cfg),
	}
}

// Prices is the price table that turns known usage into exact cost:
// agent.DefaultPrices with each of cfg's [prices.<model>] tables replacing
// that model's price. (Configuration checked every table it loaded; one
// that does not parse keeps the model unpriced rather than guessed.)
func Prices(cfg *config.Config) agent.PriceTable {
	t := agent.DefaultPrices()
	for model, spec := range cfg.Prices.Value {
		one, err := agent.NewPriceTable(map[string]agent.PriceSpec{model: spec})
		if err != nil {
			delete(t, model)
			continue
		}
		t[model] = one[model]
	}
	return t
}

// Budget is the accounting of every agent of cfg: the price table and the
// hard session ceilings.
func Budget(cfg *config.Config) *agent.Budget {
	return &agent.Budget{
		Prices:   Prices(cfg),
		Ceilings: agent.Ceilings{MaxTokens: cfg.MaxSessionTokens.Value, MaxCost: cfg.MaxSessionCost.Value},
	}
}
