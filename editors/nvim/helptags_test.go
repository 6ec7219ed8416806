package nvim

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/testbin"
)

// TestHelptags runs the README's `:helptags ALL` on a copy of doc/ in
// each Neovim: Neovim before 0.12 refuses a directory whose help files
// differ in encoding (E670, judged by each file's first line), after
// which `:help octet` finds nothing. Both must work, and every tag the
// help names with |octet-…| must exist.
func TestHelptags(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Neovim")
	}
	nvims := testbin.Nvims(t)
	if len(nvims) == 0 {
		t.Skip("no nvim to test")
	}
	help := readFile(t, filepath.Join("doc", "octet.txt"))
	for _, nvim := range nvims {
		t.Run(testbin.NvimName(nvim), func(t *testing.T) {
			t.Parallel()
			rtp := t.TempDir()
			if err := os.CopyFS(filepath.Join(rtp, "doc"), os.DirFS("doc")); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(rtp, "doc", "tags"))
			out := filepath.Join(rtp, "out")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// Only the copy on 'runtimepath': helptags ALL writes no other
			// directory's tags.
			cmd := exec.CommandContext(ctx, nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n",
				"--cmd", "set rtp="+rtp, "-c", "helptags ALL",
				"-c", "redir! > "+out, "-c", "silent! help octet-setup",
				"-c", `echo "HELP:" . expand("%:t") . ":" . getline(".")`, "-c", "redir END", "-c", "qa!")
			cmd.Dir = rtp
			output, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("nvim: %v\n%s", err, output)
			}
			if strings.Contains(string(output), "E670") || strings.Contains(string(output), "Error") {
				t.Errorf("helptags ALL: %s", output)
			}
			got := readFile(t, out)
			if !strings.Contains(got, "HELP:octet.txt:") || !strings.Contains(got, "*octet-setup*") {
				t.Errorf(":help octet-setup after helptags ALL: %q", got)
			}
			tags := readFile(t, filepath.Join(rtp, "doc", "tags"))
			for _, ref := range helpRefs(help) {
				if !strings.Contains(tags, ref+"\t") {
					t.Errorf("the help names |%s|, which is not a tag", ref)
				}
			}
		})
	}
}

// helpRefs returns the |octet…| references of a help file.
func helpRefs(help string) []string {
	var refs []string
	for _, part := range strings.Split(help, "|")[1:] {
		if strings.HasPrefix(part, "octet") && !strings.ContainsAny(part, " \t\n") {
			refs = append(refs, part)
		}
	}
	return refs
}
