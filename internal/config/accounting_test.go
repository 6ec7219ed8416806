package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/octet-agent/octet/internal/price"
)

func TestAccountingDefaults(t *testing.T) {
	c, err := load(t, "", "", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Transport != (Setting[string]{TransportHTTP, SourceDefault}) {
		t.Errorf("transport = %+v", c.Transport)
	}
	if len(c.Prices.Value) != 0 || c.Prices.Source != SourceDefault {
		t.Errorf("prices configured by default (source %s): %v", c.Prices.Source, c.Prices.Value)
	}
	if c.MaxSessionTokens.Value != 0 || c.MaxSessionCost.Value != 0 || c.MaxNetworkWait.Value != 0 {
		t.Errorf("ceilings set by default: %+v %+v %+v", c.MaxSessionTokens, c.MaxSessionCost, c.MaxNetworkWait)
	}
}

func TestAccountingGlobal(t *testing.T) {
	c, err := load(t, `
transport = "websocket"
max_session_tokens = 200000
max_session_cost_usd = "2.50"
max_network_wait_secs = 90

[prices."gpt-5.1-codex"]
input = "2"
cached_input = "0.2"
output = "16.000001"

[prices.local-model]
input = "0"
cached_input = "0"
output = "0"
`, "", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Transport != (Setting[string]{TransportWebSocket, SourceConfig}) {
		t.Errorf("transport = %+v", c.Transport)
	}
	if c.MaxSessionTokens != (Setting[int64]{200000, SourceConfig}) {
		t.Errorf("max tokens = %+v", c.MaxSessionTokens)
	}
	if c.MaxSessionCost != (Setting[price.Picodollars]{2_500_000_000_000, SourceConfig}) {
		t.Errorf("max cost = %+v", c.MaxSessionCost)
	}
	if c.MaxNetworkWait != (Setting[time.Duration]{90 * time.Second, SourceConfig}) {
		t.Errorf("max wait = %+v", c.MaxNetworkWait)
	}
	if c.Prices.Source != SourceConfig {
		t.Errorf("prices source = %s", c.Prices.Source)
	}
	want := map[string]price.Spec{
		"gpt-5.1-codex": {Input: "2", CachedInput: "0.2", Output: "16.000001"},
		"local-model":   {Input: "0", CachedInput: "0", Output: "0"},
	}
	if diff := cmp.Diff(want, c.Prices.Value); diff != "" {
		t.Errorf("configured prices (-want +got):\n%s", diff)
	}
}

func TestAccountingFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"transport", "model = \"m\"\ntransport = \"tcp\"\n", 2, `transport: "tcp" is not one of http, websocket`},
		{"float price", "[prices.m]\ninput = 1.25\ncached_input = \"0\"\noutput = \"1\"\n", 2, "prices.m.input"},
		{"missing field", "model = \"m\"\n\n[prices.\"m\"]\ninput = \"1\"\noutput = \"1\"\n", 3, "prices.m: price of model \"m\" field cached_input: empty price"},
		{"too precise price", "[prices.m]\ninput = \"0.0000001\"\ncached_input = \"0\"\noutput = \"1\"\n", 1, "more than six decimal places"},
		{"unknown price field", "[prices.m]\ninput = \"1\"\ncached_input = \"1\"\noutput = \"1\"\nreasoning = \"1\"\n", 1, `unknown price field "prices.m.reasoning"`},
		{"float cost", "max_session_cost_usd = 2.5\n", 1, "max_session_cost_usd"},
		{"bad cost", "model = \"m\"\nmax_session_cost_usd = \"$5\"\n", 2, `max_session_cost_usd: "$5" is not a decimal amount of US dollars`},
		{"too precise cost", "max_session_cost_usd = \"0.0000001\"\n", 1, "at most six decimal places"},
		{"negative tokens", "max_session_tokens = -1\n", 1, "max_session_tokens: -1 must not be negative"},
		{"wait range", "max_network_wait_secs = 99999999999\n", 1, "max_network_wait_secs: 99999999999 is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.text, "", nil, Flags{})
			fe, ok := errors.AsType[*FileError](err)
			if !ok {
				t.Fatalf("err = %v, want a *FileError", err)
			}
			if fe.Line != tc.line || !strings.Contains(err.Error(), tc.want) || !strings.HasSuffix(fe.Path, "config.toml") {
				t.Fatalf("err = %q (line %d), want line %d containing %q", err, fe.Line, tc.line, tc.want)
			}
		})
	}
}

