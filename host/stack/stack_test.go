package stack

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/config"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/tools"
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
	if !slices.Equal(got, []string{"Bearer abcdefghijklmnop", "abcdefghijklmnop", "ghp_0123456789abcdef"}) {
		t.Fatalf("clientSecrets = %q", got)
	}
}

// TestSandboxNoteFollowsProfile: what the host's sandbox does not enforce
// is a warning when the launch's profile sandboxes commands, and only
// said at Info level under none, where no command is sandboxed (octet
// exec warned on every run of a host without user namespaces).
func TestSandboxNoteFollowsProfile(t *testing.T) {
	note := ".git and .octet are writable under workspace-write (no user namespaces)"
	for _, tc := range []struct {
		v    tools.SandboxValue
		want slog.Level
	}{
		{tools.SandboxValue{Profile: tools.SandboxNone, Mechanism: "landlock", ABI: 7, Note: note}, slog.LevelInfo},
		{tools.SandboxValue{Profile: tools.SandboxWorkspaceWrite, Mechanism: "landlock", ABI: 7, Note: note}, slog.LevelWarn},
		{tools.SandboxValue{Profile: tools.SandboxNone, Mechanism: "unavailable", Note: "no Landlock"}, slog.LevelInfo},
		{tools.SandboxValue{Profile: tools.SandboxReadOnly, Mechanism: "unavailable", Note: "no Landlock"}, slog.LevelWarn},
	} {
		var got []slog.Level
		log := slog.New(levelRecorder{&got})
		logSandbox(tools.Setting[tools.SandboxValue]{Value: tc.v}, log)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("profile %q, mechanism %s: logged at %v, want once at %v", tc.v.Profile, tc.v.Mechanism, got, tc.want)
		}
	}
}

// levelRecorder is a slog handler that records each record's level.
type levelRecorder struct{ levels *[]slog.Level }

func (h levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h levelRecorder) Handle(_ context.Context, r slog.Record) error {
	*h.levels = append(*h.levels, r.Level)
	return nil
}
func (h levelRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h levelRecorder) WithGroup(string) slog.Handler      { return h }

// TestServerSecretsOnlySecretHeaders: only headers named like a
// credential are redacted: the redactor rewrites every tool's output,
// so an Accept: application/json header must not turn a file's
// "application/json" into [REDACTED] in what the model reads.
func TestServerSecretsOnlySecretHeaders(t *testing.T) {
	got := serverSecrets("", map[string]string{
		"Accept": "application/json", "User-Agent": "my-agent/1.0.0", "X-Api-Key": "k0123456789", "Cookie": "sid=0123456789", "Proxy-Authorization": "Basic dXNlcjpwYXNz",
	}, nil)
	slices.Sort(got)
	if want := []string{"Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "k0123456789", "sid=0123456789"}; !slices.Equal(got, want) {
		t.Fatalf("serverSecrets = %q, want %q", got, want)
	}
}

// TestProviderHintSaysWhatToDo: a failure that ends a run on the
// qualified route says what to do: run again later once recovery ran out
// of attempts or of max_retry_wait_secs, check billing for a quota code
// (even with OpenAI's 429), rephrase after a content filter; a code that
// blames the request is never told to be sent again.
func TestProviderHintSaysWhatToDo(t *testing.T) {
	cfg := config.Defaults()
	eof := &provider.Error{Phase: provider.Body, Class: provider.TerminalEOF, Dispatched: true}
	for _, tc := range []struct {
		name string
		err  error
		want string // "" means no hint
	}{
		{"exhausted", &agent.ExhaustedError{Budget: "stream", Attempts: 12, Err: eof},
			"response stream broke off before the answer was complete; octet made 12 attempts without success: run the prompt again later"},
		{"retry wait", &agent.RetryWaitLimit{Limit: time.Minute, Err: &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 503}},
			"(HTTP 503); octet stopped retrying at max_retry_wait_secs"},
		{"quota 429", &agent.PermanentError{Code: "insufficient_quota", Err: &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 429, Code: "insufficient_quota"}},
			"no quota for this request (insufficient_quota): check the plan and billing of the key in OPENAI_API_KEY"},
		{"rate limit", &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 429, Code: "rate_limit_exceeded"},
			"rate-limited the request (HTTP 429); octet does not resend a rate-limited request: run the prompt again later"},
		{"context", &agent.PermanentError{Code: "context_length_exceeded", Err: &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 400, Code: "context_length_exceeded"}},
			"compact the session (/compact, or octet exec --compact --session ID) or start a new one"},
		{"content filter", &provider.Error{Phase: provider.Body, Class: provider.ResponsesIncomplete, IncompleteReason: "content_filter"},
			"content filter stopped the answer: rephrase the prompt"},
		{"request code", &provider.Error{Phase: provider.Body, Class: provider.ResponsesFailed, Code: "invalid_image"}, ""},
		{"anthropic too long", &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 400, Type: "invalid_request_error", Message: "prompt is too long: 215000 tokens > 200000 maximum"},
			"larger than the model or the provider takes (HTTP 400): compact the session"},
		{"llama.cpp", &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 400, Type: "exceed_context_size_error", Message: "the request exceeds the available context size"},
			"compact the session"},
		{"413", &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 413, Type: "request_too_large", Message: "Request exceeds the maximum allowed number of bytes."},
			"(HTTP 413): compact the session"},
		{"region 403", &agent.PermanentError{Code: "unsupported_country_region_territory", Err: &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 403, Code: "unsupported_country_region_territory"}},
			"does not serve requests from this country, region or territory"},
		{"key 401", &agent.PermanentError{Code: "invalid_api_key", Err: &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 401, Code: "invalid_api_key"}},
			"refused the API key (HTTP 401): check OPENAI_API_KEY"},
		{"bad param", &provider.Error{Phase: provider.Opening, Class: provider.HTTPStatus, Status: 400, Message: "Unknown parameter: 'foo'"}, ""},
	} {
		got := ProviderHint(tc.err, &cfg)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: hint %q, want it to contain %q", tc.name, got, tc.want)
		}
	}
}
