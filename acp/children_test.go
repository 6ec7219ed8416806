package acp

import (
	"strings"
	"testing"

	"github.com/octet-agent/octet/agent/team"
)

// TestChildErrorBounded: a failed child's error reaches the client
// bounded, its cut marked, in the subagent state's _meta as in the
// tool call's "Failed: …" text (a provider's error body can be 64 KB).
func TestChildErrorBounded(t *testing.T) {
	long := team.Snapshot{Status: team.StatusFailed, Error: strings.Repeat("é", 40<<10)}
	meta := stateOf(long)["_meta"].(map[string]any)["octet"].(map[string]any)["error"].(string)
	for _, got := range []string{meta, childError(long)} {
		if len(got) > maxChildError+len("…") || !strings.HasSuffix(got, "é…") {
			t.Errorf("error shown as %d bytes ending %q, want at most %d and the cut marked", len(got), got[max(0, len(got)-8):], maxChildError)
		}
	}
	if got := childError(team.Snapshot{Status: team.StatusFailed, Error: "quota"}); got != "quota" {
		t.Errorf("a short error shown as %q", got)
	}
	if got := childError(team.Snapshot{Status: team.StatusFailed}); got != "the child agent failed" {
		t.Errorf("no error shown as %q", got)
	}
}
