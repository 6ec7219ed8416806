package acp

import (
	"context"
	"errors"
	"fmt"

	"github.com/octet-agent/octet/internal/eventgate"
	"github.com/octet-agent/octet/tools"
)

// Permission option ids (each option's id is its kind).
const (
	optAllowOnce    = "allow_once"
	optAllowAlways  = "allow_always"
	optRejectOnce   = "reject_once"
	optRejectAlways = "reject_always"
)

// errPromptCancelled ends the permission waits of a cancelled prompt.
var errPromptCancelled = errors.New("prompt cancelled")

// rejection is a reject_always answer: the exact tool, effect and scope
// of the call it was given for.
type rejection struct {
	tool   string
	effect tools.Effect
	scope  tools.ApprovalScope
}

// permissionOptions are the choices offered for req: the "always" ones
// only when the call has an exact scope a standing rule can cover.
func permissionOptions(req tools.ConfirmRequest) []map[string]string {
	opts := []map[string]string{{"optionId": optAllowOnce, "name": "Allow once", "kind": optAllowOnce}}
	if req.Scope != nil {
		opts = append(opts, map[string]string{"optionId": optAllowAlways, "name": "Always allow exactly this", "kind": optAllowAlways})
	}
	opts = append(opts, map[string]string{"optionId": optRejectOnce, "name": "Reject", "kind": optRejectOnce})
	if req.Scope != nil {
		opts = append(opts, map[string]string{"optionId": optRejectAlways, "name": "Always reject exactly this", "kind": optRejectAlways})
	}
	return opts
}

// Confirm implements tools.Approver over session/request_permission. The
// answer is bound to the request it was asked for: the option chosen for
// this request id approves this call's digest, nothing else, and the
// broker's single-use grant and standing rules work as for the LSP
// dialect (allow_always is its approve_for_session).
func (as *acpSession) Confirm(ctx context.Context, req tools.ConfirmRequest) (tools.Approval, error) {
	var gate *eventgate.Gate
	if t := as.current(); t != nil {
		gate = t.gate
	}
	return as.confirm(ctx, req, permissionTarget{sessionID: as.ID(), gate: gate})
}

// permissionTarget is where a permission request goes: the session and,
// for a delegated child's call, how it is named.
type permissionTarget struct {
	sessionID string
	// gate, when set, holds the request until the call's tool_call was
	// sent on that session.
	gate *eventgate.Gate
	// show, when set, renames the call after the child and shows it
	// first (on the parent session, where the child's run is not shown).
	show func(call map[string]any)
}

// confirm asks for req on target.
func (as *acpSession) confirm(ctx context.Context, req tools.ConfirmRequest, target permissionTarget) (tools.Approval, error) {
	no := tools.Approval{Digest: req.Digest}
	if as.rejectedAlways(req) {
		no.Reason = "the user chose to always reject this exact call in this session"
		return no, nil
	}
	// The request waits in the session (it is not idle meanwhile) until
	// the broker's expiry, if any, or session/cancel.
	pa, err := as.AddPending(ctx, as.ViewOf(req), 0)
	if err != nil {
		return no, err
	}
	defer as.RemovePending(pa)
	if t := as.current(); t != nil && t.cancelled.Load() {
		// Checked after the request was added: a cancel either sees it
		// or has been seen here.
		return no, context.Canceled
	}
	ctx = pa.Context()
	if target.gate != nil {
		// The call's tool_call (and the text before it) goes first.
		target.gate.Await(ctx, req.Intent.CallID)
	}

	call := as.permissionCall(req)
	if target.show != nil {
		target.show(call)
	}
	params := map[string]any{"sessionId": target.sessionID, "toolCall": call, "options": permissionOptions(req)}
	var resp struct {
		Outcome struct {
			Outcome  string  `json:"outcome"`
			OptionID *string `json:"optionId"`
		} `json:"outcome"`
	}
	err = as.srv.c.call(ctx, "session/request_permission", params, &resp)
	switch {
	case errors.Is(context.Cause(ctx), errPromptCancelled):
		return no, context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return no, fmt.Errorf("call %s: %w", req.Intent.CallID, tools.ErrApprovalExpired)
	case err != nil:
		return no, err
	}
	if resp.Outcome.Outcome != "selected" {
		// "cancelled" (the client's answer to session/cancel) or anything
		// else: not approved.
		return no, nil
	}
	if resp.Outcome.OptionID == nil || *resp.Outcome.OptionID == "" {
		// avante answers so after "Always allow": which option the
		// person chose is not known, so nothing is allowed.
		as.srv.log.Warn("permission answer without an optionId; denied", "session", as.ID(), "call", req.Intent.CallID)
		no.Reason = noOptionDenial
		as.noteDenial(target.sessionID, req.Intent.CallID, noOptionDenial)
		return no, nil
	}
	optionID := *resp.Outcome.OptionID
	as.srv.log.Info("permission answered", "session", as.ID(), "call", req.Intent.CallID, "option", truncate(optionID, 40))
	switch optionID {
	case optAllowOnce:
		return tools.Approval{Approved: true, Digest: req.Digest}, nil
	case optAllowAlways:
		return tools.Approval{Approved: true, Digest: req.Digest, ForSession: req.Scope != nil}, nil
	case optRejectAlways:
		as.rejectAlways(req)
		no.Reason = "the user chose to always reject this exact call in this session"
		return no, nil
	case optRejectOnce:
		return no, nil
	}
	as.srv.log.Warn("unknown permission option; denied", "call", req.Intent.CallID, "option", truncate(optionID, 40))
	no.Reason = "the editor answered with an option octet did not offer; not run"
	as.noteDenial(target.sessionID, req.Intent.CallID, no.Reason)
	return no, nil
}

