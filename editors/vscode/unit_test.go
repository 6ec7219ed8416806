package vscode_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestExtensionUnit type-checks the extension (TypeScript strict) and runs
// its unit tests (src/test, Node's test runner) on the code that does not
// need VS Code: the chat model, Markdown, diffs, formatting, the binary
// lookup. It skips unless node and the npm packages are installed (.ci/run
// runs npm ci in editors/vscode).
func TestExtensionUnit(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "typescript")); err != nil {
		t.Skip("the extension's npm packages are not installed: run npm ci in editors/vscode")
	}
	out := t.TempDir()
	tsc := exec.Command(node, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", ".", "--outDir", out)
	if b, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, b)
	}
	test := exec.Command(node, "--test", filepath.Join(out, "test"))
	// The compiled tests are outside this directory: they find its
	// npm packages (markdown-it, highlight.js) through NODE_PATH.
	modules, err := filepath.Abs("node_modules")
	if err != nil {
		t.Fatal(err)
	}
	test.Env = append(os.Environ(), "NODE_PATH="+modules)
	if b, err := test.CombinedOutput(); err != nil {
		t.Fatalf("node --test: %v\n%s", err, b)
	} else {
		t.Logf("%s", b[max(0, len(b)-300):])
	}
}

// TestSettingsAWorkspaceCannotRelax: the settings that choose what runs
// (the binary, its flags) and how much it may do (the policy new sessions
// start in) are machine-scoped, so a repository's .vscode/settings.json
// cannot set them (VS Code ignores workspace values of such settings).
func TestSettingsAWorkspaceCannotRelax(t *testing.T) {
	b, err := os.ReadFile("package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Contributes struct {
			Configuration struct {
				Properties map[string]struct {
					Scope string `json:"scope"`
				} `json:"properties"`
			} `json:"configuration"`
		} `json:"contributes"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"octet.path", "octet.args", "octet.policyMode"} {
		p, ok := pkg.Contributes.Configuration.Properties[name]
		if !ok {
			t.Errorf("%s is not a setting", name)
		} else if p.Scope != "machine" && p.Scope != "application" {
			t.Errorf("%s has scope %q: a workspace could set it", name, p.Scope)
		}
	}
}
