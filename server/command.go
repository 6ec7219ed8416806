package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/octet-agent/octet/host"
	"go.lsp.dev/jsonrpc2"
)

// executeCommand handles workspace/executeCommand for plain LSP clients:
//
//   - octet.prompt [{sessionId?, text, withoutTools?}] or ["text"]: like
//     octet/prompt, and the answer's text is the run's final answer (a
//     stock client shows no octet/event); without a sessionId it uses this connection's default
//     session, created in the workspace on first use. The command's own
//     workDoneToken (ExecuteCommandParams) carries its progress.
//   - octet.cancel [{runId?}]: cancels the run, or every active run.
//   - octet.approve [{digest?, callId?, forSession?}] / octet.deny
//     [{digest?, callId?, reason?}]: answers a pending
//     approval (the only one, or the one named).
func (s *Server) executeCommand(ctx context.Context, req *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		Command       string            `json:"command"`
		Arguments     []json.RawMessage `json:"arguments"`
		WorkDoneToken json.RawMessage   `json:"workDoneToken"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	var arg json.RawMessage
	if len(p.Arguments) > 0 {
		arg = p.Arguments[0]
	}
	switch p.Command {
	case "octet.prompt":
		return s.commandPrompt(ctx, req, arg, p.WorkDoneToken)
	case "octet.cancel":
		var a struct {
			RunID string `json:"runId"`
		}
		if err := decodeParams(arg, &a); err != nil {
			return nil, err
		}
		if a.RunID != "" {
			return s.cancelRun(ctx, req, jsonrpc2.RawMessage(mustJSON(a)))
		}
		return rawResult(map[string]int{"cancelled": s.cancelAllRuns("octet.cancel")})
	case "octet.approve", "octet.deny":
		var a struct {
			Digest     string `json:"digest"`
			CallID     string `json:"callId"`
			ForSession bool   `json:"forSession"`
			Reason     string `json:"reason"`
		}
		if err := decodeParams(arg, &a); err != nil {
			return nil, err
		}
		ans := approvalAnswer{Approved: p.Command == "octet.approve", ForSession: a.ForSession, Reason: a.Reason}
		if ans.Approved {
			ans.Reason = ""
		} else {
			ans.ForSession = false
		}
		n, err := s.decideApproval(ans, a.CallID, a.Digest)
		if err != nil {
			return nil, err
		}
		return rawResult(map[string]int{"resolved": n})
	default:
		return nil, invalidParams("unknown command %q (known: %v)", p.Command, commands)
	}
}

func (s *Server) commandPrompt(ctx context.Context, req *jsonrpc2.Request, arg, token json.RawMessage) (any, error) {
	var p promptParams
	if len(arg) > 0 && arg[0] == '"' {
		if err := json.Unmarshal(arg, &p.Text); err != nil {
			return nil, invalidParams("octet.prompt: %v", err)
		}
	} else if err := decodeParams(arg, &p); err != nil {
		return nil, err
	}
	p.withText = true
	if len(p.WorkDoneToken) == 0 {
		// ExecuteCommandParams carries the LSP work-done token itself.
		p.WorkDoneToken = token
	}
	var ss *sessionState
	if p.SessionID != "" {
		var err error
		if ss, err = s.session(p.SessionID); err != nil {
			return nil, err
		}
	} else {
		var err error
		if ss, err = s.defaultSession(ctx); err != nil {
			return nil, err
		}
	}
	return s.runPrompt(ctx, req.ID(), ss, p)
}

// defaultSession is the session octet.prompt uses without a sessionId.
func (s *Server) defaultSession(ctx context.Context) (*sessionState, error) {
	s.mu.Lock()
	id := s.defaultID
	s.mu.Unlock()
	if id != "" {
		// Released (idle, closed)? The same session, opened again.
		return s.openOrReuse(ctx, id)
	}
	cwd, err := s.resolveCwd("")
	if err != nil {
		return nil, fmt.Errorf("octet.prompt: %w", err)
	}
	ss, err := s.createSession(ctx, host.Spec{Cwd: cwd, Title: "editor session"})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.defaultID = ss.id
	s.mu.Unlock()
	return ss, nil
}
