package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// TestMain removes the octet binary the real-client tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	if octetBinDir != "" {
		os.RemoveAll(octetBinDir)
	}
	os.Exit(code)
}

var (
	octetBinOnce sync.Once
	octetBinDir  string
	octetBinErr  error
)

// buildOctet returns the path of an `octet` binary built from this tree,
// alone in its directory (so the directory can go on PATH). It is built
// once per test process and shared by the real-client tests and benchmarks.
func buildOctet(tb testing.TB) string {
	tb.Helper()
	octetBinOnce.Do(func() {
		octetBinDir, octetBinErr = os.MkdirTemp("", "octet-bin-")
		if octetBinErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(octetBinDir, "octet"), "github.com/octet-agent/octet/cmd/octet").CombinedOutput()
		if err != nil {
			octetBinErr = &buildError{err: err, out: out}
		}
	})
	if octetBinErr != nil {
		tb.Fatalf("build octet: %v", octetBinErr)
	}
	return filepath.Join(octetBinDir, "octet")
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }
