package sandbox

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSeatbeltArgs: the macOS profile denies by default, passes every
// path as a parameter (a path cannot change the profile), keeps the
// protected entries out of the workspace's writes, and allows network
// only when asked.
func TestSeatbeltArgs(t *testing.T) {
	evil := `/ws/x") (allow file-write* (subpath "/`
	s := &Spec{Profile: WorkspaceWrite, Workspace: evil, Shell: "/bin/bash", TempDir: "/tmp/t", Protected: ProtectedNames}
	argv := SeatbeltArgs(s, "/bin/bash", []string{"bash", "-c", "make"})
	if argv[0] != SeatbeltExec || argv[1] != "-p" {
		t.Fatalf("argv %q", argv)
	}
	profile := argv[2]
	if strings.Contains(profile, evil) || !strings.HasPrefix(profile, "(version 1)\n(deny default)") {
		t.Fatalf("a path reached the profile:\n%s", profile)
	}
	if !slices.Contains(argv, "WS_0="+evil) || !slices.Contains(argv, "PROTECTED_0="+filepath.Join(evil, ".git")) {
		t.Errorf("parameters %q", argv)
	}
	if !strings.Contains(profile, `(require-not (subpath (param "PROTECTED_0")))`) || strings.Contains(profile, "(allow network*)") {
		t.Errorf("profile:\n%s", profile)
	}
	if tail := argv[len(argv)-4:]; !slices.Equal(tail, []string{"--", "/bin/bash", "-c", "make"}) {
		t.Errorf("command %q", tail)
	}
	s.Network, s.Profile = true, ReadOnly
	profile = SeatbeltArgs(s, "/bin/bash", []string{"bash"})[2]
	if !strings.Contains(profile, "(allow network*)") || strings.Contains(profile, `"WS_0"`) {
		t.Errorf("read-only with network:\n%s", profile)
	}
}

// TestSpecValidate: relative paths and protected names that are not a
// single workspace entry are refused before any guard starts.
func TestSpecValidate(t *testing.T) {
	for _, s := range []Spec{
		{Profile: None, Workspace: "/ws"},
		{Profile: ReadOnly, Workspace: "ws"},
		{Profile: ReadOnly, Workspace: "/ws", ReadPaths: []string{"rel"}},
		{Profile: WorkspaceWrite, Workspace: "/ws", Protected: []string{"../x"}},
		{Profile: WorkspaceWrite, Workspace: "/ws", Protected: []string{"a/b"}},
	} {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	ok := Spec{Profile: WorkspaceWrite, Workspace: "/ws", Protected: ProtectedNames, TempDir: "/tmp/x"}
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
}

// TestProfileOrder: read-only < workspace-write < none.
func TestProfileOrder(t *testing.T) {
	if !ReadOnly.NoLooserThan(WorkspaceWrite) || !WorkspaceWrite.NoLooserThan(None) || None.NoLooserThan(WorkspaceWrite) {
		t.Error("order")
	}
	if Tighter(None, ReadOnly) != ReadOnly {
		t.Error("Tighter")
	}
	if _, err := ParseProfile("strict"); err == nil {
		t.Error("ParseProfile accepted strict")
	}
}
