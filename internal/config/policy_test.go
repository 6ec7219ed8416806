//go:build unix

package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octet-agent/octet/tools"
)

func TestParseEffectPolicy(t *testing.T) {
	for _, p := range []EffectPolicy{Controlled, ControlledBashApproval, UnsafeHost} {
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

// looseness is the ground truth the tighten-only rule is checked against,
// written from what each policy admits rather than from the code:
// controlled_bash_approval confirms every bash call; controlled also
// auto-approves read-only bash; unsafe_host admits every classified effect.
var looseness = map[EffectPolicy]int{ControlledBashApproval: 0, Controlled: 1, UnsafeHost: 2}

// TestProjectPolicyTightenOnly covers every (launch policy, project policy)
// pair, with the launch policy coming from each place it can come from
// (the global config, OCTET_EFFECT_POLICY, --effect-policy, --safe-mode):
// the project value applies exactly when it admits less, and is otherwise
// ignored with a warning. The regression: a project's "controlled" used to
// turn --safe-mode into auto-approved bash.
func TestProjectPolicyTightenOnly(t *testing.T) {
	all := []EffectPolicy{ControlledBashApproval, Controlled, UnsafeHost}
	type launch struct {
		name   string
		src    Source
		global string
		env    map[string]string
		flags  Flags
	}
	launches := func(p EffectPolicy) []launch {
		l := []launch{
			{"config", SourceConfig, "effect_policy = \"" + p.String() + "\"\n", nil, Flags{}},
			{"env", SourceEnv, "", map[string]string{"OCTET_EFFECT_POLICY": p.String()}, Flags{}},
			{"flag", SourceFlag, "", nil, Flags{EffectPolicy: ptr(p.String())}},
		}
		if p == ControlledBashApproval {
			l = append(l, launch{"safe-mode", SourceFlag, "", nil, Flags{SafeMode: true}})
		}
		return l
	}
	for _, lp := range all {
		for _, l := range launches(lp) {
			for _, pp := range all {
				name := l.name + ":" + lp.String() + "<-" + pp.String()
				t.Run(name, func(t *testing.T) {
					cfg, err := load(t, l.global, "effect_policy = \""+pp.String()+"\"\n", l.env, l.flags)
					if err != nil {
						t.Fatal(err)
					}
					want, src, warned := lp, l.src, false
					switch {
					case looseness[pp] < looseness[lp]:
						want, src = pp, SourceProjectConfig
					case looseness[pp] > looseness[lp]:
						warned = true
					}
					if cfg.EffectPolicy != (Setting[EffectPolicy]{want, src}) {
						t.Errorf("policy = %+v, want {%v %s}", cfg.EffectPolicy, want, src)
					}
					got := len(cfg.Warnings) == 1 && strings.Contains(cfg.Warnings[0], "effect_policy ignored: a project may not relax")
					if got != warned || (!warned && len(cfg.Warnings) != 0) {
						t.Errorf("warnings = %q, want relax warning %v", cfg.Warnings, warned)
					}
				})
			}
		}
	}
}

// TestNoLooserThanMatchesGroundTruth: the broker-derived order is the
// documented one.
func TestNoLooserThanMatchesGroundTruth(t *testing.T) {
	for p, lp := range looseness {
		for q, lq := range looseness {
			if got := p.NoLooserThan(q); got != (lp <= lq) {
				t.Errorf("%v.NoLooserThan(%v) = %v", p, q, got)
			}
		}
	}
}

// TestAllowShellFlagPrecedence: --allow-shell is a flag like the others
// (it wins over the global config and the environment), and a project
// config may still only turn it off.
func TestAllowShellFlagPrecedence(t *testing.T) {
	on, off := true, false
	cfg, err := load(t, "allow_shell = false\n", "", nil, Flags{AllowShell: &on})
	if err != nil || cfg.AllowShell != (Setting[bool]{true, SourceFlag}) {
		t.Errorf("flag over config: %+v, %v", cfg.AllowShell, err)
	}
	cfg, err = load(t, "", "allow_shell = false\n", nil, Flags{AllowShell: &on})
	if err != nil || cfg.AllowShell != (Setting[bool]{false, SourceProjectConfig}) {
		t.Errorf("project tightens a flag: %+v, %v", cfg.AllowShell, err)
	}
	cfg, err = load(t, "", "allow_shell = true\n", nil, Flags{AllowShell: &off})
	if err != nil || cfg.AllowShell != (Setting[bool]{false, SourceFlag}) || len(cfg.Warnings) != 1 {
		t.Errorf("project relaxes a flag: %+v, %v, %q", cfg.AllowShell, err, cfg.Warnings)
	}
}

// TestProjectConfigNoFollow: a project config that is a symbolic link
// (or behind one: .octet itself a link), or a FIFO, is skipped with a
// warning naming it, at once, and none of its settings applies.
func TestProjectConfigNoFollow(t *testing.T) {
	target := filepath.Join(t.TempDir(), "config.toml")
	writeFile(t, target, "allow_write = false\n", 0o644)
	for _, tt := range []struct {
		name  string
		setup func(ws string)
		want  string
	}{
		{"file link", func(ws string) {
			os.MkdirAll(filepath.Join(ws, ".octet"), 0o755)
			os.Symlink(target, filepath.Join(ws, ".octet", "config.toml"))
		}, "symbolic link"},
		{"directory link", func(ws string) { os.Symlink(filepath.Dir(target), filepath.Join(ws, ".octet")) }, "symbolic link"},
		{"fifo", func(ws string) {
			os.MkdirAll(filepath.Join(ws, ".octet"), 0o755)
			mkfifo(t, filepath.Join(ws, ".octet", "config.toml"))
		}, "FIFO"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home, ws := t.TempDir(), t.TempDir()
			tt.setup(ws)
			var cfg *Config
			var err error
			noHang(t, "Load", func() { cfg, err = Load(Options{Home: home, Workspace: ws, LookupEnv: envMap(nil)}) })
			if err != nil {
				t.Fatal(err)
			}
			if cfg.AllowWrite.Source != SourceDefault {
				t.Errorf("allow_write = %+v: the skipped file applied", cfg.AllowWrite)
			}
			if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], filepath.Join(ws, ".octet", "config.toml")) || !strings.Contains(cfg.Warnings[0], tt.want) {
				t.Errorf("warnings = %q", cfg.Warnings)
			}
		})
	}
}

// TestEffectPoliciesMatchBroker keeps configuration's names and order of
// the effect policies in step with the broker's, whose decision table
// defines what each admits: the same names, and NoLooserThan agrees on
// every pair.
func TestEffectPoliciesMatchBroker(t *testing.T) {
	var broker []string
	for p := tools.Policy(0); p.Valid(); p++ {
		broker = append(broker, p.String())
	}
	var names []string
	for _, p := range EffectPolicies {
		names = append(names, string(p))
	}
	if !slices.Equal(slices.Sorted(slices.Values(broker)), slices.Sorted(slices.Values(names))) {
		t.Fatalf("configuration names %v, the broker %v", names, broker)
	}
	for _, p := range EffectPolicies {
		for _, q := range EffectPolicies {
			bp, _ := tools.ParsePolicy(string(p))
			bq, _ := tools.ParsePolicy(string(q))
			if got, want := p.NoLooserThan(q), bp.NoLooserThan(bq); got != want {
				t.Errorf("%s.NoLooserThan(%s) = %v, the broker says %v", p, q, got, want)
			}
		}
		if _, err := parseEffectPolicy(" " + strings.ToUpper(string(p)) + " "); err != nil {
			t.Errorf("%s does not parse: %v", p, err)
		}
	}
}
