package agent

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/octet-agent/octet/internal/price"
)

// Picodollars is an amount of money in 10⁻¹² US dollars. Money is never a
// float in octet: a token price of $1.25 per million tokens is exactly
// 1,250,000 picodollars per token.
type Picodollars = price.Picodollars

// TokenUsage is the known usage of one completed provider request, in the
// provider's categories: CachedInput is part of Input and Reasoning is part
// of Output, as the Responses API reports them.
type TokenUsage struct {
	Input       int64
	CachedInput int64
	Output      int64
	Reasoning   int64
	// CacheWrite is the part of Input written to a prompt cache
	// (Anthropic's cache_creation_input_tokens).
	CacheWrite int64
}

// Price is the per-token price of one model in each billed category.
// Reasoning tokens are billed as output tokens.
type Price struct {
	Input       Picodollars
	CachedInput Picodollars
	Output      Picodollars
	// CacheWrite prices input tokens written to a prompt cache.
	CacheWrite Picodollars
}

// PriceSpec is the configuration form of a [Price]: exact decimal US
// dollars per million tokens ("1.25"), as price lists state them. It
// decodes from TOML or JSON without floats.
type PriceSpec = price.Spec

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
		in, cached, out, err := s.Parse()
		if err != nil {
			return nil, fmt.Errorf("price of model %q %w", model, err)
		}
		cw, err := s.CacheWritePrice(in)
		if err != nil {
			return nil, fmt.Errorf("price of model %q %w", model, err)
		}
		t[model] = Price{Input: in, CachedInput: cached, Output: out, CacheWrite: cw}
	}
	return t, nil
}

// ParseUSDPerMillion parses an exact decimal price in US dollars per
// million tokens ("1.25", "0.075", "10") into picodollars per token. At
// most six fractional digits are representable exactly; more is an error,
// never a rounding.
func ParseUSDPerMillion(s string) (Picodollars, error) { return price.ParseUSDPerMillion(s) }

// Cost prices one request's known usage. Reasoning is already part of
// Output. It fails for an unknown model, negative counts or overflow.
func (t PriceTable) Cost(model string, u TokenUsage) (Picodollars, error) {
	p, ok := t[model]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrPriceUnknown, model)
	}
	if u.Input < 0 || u.CachedInput < 0 || u.CacheWrite < 0 || u.Output < 0 || u.CachedInput > u.Input-u.CacheWrite {
		return 0, fmt.Errorf("price usage of model %q: inconsistent token counts", model)
	}
	var total uint64
	for _, part := range [][2]uint64{
		{uint64(u.Input - u.CachedInput - u.CacheWrite), uint64(p.Input)},
		{uint64(u.CachedInput), uint64(p.CachedInput)},
		{uint64(u.CacheWrite), uint64(p.CacheWrite)},
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
