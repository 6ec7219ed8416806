package server

import (
	"context"
	"fmt"

	"github.com/octet-agent/octet/host"
	"go.lsp.dev/jsonrpc2"
)

// sessionRewind handles octet/session/rewind.
func (s *Server) sessionRewind(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p host.RewindParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.EntryID == "" {
		return nil, invalidParams("entryId is required")
	}
	if !p.Files && !p.Conversation {
		return nil, invalidParams("nothing to rewind: set files, conversation, or both")
	}
	ss, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	// The rewind holds the session: no run starts meanwhile, and the
	// session is neither released for being idle nor closed under it.
	hold, err := ss.Hold()
	if err != nil {
		return nil, startError(ss.ID(), err)
	}
	defer ss.Release(hold)
	// Reading images and the editor's answers take a while: let later
	// messages (the editor's applyEdit responses) in.
	jsonrpc2.Async(ctx)
	res, err := ss.Session().Rewind(ctx, p)
	if err != nil {
		return nil, err
	}
	return rawResult(res)
}

// rewindingError answers a prompt (or a second rewind) while a rewind of
// the session is in progress.
func rewindingError(sessionID string) error {
	return &jsonrpc2.Error{
		Code:    CodeSessionBusy,
		Message: fmt.Sprintf("session %s is being rewound: try again when octet/session/rewind has answered", sessionID),
	}
}
