// Package testbin gives the tests that drive real clients what they
// share: the octet binary built from this tree and the Neovim builds to
// run. It is imported by tests only.
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	once sync.Once
	dir  string
	err  error
)

// Octet returns the path of an octet binary built from this tree, alone
// in its directory (so the directory can go on PATH). It is built once
// per test process; Cleanup removes it.
func Octet(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		dir, err = os.MkdirTemp("", "octet-bin-")
		if err != nil {
			return
		}
		out, berr := exec.Command("go", "build", "-o", filepath.Join(dir, "octet"), "github.com/octet-agent/octet/cmd/octet").CombinedOutput()
		if berr != nil {
			err = &buildError{err: berr, out: out}
		}
	})
	if err != nil {
		tb.Fatalf("build octet: %v", err)
	}
	return filepath.Join(dir, "octet")
}

// Cleanup removes the binary Octet built; call it from TestMain after
// m.Run.
func Cleanup() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// DefaultNvimExtra is where .ci/fetch-newer-nvim.sh unpacked the newer
// Neovim builds on the development machines; used when
// OCTET_TEST_NVIM_EXTRA is unset.
const DefaultNvimExtra = "/opt/nvim-newer/trixie/nvim.sh:/opt/nvim-newer/sid/nvim.sh"

// Nvims returns the Neovim binaries the real-Neovim tests run: the system
// nvim (Debian's 0.7.2 in CI) and each one listed in OCTET_TEST_NVIM_EXTRA
// (colon-separated; .ci/run sets it to the 0.10 and newest builds; unset
// means DefaultNvimExtra). A missing one is logged and skipped.
func Nvims(tb testing.TB) []string {
	var out []string
	if p, err := exec.LookPath("nvim"); err == nil {
		out = append(out, p)
	} else {
		tb.Log("system nvim not installed; skipping it")
	}
	extra, set := os.LookupEnv("OCTET_TEST_NVIM_EXTRA")
	if !set {
		extra = DefaultNvimExtra
	}
	for _, p := range filepath.SplitList(extra) {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			tb.Logf("OCTET_TEST_NVIM_EXTRA names %s, which is missing; skipping it", p)
			continue
		}
		out = append(out, p)
	}
	return out
}

// NvimName names a subtest by the binary's version line.
func NvimName(nvim string) string {
	out, err := exec.Command(nvim, "--version").Output()
	if err != nil {
		return filepath.Base(nvim)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimPrefix(first, "NVIM ")
}