// TestAccountingProjectOnlyTightens: a project config may lower ceilings
// and the outage bound, or set one where none was; it may not raise or
// remove them, and may not set prices or the transport.
func TestAccountingProjectOnlyTightens(t *testing.T) {
	global := `
transport = "websocket"
max_session_tokens = 1000
max_session_cost_usd = "5"
`
	t.Run("tighten", func(t *testing.T) {
		c, err := load(t, global, "max_session_tokens = 500\nmax_session_cost_usd = \"0.25\"\nmax_network_wait_secs = 30\n", nil, Flags{})
		if err != nil {
			t.Fatal(err)
		}
		if c.MaxSessionTokens != (Setting[int64]{500, SourceProjectConfig}) ||
			c.MaxSessionCost != (Setting[price.Picodollars]{250_000_000_000, SourceProjectConfig}) ||
			c.MaxNetworkWait != (Setting[time.Duration]{30 * time.Second, SourceProjectConfig}) {
			t.Errorf("tightened = %+v %+v %+v", c.MaxSessionTokens, c.MaxSessionCost, c.MaxNetworkWait)
		}
		if len(c.Warnings) != 0 {
			t.Errorf("warnings = %q", c.Warnings)
		}
	})
	t.Run("relax", func(t *testing.T) {
		project := `max_session_tokens = 2000
max_session_cost_usd = "0"
transport = "http"
[prices."gpt-5.1-codex"]
input = "0"
cached_input = "0"
output = "0"
`
		c, err := load(t, global, project, nil, Flags{})
		if err != nil {
			t.Fatal(err)
		}
		if c.MaxSessionTokens != (Setting[int64]{1000, SourceConfig}) || c.MaxSessionCost != (Setting[price.Picodollars]{5_000_000_000_000, SourceConfig}) {
			t.Errorf("a project relaxed a ceiling: %+v %+v", c.MaxSessionTokens, c.MaxSessionCost)
		}
		if c.Transport.Value != TransportWebSocket || len(c.Prices.Value) != 0 {
			t.Errorf("a project changed transport or prices: %+v %+v", c.Transport, c.Prices.Value)
		}
		all := strings.Join(c.Warnings, "\n")
		for _, want := range []string{
			"config.toml:1: max_session_tokens ignored: a project may only lower it",
			"config.toml:2: max_session_cost_usd ignored: a project may not remove the limit",
			"config.toml:3: transport ignored",
			"config.toml:4: prices ignored",
		} {
			if !strings.Contains(all, want) {
				t.Errorf("warnings lack %q:\n%s", want, all)
			}
		}
	})
}

func TestParseUSD(t *testing.T) {
	for in, want := range map[string]price.Picodollars{
		"0": 0, "5": 5_000_000_000_000, "12.50": 12_500_000_000_000, "0.000001": 1_000_000, " 1.5 ": 1_500_000_000_000,
	} {
		if got, err := ParseUSD(in); err != nil || got != want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1e3", "1.0000001", "$5", "1,5", "99999999999999"} {
		if got, err := ParseUSD(in); err == nil {
			t.Errorf("ParseUSD(%q) = %d, want an error", in, got)
		}
	}
}

// TestPrewarmIsGlobalOnly: prewarm is off by default, the global config
// turns it on, and a project config cannot (warm-ups are billed).
func TestPrewarmIsGlobalOnly(t *testing.T) {
	c, err := load(t, "", "", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Prewarm != (Setting[bool]{false, SourceDefault}) {
		t.Errorf("default prewarm = %+v", c.Prewarm)
	}
	c, err = load(t, "prewarm = true\n", "", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Prewarm != (Setting[bool]{true, SourceConfig}) {
		t.Errorf("global prewarm = %+v", c.Prewarm)
	}
	c, err = load(t, "", "prewarm = true\n", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Prewarm.Value {
		t.Error("a project config turned prewarm on")
	}
	if all := strings.Join(c.Warnings, "\n"); !strings.Contains(all, "prewarm ignored") {
		t.Errorf("warnings lack the ignored prewarm:\n%s", all)
	}
}
