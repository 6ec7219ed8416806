package server

import (
	"fmt"
	"os"
	"testing"

	"github.com/octet-agent/octet/internal/testbin"
)

// TestMain removes the octet binary the real-client tests share. Started
// with floorForwardEnv set, the test binary is instead the forwarding
// process of BenchmarkDeltaToEventProcess's floor.
func TestMain(m *testing.M) {
	if url := os.Getenv(floorForwardEnv); url != "" {
		if err := forwardDeltas(url, rwc{os.Stdin, os.Stdout}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}
