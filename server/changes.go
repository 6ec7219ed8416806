package server

import (
	"context"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/changes"
)

// diffResult is the answer to octet/session/diff.
type diffResult struct {
	// RunID is the run the changes are of (the last run when none was
	// named); omitted when the session has no run yet.
	RunID   string           `json:"runId,omitempty"`
	Changes []changes.Change `json:"changes"`
}

// sessionDiff handles octet/session/diff: what octet's tools changed in
// the workspace in one run, one entry per path.
func (s *Server) sessionDiff(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		RunID     string `json:"runId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if cs, ok, err := s.asChild(p.SessionID); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return s.diffChild(ctx, cs, p.RunID)
	}
	ss, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	// Reading the images may take a moment: let later messages in.
	jsonrpc2.Async(ctx)
	chs, run, err := ss.Session().Diff(p.RunID)
	if err != nil {
		return nil, err
	}
	if chs == nil {
		chs = []changes.Change{}
	}
	return rawResult(diffResult{RunID: run, Changes: chs})
}
