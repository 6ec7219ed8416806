package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/tools"
)

// Session modes are octet's effect policies: a mode's id is the policy's
// configuration name, and a session offers only the policies no looser
// than the one octet was launched with. The same choice is the "mode"
// config option, beside "model" and "thought_level"; modes and
// session/set_mode stay for clients without config options.
var modeOrder = []struct {
	policy      tools.Policy
	name, about string
}{
	{tools.ControlledBashApproval, "Ask", "Edits and every shell command wait for your approval (controlled_bash_approval)"},
	{tools.Controlled, "Auto (read-only)", "Commands octet can prove only read the workspace run without asking; edits and other commands wait for your approval (controlled)"},
	{tools.UnsafeHost, "Full access", "Every edit and command runs with octet's own authority, without asking (unsafe_host)"},
}

// modeChoice is one mode the session offers.
type modeChoice struct{ id, name, description string }

// modeChoices are the modes the session offers: the policies no looser
// than the launch policy, each described with the OS sandbox its shell
// commands run in.
func (as *acpSession) modeChoices() []modeChoice {
	b := as.broker()
	sandbox := b.LaunchEffectiveToolPolicy().Sandbox
	var out []modeChoice
	for _, m := range modeOrder {
		if m.policy.NoLooserThan(b.LaunchPolicy()) {
			out = append(out, modeChoice{m.policy.String(), m.name, m.about + sandboxNote(tools.SandboxForPolicy(sandbox, m.policy)) + "."})
		}
	}
	return out
}

// Config option ids.
const (
	configMode      = "mode"
	configModel     = "model"
	configReasoning = "thought_level"
	// reasoningDefault is the thought_level value for the provider's
	// default effort.
	reasoningDefault = "default"
)

// reasoningNames name agent.ReasoningEfforts.
var reasoningNames = map[string]string{
	"none": "None", "minimal": "Minimal", "low": "Low", "medium": "Medium", "high": "High", "xhigh": "Extra high",
}

// modes is the session's SessionModeState.
func (as *acpSession) modes() map[string]any {
	avail := []map[string]any{}
	for _, m := range as.modeChoices() {
		avail = append(avail, map[string]any{"id": m.id, "name": m.name, "description": m.description})
	}
	return map[string]any{"currentModeId": as.broker().Policy().String(), "availableModes": avail}
}

// configOptions are the session's SessionConfigOptions: its mode, model
// and (for a model that reasons) reasoning effort.
func (as *acpSession) configOptions() []map[string]any {
	var modes []map[string]any
	for _, m := range as.modeChoices() {
		modes = append(modes, map[string]any{"value": m.id, "name": m.name, "description": m.description})
	}
	opts := []map[string]any{selectOption(configMode, "Mode", "mode", as.broker().Policy().String(), modes)}
	model := as.Session().Model()
	var models []map[string]any
	for _, m := range as.srv.host.Catalog().Models {
		models = append(models, map[string]any{"value": m.Name, "name": m.Name})
	}
	if !slices.ContainsFunc(models, func(o map[string]any) bool { return o["value"] == model.Name }) {
		models = append([]map[string]any{{"value": model.Name, "name": model.Name}}, models...)
	}
	opts = append(opts, selectOption(configModel, "Model", "model", model.Name, models))
	if model.Reasoning {
		efforts := []map[string]any{{"value": reasoningDefault, "name": "Default", "description": "The model's own default effort."}}
		for _, e := range agent.ReasoningEfforts {
			efforts = append(efforts, map[string]any{"value": e, "name": reasoningNames[e]})
		}
		opts = append(opts, selectOption(configReasoning, "Reasoning effort", "thought_level", firstNonEmpty(as.Session().Reasoning(), reasoningDefault), efforts))
	}
	return opts
}

func selectOption(id, name, category, current string, options []map[string]any) map[string]any {
	return map[string]any{"id": id, "name": name, "category": category, "type": "select", "currentValue": current, "options": options}
}

// state is what session/new, load and resume answer besides the id: the
// modes and the config options.
func (as *acpSession) state() map[string]any {
	return map[string]any{"modes": as.modes(), "configOptions": as.configOptions()}
}

// sandboxNote is what a mode's description says of the OS sandbox its
// shell commands run in, so a client shows it next to the mode.
func sandboxNote(s tools.Setting[tools.SandboxValue]) string {
	v := s.Value
	switch {
	case v.Mechanism == "":
		return ""
	case !v.Available():
		return "; OS sandbox unavailable here, commands are only admitted"
	case v.Profile == tools.SandboxNone:
		return "; no OS sandbox"
	}
	note := fmt.Sprintf("; commands run in the %s OS sandbox (%s", v.Profile, v.Mechanism)
	if v.ABI > 0 {
		note += fmt.Sprintf(" ABI %d", v.ABI)
	}
	return note + ", no network)"
}

// setMode handles session/set_mode: the mode's policy is recorded in the
// ledger and applies from the next call's admission; a policy looser than
// the launch policy is refused.
func (s *Server) setMode(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	as, err := s.session(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	if err := as.setPolicy(p.ModeID); err != nil {
		return nil, err
	}
	as.update(map[string]any{"sessionUpdate": "config_option_update", "configOptions": as.configOptions()})
	return struct{}{}, nil
}

// setPolicy moves the session to the effect policy named id and tells
// the client's mode selector (current_mode_update).
func (as *acpSession) setPolicy(id string) error {
	pol, err := tools.ParsePolicy(id)
	if err != nil {
		return invalidParams("unknown mode %q: %v", truncate(id, 80), err)
	}
	_, err = as.Session().SetEffectPolicy(pol)
	switch {
	case errors.Is(err, tools.ErrPolicyLooser):
		return invalidParams("session %s: %v", as.ID(), err)
	case err != nil:
		return fmt.Errorf("set mode of %s: %w", as.ID(), err)
	}
	as.srv.log.Info("session mode set", "session", as.ID(), "policy", pol.String())
	as.update(map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": pol.String()})
	return nil
}

// setConfigOption handles session/set_config_option: mode (as
// set_mode), model (the catalog's, or the configured one) or
// thought_level; it answers every option's new state.
func (s *Server) setConfigOption(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		SessionID string          `json:"sessionId"`
		ConfigID  string          `json:"configId"`
		Value     json.RawMessage `json:"value"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	as, err := s.session(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	var value string
	if err := json.Unmarshal(p.Value, &value); err != nil {
		return nil, invalidParams("%s takes one of its option values (a string), not %s", truncate(p.ConfigID, 40), truncate(string(p.Value), 40))
	}
	switch p.ConfigID {
	case configMode:
		err = as.setPolicy(value)
	case configModel:
		var name string
		if name, err = as.Session().SetModel(value); err != nil {
			err = invalidParams("%v", err)
		} else {
			s.log.Info("session model set", "session", as.ID(), "model", name)
		}
	case configReasoning:
		if value == reasoningDefault {
			value = ""
		}
		if _, err = as.Session().SetReasoning(value); err != nil {
			err = invalidParams("%v", err)
		}
	default:
		err = invalidParams("unknown config option %q (octet has %s, %s and %s)", truncate(p.ConfigID, 40), configMode, configModel, configReasoning)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"configOptions": as.configOptions()}, nil
}
