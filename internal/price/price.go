// Package price reads prices as configuration states them: exact decimal
// US dollars per million tokens ("1.25"), never a float. It is the
// vocabulary configuration (internal/config) and accounting (agent) share,
// so that configuration stays data: a price is checked where it is read
// and turned into the agent's price table by the host.
package price

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Picodollars is an amount of money in 10⁻¹² US dollars. Money is never a
// float in octet: a token price of $1.25 per million tokens is exactly
// 1,250,000 picodollars per token.
type Picodollars int64

// Micros returns the amount in whole micro-dollars (10⁻⁶ USD), rounded
// down, as the editor protocol's costMicros field carries it.
func (p Picodollars) Micros() int64 { return int64(p) / 1_000_000 }

// String formats the amount as exact decimal US dollars.
func (p Picodollars) String() string {
	neg := p < 0
	u := uint64(p)
	if neg {
		u = -u
	}
	whole, frac := u/1_000_000_000_000, u%1_000_000_000_000
	s := strconv.FormatUint(whole, 10)
	if frac != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%012d", frac), "0")
	}
	if neg {
		s = "-" + s
	}
	return "$" + s
}

// Spec is the configuration form of one model's price: exact decimal US
// dollars per million tokens in each billed category. It decodes from
// TOML or JSON without floats.
type Spec struct {
	Input       string `toml:"input" json:"input"`
	CachedInput string `toml:"cached_input" json:"cached_input"`
	Output      string `toml:"output" json:"output"`
	// CacheWrite is the price of input tokens written to a prompt cache
	// (Anthropic bills them above input); empty means the input price.
	CacheWrite string `toml:"cache_write,omitempty" json:"cache_write,omitempty"`
}

// CacheWritePrice returns the price per token of cache writes: the
// cache_write field, or input when it is empty.
func (s Spec) CacheWritePrice(input Picodollars) (Picodollars, error) {
	if s.CacheWrite == "" {
		return input, nil
	}
	v, err := ParseUSDPerMillion(s.CacheWrite)
	if err != nil {
		return 0, fmt.Errorf("field cache_write: %w", err)
	}
	return v, nil
}

// Parse returns the spec's prices per token, naming the field of the
// first invalid one (CacheWritePrice checks cache_write).
func (s Spec) Parse() (input, cachedInput, output Picodollars, err error) {
	for _, f := range []struct {
		name string
		in   string
		out  *Picodollars
	}{{"input", s.Input, &input}, {"cached_input", s.CachedInput, &cachedInput}, {"output", s.Output, &output}} {
		v, err := ParseUSDPerMillion(f.in)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("field %s: %w", f.name, err)
		}
		*f.out = v
	}
	return input, cachedInput, output, nil
}

// ParseUSDPerMillion parses an exact decimal price in US dollars per
// million tokens ("1.25", "0.075", "10") into picodollars per token (one
// micro-dollar per million tokens is one picodollar per token). At most
// six fractional digits are representable exactly; more is an error,
// never a rounding.
func ParseUSDPerMillion(s string) (Picodollars, error) {
	if s == "" {
		return 0, errors.New("empty price")
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || strings.TrimLeft(whole, "0123456789") != "" || strings.TrimLeft(frac, "0123456789") != "" {
		return 0, fmt.Errorf("price %q is not a non-negative decimal", s)
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > 6 {
		return 0, fmt.Errorf("price %q has more than six decimal places", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/1_000_000 {
		return 0, fmt.Errorf("price %q is too large", s)
	}
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return Picodollars(w*1_000_000 + f), nil
}
