package agent

import (
	"errors"
	"strings"
	"testing"
)

func TestParseUSDPerMillion(t *testing.T) {
	tests := []struct {
		in   string
		want Picodollars
		err  string
	}{
		{"1.25", 1_250_000, ""},
		{"10", 10_000_000, ""},
		{"0.125", 125_000, ""},
		{"0.000001", 1, ""},
		{"0.0000010", 1, ""},
		{"0", 0, ""},
		{"15.", 15_000_000, ""},
		{"", 0, "empty"},
		{"0.0000001", 0, "six decimal places"},
		{"-1", 0, "non-negative decimal"},
		{"1e3", 0, "non-negative decimal"},
		{".5", 0, "non-negative decimal"},
		{"1.2.3", 0, "non-negative decimal"},
		{"99999999999999999999", 0, "too large"},
	}
	for _, tt := range tests {
		got, err := ParseUSDPerMillion(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseUSDPerMillion(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseUSDPerMillion(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func FuzzParseUSDPerMillion(f *testing.F) {
	for _, s := range []string{"1.25", "0.000001", "10", "", "-1", "1e9", "92233720368547.75807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseUSDPerMillion(s)
		if err != nil {
			return
		}
		if p < 0 {
			t.Fatalf("ParseUSDPerMillion(%q) = %d, negative", s, p)
		}
		// Round trip: the exact dollar amount per million tokens.
		back, err := ParseUSDPerMillion(strings.TrimPrefix(Picodollars(p*1_000_000).String(), "$"))
		if err == nil && back != p && p < 9_000_000_000_000 {
			t.Fatalf("round trip of %q: %d -> %s -> %d", s, p, Picodollars(p*1_000_000), back)
		}
	})
}

func TestPriceTableCost(t *testing.T) {
	table, err := NewPriceTable(map[string]PriceSpec{"m": {Input: "1.25", CachedInput: "0.125", Output: "10"}})
	if err != nil {
		t.Fatal(err)
	}
	// 1000 input of which 400 cached, 500 output (200 of them reasoning).
	got, err := table.Cost("m", TokenUsage{Input: 1000, CachedInput: 400, Output: 500, Reasoning: 200})
	if err != nil {
		t.Fatal(err)
	}
	want := Picodollars(600*1_250_000 + 400*125_000 + 500*10_000_000)
	if got != want {
		t.Fatalf("Cost = %d, want %d", got, want)
	}
	if got.String() != "$0.0058" || got.Micros() != 5800 {
		t.Fatalf("String/Micros = %s / %d", got, got.Micros())
	}
	if _, err := table.Cost("other", TokenUsage{Input: 1}); !errors.Is(err, ErrPriceUnknown) {
		t.Fatalf("unknown model: %v", err)
	}
	if _, err := table.Cost("m", TokenUsage{Input: 1, CachedInput: 2}); err == nil {
		t.Fatal("cached above input accepted")
	}
	if _, err := table.Cost("m", TokenUsage{Output: 1 << 62}); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Fatalf("overflow: %v", err)
	}
}

func TestNewPriceTableNamesBadField(t *testing.T) {
	_, err := NewPriceTable(map[string]PriceSpec{"gpt-x": {Input: "1", CachedInput: "0.1", Output: "ten"}})
	if err == nil || !strings.Contains(err.Error(), `"gpt-x"`) || !strings.Contains(err.Error(), "output") {
		t.Fatalf("error = %v, want model and field named", err)
	}
}

func TestDefaultPrices(t *testing.T) {
	p := DefaultPrices()
	if p["gpt-5"].Input != 1_250_000 || p["gpt-5"].Output != 10_000_000 {
		t.Fatalf("gpt-5 price = %+v", p["gpt-5"])
	}
}

func TestPicodollarsString(t *testing.T) {
	for p, want := range map[Picodollars]string{0: "$0", 1: "$0.000000000001", 1_500_000_000_000: "$1.5", -2_000_000_000_000: "$-2"} {
		if got := p.String(); got != want {
			t.Errorf("%d.String() = %s, want %s", p, got, want)
		}
	}
}

func TestCeilingsCheck(t *testing.T) {
	tokens := Ceilings{MaxTokens: 1000}
	cost := Ceilings{MaxCost: 5_000_000}
	tests := []struct {
		name string
		c    Ceilings
		s    UsageState
		ok   bool
	}{
		{"no ceiling, uncertain", Ceilings{}, UsageState{Uncertain: true}, true},
		{"under tokens", tokens, UsageState{Known: TokenUsage{Input: 400, Output: 100}}, true},
		{"tokens reached", tokens, UsageState{Known: TokenUsage{Input: 900, Output: 100}}, false},
		{"tokens with uncertainty", tokens, UsageState{Uncertain: true}, false},
		{"cost under", cost, UsageState{Cost: 4_999_999}, true},
		{"cost reached", cost, UsageState{Cost: 5_000_000}, false},
		{"cost unknown", cost, UsageState{CostUnknown: true}, false},
		{"cost with uncertainty", cost, UsageState{Uncertain: true}, false},
	}
	for _, tt := range tests {
		err := tt.c.Check(tt.s)
		if (err == nil) != tt.ok {
			t.Errorf("%s: Check = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil {
			if _, ok := errors.AsType[*CeilingError](err); !ok {
				t.Errorf("%s: error %T is not *CeilingError", tt.name, err)
			}
			if tt.s.Uncertain && !err.(*CeilingError).Uncertain {
				t.Errorf("%s: refusal not marked uncertain", tt.name)
			}
		}
	}
}

// TestCacheWritesPricedApart: input written to a prompt cache is priced
// at cache_write (Anthropic bills it at 1.25× input), and at the input
// price when the table says nothing of it; cached reads at cached_input.
func TestCacheWritesPricedApart(t *testing.T) {
	table, err := NewPriceTable(map[string]PriceSpec{
		"claude": {Input: "3", CachedInput: "0.3", Output: "15", CacheWrite: "3.75"},
		"plain":  {Input: "3", CachedInput: "0.3", Output: "15"},
	})
	if err != nil {
		t.Fatal(err)
	}
	u := TokenUsage{Input: 1_000_000, CachedInput: 200_000, CacheWrite: 300_000, Output: 100_000}
	// 500k input at $3/M, 200k reads at $0.30/M, 300k writes at $3.75/M, 100k output at $15/M.
	want := map[string]string{"claude": "$4.185", "plain": "$3.96"}
	for model, w := range want {
		c, err := table.Cost(model, u)
		if err != nil || c.String() != w {
			t.Errorf("%s: cost %s, %v; want %s", model, c, err, w)
		}
	}
	if _, err := table.Cost("claude", TokenUsage{Input: 10, CachedInput: 6, CacheWrite: 6}); err == nil {
		t.Error("reads and writes above the input were priced")
	}
	if _, err := NewPriceTable(map[string]PriceSpec{"m": {Input: "1", CachedInput: "1", Output: "1", CacheWrite: "x"}}); err == nil || !strings.Contains(err.Error(), "cache_write") {
		t.Errorf("bad cache_write: %v", err)
	}
}
