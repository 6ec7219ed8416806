package stack

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider"
)

// TestStackMaxNetworkWait: max_network_wait_secs bounds an outage of the
// Codex route's recovery policy (SetMaxNetworkWait); unset, an outage is
// waited out without a deadline.
func TestStackMaxNetworkWait(t *testing.T) {
	outage := agent.Failure{Err: &provider.Error{Phase: provider.PreSend, Class: provider.NetworkUnavailable, Err: errors.New("network is unreachable")}}
	for _, tc := range []struct {
		config string
		want   time.Duration
	}{
		{"runtime_profile = \"codex\"\nmax_network_wait_secs = 90\n", 90 * time.Second},
		{"runtime_profile = \"codex\"\n", 0},
	} {
		home, ws := t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(tc.config), 0o644); err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{"OCTET_HOME": home, "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
		lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
		log := slog.New(slog.DiscardHandler)
		cfg, err := LoadConfig(lookup, ws, config.Flags{}, log)
		if err != nil {
			t.Fatal(err)
		}
		st, err := New(cfg, config.Secret{}, ws, log)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := st.retryPolicy().(*agent.CodexRecovery)
		if !ok {
			t.Fatalf("retry policy is %T, want *agent.CodexRecovery", st.retryPolicy())
		}
		before := time.Now()
		if d := p.Decide(outage); !d.Retry || d.Kind != agent.RetryWaitingForNetwork {
			t.Fatalf("decision = %+v, want waiting for network", d)
		}
		after := time.Now()
		deadline, bounded := p.OutageDeadline()
		switch {
		case tc.want == 0 && bounded:
			t.Errorf("unbounded config, but the outage ends at %v", deadline)
		case tc.want > 0 && (!bounded || deadline.Before(before.Add(tc.want)) || deadline.After(after.Add(tc.want))):
			t.Errorf("outage deadline %v (bounded %v), want %v after the first failure", deadline, bounded, tc.want)
		}
		st.Close()
	}
}

// TestClientSecrets: the header values and secret-named environment
// values of client-supplied MCP servers are redacted from tool output.
func TestClientSecrets(t *testing.T) {
	got := clientSecrets([]host.MCPServer{
		{Name: "h", URL: "http://x", Headers: map[string]string{"Authorization": "Bearer abcdefghijklmnop"}},
		{Name: "s", Command: "x", Env: map[string]string{"GITHUB_TOKEN": "ghp_0123456789abcdef", "HOME_DIR": "/home/someone/x"}},
	})
	slices.Sort(got)
	if !slices.Equal(got, []string{"Bearer abcdefghijklmnop", "ghp_0123456789abcdef"}) {
		t.Fatalf("clientSecrets = %q", got)
	}
}
