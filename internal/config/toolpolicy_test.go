package config

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCapabilitiesAreTruthful checks that allow_edit, allow_write,
// allow_process and allow_shell (as the evidence reports them) say what
// the run may do: a capability whose tool is not in the final allowlist
// is false, with the source of the narrowing.
func TestCapabilitiesAreTruthful(t *testing.T) {
	type caps struct{ edit, write, process, shell Setting[bool] }
	on := func(src Source) Setting[bool] { return Setting[bool]{Value: true, Source: src} }
	off := func(src Source) Setting[bool] { return Setting[bool]{Value: false, Source: src} }
	const (
		def  = SourceDefault
		cfg  = SourceConfig
		flag = SourceFlag
		proj = SourceProjectConfig
	)
	tests := []struct {
		name, global, project string
		flags                 Flags
		known                 []string
		want                  caps
	}{
		{"defaults", "", "", Flags{}, nil,
			caps{on(def), on(def), on(def), on(def)}},
		{"--tools read,bash", "", "", Flags{Tools: ptr("read,bash")}, nil,
			caps{off(flag), off(flag), on(def), on(def)}},
		{"--tools read,search", "", "", Flags{Tools: ptr("read,search")}, nil,
			caps{off(flag), off(flag), off(flag), off(flag)}},
		{"project tools list", "", `tools = ["read", "search", "bash"]`, Flags{}, nil,
			caps{off(proj), off(proj), on(def), on(def)}},
		{"global tools list", `tools = ["read", "edit"]`, "", Flags{}, nil,
			caps{on(def), off(cfg), off(cfg), off(cfg)}},
		{"project narrows a flag list", "", `tools = ["read"]`, Flags{Tools: ptr("read,edit")}, nil,
			caps{off(proj), off(proj), off(proj), off(proj)}},
		{"gate off keeps its own source", "allow_edit = false", "", Flags{Tools: ptr("read,write")}, nil,
			caps{off(cfg), on(def), off(flag), off(flag)}},
		{"project turns shell off", "", "allow_shell = false", Flags{}, nil,
			caps{on(def), on(def), off(proj), off(proj)}},
		{"global turns process off", "allow_process = false", "", Flags{}, nil,
			caps{on(def), on(def), off(cfg), off(cfg)}},
		{"shell gate and tool list", "", "allow_shell = false", Flags{Tools: ptr("read,search,edit")}, nil,
			caps{on(def), off(flag), off(flag), off(proj)}},
		{"unknown extension tool may run processes", "", "", Flags{Tools: ptr("read,ext")}, append(slices.Clone(BuiltinTools), "ext"),
			caps{off(flag), off(flag), on(def), on(def)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			ws := t.TempDir()
			if tt.global != "" {
				writeFile(t, filepath.Join(home, "config.toml"), tt.global, 0o644)
			}
			if tt.project != "" {
				writeFile(t, filepath.Join(ws, ".octet", "config.toml"), tt.project, 0o644)
			}
			c, err := Load(Options{Home: home, Workspace: ws, LookupEnv: envMap(nil), Flags: tt.flags, KnownTools: tt.known})
			if err != nil {
				t.Fatal(err)
			}
			var got caps
			got.edit, got.write, got.process, got.shell = c.Capabilities()
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(caps{})); diff != "" {
				t.Errorf("capabilities (-want +got):\n%s\nenabled tools %q, warnings %q", diff, c.EnabledTools(), c.Warnings)
			}
			enabled := c.EnabledTools()
			for name, s := range map[string]Setting[bool]{"edit": got.edit, "write": got.write} {
				if s.Value != slices.Contains(enabled, name) {
					t.Errorf("allow_%s = %v but enabled tools are %q", name, s.Value, enabled)
				}
			}
		})
	}
}
