package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/octet-agent/octet/tools"
)

// helperEnv makes the test binary a stand-in for octet: it starts the
// server named by the variable's value (the testdata binary), prints the
// server's pid and waits to be killed.
const helperEnv = "OCTET_MCP_TEST_HELPER"

func runHelper() {
	host := tools.NewHost()
	m := Start(context.Background(), Options{Host: host, Workspace: os.TempDir(), Dir: os.TempDir(), Servers: []Spec{{
		Name: "t", Command: os.Getenv(helperEnv), Args: []string{"-linger"}, StartupTimeout: 30 * time.Second, ToolTimeout: 10 * time.Second,
	}}})
	defer m.Close()
	b := tools.NewBroker(tools.BrokerConfig{Policy: tools.UnsafeHost})
	res, _ := b.Dispatch(context.Background(), host, tools.DispatchRequest{CallID: "c", Tool: "mcp__t__pid", Arguments: json.RawMessage(`{}`)}, tools.DispatchObserver{})
	fmt.Println("pid", res.Text)
	time.Sleep(time.Hour)
}

func killPid(t *testing.T, pid int) {
	t.Helper()
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}
