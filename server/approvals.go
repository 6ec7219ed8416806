package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/tools"
)

// This file is the v1.1 approval choices: "approve_for_session" standing
// rules kept in the session ledger (octet/approvals/list, revoke), a
// denial's reason, and per-session effect policy (octet/session/setPolicy,
// session/new effectPolicy). The broker (tools) alone matches rules; the
// server only keeps them durable and shows them.

// Decisions an octet/confirmEffect answer may carry.
const (
	decisionApprove           = "approve"
	decisionApproveForSession = "approve_for_session"
	decisionDeny              = "deny"
)

// Actions of the window/showMessageRequest fallback.
const (
	actionApprove           = "Approve"
	actionApproveForSession = "Approve for session"
	actionDeny              = "Deny"
)

// confirmAnswer decodes the client's octet/confirmEffect answer: only
// "approve" or "approve_for_session" echoing the request's digest
// approves; anything else (an unknown decision, another digest, a result
// that does not decode) denies.
func (s *Server) confirmAnswer(pa *host.PendingApproval, raw json.RawMessage) tools.Approval {
	var ans struct {
		Decision string `json:"decision"`
		Digest   string `json:"digest"`
		Reason   string `json:"reason"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		s.log.Warn("undecodable octet/confirmEffect answer; denied", "error", err)
		return tools.Approval{}
	}
	approve := ans.Decision == decisionApprove || ans.Decision == decisionApproveForSession
	if approve && !host.SameDigest(ans.Digest, pa.View.Digest) {
		s.log.Warn("approval echoed a different digest; denied", "call", pa.View.CallID)
		return tools.Approval{}
	}
	if !approve {
		if ans.Decision != decisionDeny {
			s.log.Warn("unknown octet/confirmEffect decision; denied", "call", pa.View.CallID, "decision", host.Clip(ans.Decision, 40))
		}
		return tools.Approval{Reason: ans.Reason}
	}
	return tools.Approval{Approved: true, ForSession: ans.Decision == decisionApproveForSession}
}

// fallbackActions are the buttons of a stock client's approval: "Approve
// for session" only when the call can be covered by a standing rule.
func fallbackActions(p confirmParams) []protocol.MessageActionItem {
	if p.RuleScope == nil {
		return []protocol.MessageActionItem{{Title: actionApprove}, {Title: actionDeny}}
	}
	return []protocol.MessageActionItem{{Title: actionApprove}, {Title: actionApproveForSession}, {Title: actionDeny}}
}

// fallbackAnswer maps the chosen action's title to an answer.
func fallbackAnswer(title string) tools.Approval {
	switch title {
	case actionApprove:
		return tools.Approval{Approved: true}
	case actionApproveForSession:
		return tools.Approval{Approved: true, ForSession: true}
	}
	return tools.Approval{}
}

// ruleView is one row of octet/approvals/list.
type ruleView struct {
	RuleID    string              `json:"ruleId"`
	Tool      string              `json:"tool"`
	Effect    string              `json:"effect"`
	Scope     tools.ApprovalScope `json:"scope"`
	Policy    string              `json:"policy"`
	CreatedAt time.Time           `json:"createdAt"`
}

// approvalsList handles octet/approvals/list.
func (s *Server) approvalsList(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	id, err := sessionIDParam(raw)
	if err != nil {
		return nil, err
	}
	ss, err := s.session(id)
	if err != nil {
		return nil, err
	}
	rules := []ruleView{}
	for _, r := range ss.Session().Rules().Rules() {
		rules = append(rules, ruleView{RuleID: r.ID, Tool: r.Tool, Effect: r.Effect.String(), Scope: r.Scope, Policy: r.Policy.String(), CreatedAt: r.Created.UTC()})
	}
	return rawResult(map[string]any{"pending": ss.Pending(), "rules": rules})
}

// approvalsRevoke handles octet/approvals/revoke.
func (s *Server) approvalsRevoke(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		RuleID    string `json:"ruleId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.RuleID == "" {
		return nil, invalidParams("ruleId is required")
	}
	ss, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	switch err := ss.Session().Rules().Revoke(p.RuleID); {
	case errors.Is(err, host.ErrNoRule):
		return nil, invalidParams("session %s has no standing approval %q (octet/approvals/list shows them)", ss.ID(), host.Clip(p.RuleID, 80))
	case err != nil:
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("revoke %s in session %s: %v", p.RuleID, ss.ID(), err))
	}
	s.log.Info("standing approval revoked", "session", ss.ID(), "rule", p.RuleID)
	return json.RawMessage(`{}`), nil
}

// sessionSetPolicy handles octet/session/setPolicy. The new policy
// applies from the next tool call's admission: a call already admitted
// (or whose approval is on screen) keeps the decision it was admitted
// under, and a run in progress continues under the new policy from its
// next call.
func (s *Server) sessionSetPolicy(_ context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID    string `json:"sessionId"`
		EffectPolicy string `json:"effectPolicy"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.EffectPolicy == "" {
		return nil, invalidParams("effectPolicy is required (controlled_bash_approval, controlled or unsafe_host)")
	}
	pol, err := tools.ParsePolicy(p.EffectPolicy)
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	ss, err := s.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	eff, err := ss.Session().SetEffectPolicy(pol)
	switch {
	case errors.Is(err, tools.ErrPolicyLooser):
		return nil, invalidParams("session %s: %v", ss.ID(), err)
	case err != nil:
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("set effect policy of %s: %v", ss.ID(), err))
	}
	s.log.Info("session effect policy set", "session", ss.ID(), "policy", pol.String())
	return rawResult(eff)
}
