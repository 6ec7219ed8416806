package agent

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
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

// TokenUsage is the known usage of one completed provider request, in the
// provider's categories: CachedInput is part of Input and Reasoning is part
// of Output, as the Responses API reports them.
type TokenUsage struct {
	Input       int64
	CachedInput int64
	Output      int64
	Reasoning   int64
}

// Price is the per-token price of one model in each billed category.
// Reasoning tokens are billed as output tokens.
type Price struct {
	Input       Picodollars
	CachedInput Picodollars
	Output      Picodollars
}

// PriceSpec is the configuration form of a [Price]: exact decimal US
// dollars per million tokens ("1.25"), as price lists state them. It
// decodes from TOML or JSON without floats.
type PriceSpec struct {
	Input       string `toml:"input" json:"input"`
	CachedInput string `toml:"cached_input" json:"cached_input"`
	Output      string `toml:"output" json:"output"`
}

// PriceTable maps a model name to its price. A model missing from the table
// has unknown cost; a cost ceiling then fails closed.
type PriceTable map[string]Price

// ErrPriceUnknown reports a model missing from the price table.
var ErrPriceUnknown = errors.New("no price for model")

// DefaultPrices returns the built-in price table (OpenAI list prices per
// million tokens, as published when this table was written). Hosts
// override it from configuration; prices change.
func DefaultPrices() PriceTable {
	t, err := NewPriceTable(map[string]PriceSpec{
		"gpt-5":         {Input: "1.25", CachedInput: "0.125", Output: "10"},
		"gpt-5-codex":   {Input: "1.25", CachedInput: "0.125", Output: "10"},
		"gpt-5-mini":    {Input: "0.25", CachedInput: "0.025", Output: "2"},
		"gpt-5-nano":    {Input: "0.05", CachedInput: "0.005", Output: "0.4"},
		"gpt-5.1":       {Input: "1.25", CachedInput: "0.125", Output: "10"},
		"gpt-5.1-codex": {Input: "1.25", CachedInput: "0.125", Output: "10"},
	})
	if err != nil {
		panic(err) // the literal above is checked by tests
	}
	return t
}

// NewPriceTable converts configured prices into a table, naming the model
// and field of the first invalid price.
func NewPriceTable(specs map[string]PriceSpec) (PriceTable, error) {
	t := make(PriceTable, len(specs))
	for model, s := range specs {
		var p Price
		for _, f := range []struct {
			name string
			in   string
			out  *Picodollars
		}{{"input", s.Input, &p.Input}, {"cached_input", s.CachedInput, &p.CachedInput}, {"output", s.Output, &p.Output}} {
			v, err := ParseUSDPerMillion(f.in)
			if err != nil {
				return nil, fmt.Errorf("price of model %q field %s: %w", model, f.name, err)
			}
			*f.out = v
		}
		t[model] = p
	}
	return t, nil
}

// ParseUSDPerMillion parses an exact decimal price in US dollars per
// million tokens ("1.25", "0.075", "10") into picodollars per token. At
// most six fractional digits are representable exactly; more is an error,
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

// Cost prices one request's known usage. Reasoning is already part of
// Output. It fails for an unknown model, negative counts or overflow.
func (t PriceTable) Cost(model string, u TokenUsage) (Picodollars, error) {
	p, ok := t[model]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrPriceUnknown, model)
	}
	if u.Input < 0 || u.CachedInput < 0 || u.Output < 0 || u.CachedInput > u.Input {
		return 0, fmt.Errorf("price usage of model %q: inconsistent token counts", model)
	}
	var total uint64
	for _, part := range [][2]uint64{
		{uint64(u.Input - u.CachedInput), uint64(p.Input)},
		{uint64(u.CachedInput), uint64(p.CachedInput)},
		{uint64(u.Output), uint64(p.Output)},
	} {
		hi, lo := bits.Mul64(part[0], part[1])
		sum, carry := bits.Add64(total, lo, 0)
		if hi != 0 || carry != 0 || sum > math.MaxInt64 {
			return 0, fmt.Errorf("cost of model %q overflows", model)
		}
		total = sum
	}
	return Picodollars(total), nil
}
