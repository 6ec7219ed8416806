package server

import (
	"context"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/host"
)

// models handles octet/models: the catalog with the endpoint's model
// list merged in. Reading the list may wait for the network (bounded),
// so the handler releases the reader first: it changes nothing.
func (s *Server) models(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct{}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	jsonrpc2.Async(ctx)
	cat := s.host.ListModels(ctx)
	return rawResult(struct {
		Models    []host.ModelView `json:"models"`
		Default   string           `json:"default"`
		ListError string           `json:"listError,omitempty"`
	}{Models: cat.Views(), Default: cat.Default, ListError: cat.ListError})
}
