package server

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestProgressMessages checks the human-level progress texts.
func TestProgressMessages(t *testing.T) {
	retry := []struct{ body, want string }{
		{`{"attempt":3,"maxAttempts":12,"delayMs":5000,"retryKind":"interrupted_inference","operation":null}`, "Reconnecting 3/12 in 5s"},
		{`{"attempt":1,"maxAttempts":30,"delayMs":200,"retryKind":"interrupted_inference"}`, "Reconnecting 1/30 in 200ms"},
		{`{"attempt":2,"maxAttempts":12,"delayMs":1500,"retryKind":"interrupted_inference"}`, "Reconnecting 2/12 in 1.5s"},
		{`{"attempt":4,"maxAttempts":null,"delayMs":10000,"retryKind":"waiting_for_network"}`, "Waiting for network"},
		{`{"attempt":1,"maxAttempts":29,"delayMs":200,"retryKind":"interrupted_inference","cause":"cannot connect to the provider: connection refused"}`, "cannot connect to the provider: connection refused; retrying 1/29 in 200ms"},
		{`{"attempt":1,"maxAttempts":null,"delayMs":1000,"retryKind":"waiting_for_network","cause":"network unreachable"}`, "Waiting for network: network unreachable"},
		{`not json`, "Reconnecting"},
	}
	for _, r := range retry {
		if got := retryMessage(json.RawMessage(r.body)); got != r.want {
			t.Errorf("retryMessage(%s) = %q, want %q", r.body, got, r.want)
		}
	}
	tool := []struct{ tool, args, want string }{
		{"bash", `{"command":"go test ./...\necho done"}`, "Running bash: go test ./..."},
		{"edit", `{"path":"main.go","old_text":"a","new_text":"b"}`, "Running edit: main.go"},
		{"search", `{"pattern":"TODO"}`, "Running search: TODO"},
		{"read", `{"path`, "Running read"},
	}
	for _, c := range tool {
		if got := toolMessage(c.tool, bytes.NewBufferString(c.args)); got != c.want {
			t.Errorf("toolMessage(%s, %s) = %q, want %q", c.tool, c.args, got, c.want)
		}
	}
	if got := toolMessage("write", nil); got != "Running write" {
		t.Errorf("toolMessage without args = %q", got)
	}
}