// noOptionDenial is why a call answered without an option was not run.
const noOptionDenial = "the editor's answer to the permission request named no option (no optionId), so the call was not run; choose Allow or Reject again"

// noteDenial keeps why octet itself denied call callID asked on session
// sessionID, for the call's decision update (the broker's decision says
// only that it was denied).
func (as *acpSession) noteDenial(sessionID, callID, why string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.denials == nil {
		as.denials = map[[2]string]string{}
	}
	as.denials[[2]string{sessionID, callID}] = why
}

// takeDenial returns (and forgets) why octet denied call callID asked on
// session sessionID.
func (as *acpSession) takeDenial(sessionID, callID string) string {
	as.mu.Lock()
	defer as.mu.Unlock()
	key := [2]string{sessionID, callID}
	why := as.denials[key]
	delete(as.denials, key)
	return why
}

// permissionCall is the ToolCallUpdate a permission request shows, with
// octet's digest in _meta: its title and content are the broker's preview
// (req: what the digest is bound to, already rendered with invisible and
// bidirectional characters made visible), whole, never the model's
// arguments; kind and locations are the call's. The title is the
// preview's, naming a bash call's command (its first line, marked when
// cut); the content is the preview's detail (a bash call's whole command)
// and its diff (every hunk of an edit or a write), each a literal code
// block (see display.go), and the title whole when it had to be cut to
// one line. The content is always sent: it replaces whatever the client
// showed for the call before.
func (as *acpSession) permissionCall(req tools.ConfirmRequest) map[string]any {
	in := req.Intent
	v := describeCall(as.cwd(), in.Tool, in.Arguments)
	title := tools.ApprovalHeadline(req.Title, tools.MaxPreviewTitle)
	content := []map[string]any{}
	if title != req.Title {
		content = append(content, literalContent("text", req.Title))
	}
	detailInfo := "text"
	if in.Tool == "bash" {
		title += ": " + tools.ApprovalHeadline(req.Detail, maxTitleText)
		detailInfo = "sh"
	}
	if req.Detail != "" {
		content = append(content, literalContent(detailInfo, req.Detail))
	}
	if req.Diff != "" {
		content = append(content, literalContent("diff", req.Diff))
	}
	call := map[string]any{
		"toolCallId": in.CallID, "title": codeSpan(title), "kind": v.kind,
		"status": "pending", "rawInput": rawArgs(in.Arguments), "content": content,
		"_meta": map[string]any{"octet": map[string]any{"digest": req.Digest, "effect": in.Effect.String(), "scope": req.Scope, "sandbox": req.Sandbox}},
	}
	if len(v.locations) > 0 {
		call["locations"] = v.locations
	}
	return call
}

// rejectedAlways reports whether a reject_always answer covers req.
func (as *acpSession) rejectedAlways(req tools.ConfirmRequest) bool {
	if req.Scope == nil {
		return false
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	for _, r := range as.rejected {
		if r.tool == req.Intent.Tool && r.effect == req.Intent.Effect && r.scope == *req.Scope {
			return true
		}
	}
	return false
}

// maxRejections bounds the reject_always answers one session keeps.
const maxRejections = 1000

func (as *acpSession) rejectAlways(req tools.ConfirmRequest) {
	if req.Scope == nil {
		return
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	if len(as.rejected) < maxRejections {
		as.rejected = append(as.rejected, rejection{tool: req.Intent.Tool, effect: req.Intent.Effect, scope: *req.Scope})
	}
}
