package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/agent"
)

// modelView is one row of octet/models.
type modelView struct {
	ID              string     `json:"id"`
	ContextWindow   int        `json:"contextWindow"`
	MaxOutputTokens int        `json:"maxOutputTokens"`
	Reasoning       bool       `json:"reasoning"`
	Prices          *priceView `json:"prices,omitempty"`
}

// priceView is a model's price in exact decimal US dollars per million
// tokens, as price lists and config.toml state them.
type priceView struct {
	Input       string `json:"input"`
	CachedInput string `json:"cachedInput"`
	Output      string `json:"output"`
}

// usdPerMillion formats a per-token price in picodollars as US dollars
// per million tokens: one picodollar per token is one micro-dollar per
// million tokens, so the conversion is exact.
func usdPerMillion(p agent.Picodollars) string {
	whole, frac := int64(p)/1_000_000, int64(p)%1_000_000
	s := strconv.FormatInt(whole, 10)
	if frac != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
	}
	return s
}

// models handles octet/models.
func (s *Server) models(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct{}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	cat := s.host.Catalog()
	out := struct {
		Models  []modelView `json:"models"`
		Default string      `json:"default"`
	}{Models: []modelView{}, Default: cat.Default}
	for _, m := range cat.Models {
		v := modelView{ID: m.Name, ContextWindow: m.ContextWindow, MaxOutputTokens: m.MaxOutputTokens, Reasoning: m.Reasoning}
		if pr, ok := cat.Prices[m.Name]; ok {
			v.Prices = &priceView{Input: usdPerMillion(pr.Input), CachedInput: usdPerMillion(pr.CachedInput), Output: usdPerMillion(pr.Output)}
		}
		out.Models = append(out.Models, v)
	}
	return rawResult(out)
}
