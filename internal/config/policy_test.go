package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/octet-agent/octet/tools"
)

func TestParseEffectPolicy(t *testing.T) {
	for _, p := range []tools.Policy{tools.Controlled, tools.ControlledBashApproval, tools.UnsafeHost} {
		got, err := parseEffectPolicy(p.String())
		if err != nil || got != p {
			t.Errorf("parseEffectPolicy(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	for _, s := range []string{"yolo", "YOLO", " Yolo "} {
		if _, err := parseEffectPolicy(s); err == nil || !strings.Contains(err.Error(), "no longer accepted") || !strings.Contains(err.Error(), "unsafe_host") {
			t.Errorf("parseEffectPolicy(%q) = %v, want the retired-spelling hint", s, err)
		}
	}
	if _, err := parseEffectPolicy("wide_open"); err == nil || !strings.Contains(err.Error(), "controlled_bash_approval") {
		t.Errorf("unknown policy error = %v, want the valid names", err)
	}
}

// TestRetiredPolicyEverywhere checks that every place a policy is read
// refuses "yolo" with the hint, each as its own error kind.
func TestRetiredPolicyEverywhere(t *testing.T) {
	_, err := load(t, "", "", nil, Flags{EffectPolicy: ptr("yolo")})
	if ue, ok := errors.AsType[*UsageError](err); !ok || !strings.Contains(ue.Msg, "--effect-policy") || !strings.Contains(ue.Msg, "no longer accepted") {
		t.Errorf("flag: %v", err)
	}
	_, err = load(t, "", "", map[string]string{"OCTET_EFFECT_POLICY": "yolo"}, Flags{})
	if ue, ok := errors.AsType[*UsageError](err); !ok || !strings.Contains(ue.Msg, "OCTET_EFFECT_POLICY") || !strings.Contains(ue.Msg, "no longer accepted") {
		t.Errorf("env: %v", err)
	}
	_, err = load(t, "", "\n\neffect_policy = \"yolo\"\n", nil, Flags{})
	if fe, ok := errors.AsType[*FileError](err); !ok || fe.Line != 3 || !strings.Contains(fe.Msg, "effect_policy") || !strings.Contains(fe.Msg, "no longer accepted") {
		t.Errorf("project file: %v", err)
	}
}

func TestAuthorityOrder(t *testing.T) {
	if !(authority(tools.UnsafeHost) > authority(tools.ControlledBashApproval) &&
		authority(tools.ControlledBashApproval) > authority(tools.Controlled)) {
		t.Errorf("authority ranks: unsafe_host %d, controlled_bash_approval %d, controlled %d",
			authority(tools.UnsafeHost), authority(tools.ControlledBashApproval), authority(tools.Controlled))
	}
}

// TestProjectPolicyTightenOnly covers every (global, project) pair: the
// project value applies only when it admits less.
func TestProjectPolicyTightenOnly(t *testing.T) {
	const (
		c   = tools.Controlled
		cba = tools.ControlledBashApproval
		uh  = tools.UnsafeHost
	)
	tests := []struct {
		global, project tools.Policy
		want            tools.Policy
		src             Source
		warned          bool
	}{
		{uh, uh, uh, SourceConfig, false},
		{uh, cba, cba, SourceProjectConfig, false},
		{uh, c, c, SourceProjectConfig, false},
		{cba, uh, cba, SourceConfig, true},
		{cba, cba, cba, SourceConfig, false},
		{cba, c, c, SourceProjectConfig, false},
		{c, uh, c, SourceConfig, true},
		{c, cba, c, SourceConfig, true},
		{c, c, c, SourceConfig, false},
	}
	for _, tt := range tests {
		name := tt.global.String() + "<-" + tt.project.String()
		t.Run(name, func(t *testing.T) {
			cfg, err := load(t, "effect_policy = \""+tt.global.String()+"\"\n", "effect_policy = \""+tt.project.String()+"\"\n", nil, Flags{})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.EffectPolicy != (Setting[tools.Policy]{tt.want, tt.src}) {
				t.Errorf("policy = %+v, want {%v %s}", cfg.EffectPolicy, tt.want, tt.src)
			}
			warned := len(cfg.Warnings) == 1 && strings.Contains(cfg.Warnings[0], "effect_policy ignored: a project may not relax")
			if warned != tt.warned || (!tt.warned && len(cfg.Warnings) != 0) {
				t.Errorf("warnings = %q, want relax warning %v", cfg.Warnings, tt.warned)
			}
		})
	}
}
