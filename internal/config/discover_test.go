package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestProjectDirs: the repository root is the nearest .git (a directory
// or a worktree's file) at most MaxProjectDepth levels up; without one
// only the workspace is read.
func TestProjectDirs(t *testing.T) {
	root := filepath.Join(t.TempDir(), "repo")
	below := func(n int) string {
		return filepath.Join(root, strings.Repeat("d"+string(filepath.Separator), n))
	}
	deepest := below(MaxProjectDepth + 1)
	if err := os.MkdirAll(deepest, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := ProjectDirs(below(3)); !slices.Equal(got, []string{below(3)}) {
		t.Errorf("no repository: %v", got)
	}
	if err := os.WriteFile(filepath.Join(root, ".git"), []byte("gitdir: elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ProjectDirs(below(2)); !slices.Equal(got, []string{root, below(1), below(2)}) {
		t.Errorf("two levels below the root: %v", got)
	}
	if got := ProjectDirs(below(MaxProjectDepth)); len(got) != MaxProjectDepth+1 || got[0] != root {
		t.Errorf("%d levels below: %d dirs from %s", MaxProjectDepth, len(got), got[0])
	}
	if got := ProjectDirs(deepest); !slices.Equal(got, []string{deepest}) {
		t.Errorf("beyond the bound: %d dirs from %s", len(got), got[0])
	}
	if got := ProjectDirs(root); !slices.Equal(got, []string{root}) {
		t.Errorf("at the root: %v", got)
	}
}
