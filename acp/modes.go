package acp

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/octet-agent/octet/tools"
)

// Session modes are octet's effect policies: a mode's id is the policy's
// configuration name, and a session offers only the policies no looser
// than the one octet was launched with.
var modeOrder = []struct {
	policy      tools.Policy
	name, about string
}{
	{tools.ControlledBashApproval, "Ask for every edit and command", "controlled_bash_approval: edits and every shell command need your approval"},
	{tools.Controlled, "Ask for edits and commands", "controlled: edits and shell commands need your approval; a few read-only commands run without asking"},
	{tools.UnsafeHost, "Unsafe host", "unsafe_host: every classified effect runs with octet's own OS authority, without asking"},
}

// modes is the session's SessionModeState.
func (as *acpSession) modes() map[string]any {
	b := as.broker()
	launch := b.LaunchPolicy()
	avail := []map[string]any{}
	sandbox := b.LaunchEffectiveToolPolicy().Sandbox
	for _, m := range modeOrder {
		if m.policy.NoLooserThan(launch) {
			avail = append(avail, map[string]any{"id": m.policy.String(), "name": m.name, "description": m.about + sandboxNote(tools.SandboxForPolicy(sandbox, m.policy))})
		}
	}
	return map[string]any{"currentModeId": b.Policy().String(), "availableModes": avail}
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
func (s *Server) setMode(raw json.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
	}
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	as, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	pol, err := tools.ParsePolicy(p.ModeID)
	if err != nil {
		return nil, invalidParams("unknown mode %q: %v", truncate(p.ModeID, 80), err)
	}
	_, err = as.hs.SetEffectPolicy(pol)
	switch {
	case errors.Is(err, tools.ErrPolicyLooser):
		return nil, invalidParams("session %s: %v", as.id, err)
	case err != nil:
		return nil, fmt.Errorf("set mode of %s: %w", as.id, err)
	}
	s.log.Info("session mode set", "session", as.id, "policy", pol.String())
	s.update(as.id, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": pol.String()})
	return struct{}{}, nil
}
