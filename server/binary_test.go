package server

import (
	"os"
	"testing"

	"github.com/octet-agent/octet/internal/testbin"
)

// TestMain removes the octet binary the real-client tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}
