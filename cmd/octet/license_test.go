package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLicenseDeclared: the repository carries the MIT licence it declares,
// the README names it, and every package manifest (and its lockfile's root
// entry) declares the same licence.
func TestLicenseDeclared(t *testing.T) {
	root := filepath.Join("..", "..")
	lic, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatalf("no LICENSE: %v", err)
	}
	if !strings.HasPrefix(string(lic), "MIT License\n") || !strings.Contains(string(lic), `THE SOFTWARE IS PROVIDED "AS IS"`) {
		t.Errorf("LICENSE is not the MIT License:\n%.200s", lic)
	}
	readme, _ := os.ReadFile(filepath.Join(root, "README.md"))
	if !strings.Contains(string(readme), "[MIT License](LICENSE)") {
		t.Error("README does not name the licence")
	}
	for _, dir := range []string{"editors/vscode", "acp/testdata/client", "server/testdata/vscode", "provider/testdata/sdk"} {
		for _, name := range []string{"package.json", "package-lock.json"} {
			b, err := os.ReadFile(filepath.Join(root, dir, name))
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				License  string `json:"license"`
				Packages map[string]struct {
					License string `json:"license"`
				} `json:"packages"`
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("%s/%s: %v", dir, name, err)
			}
			got := m.License
			if name == "package-lock.json" {
				got = m.Packages[""].License
			}
			if got != "MIT" {
				t.Errorf("%s/%s declares licence %q, want MIT", dir, name, got)
			}
		}
	}
}
