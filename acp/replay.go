package acp

import (
	"github.com/octet-agent/octet/session"
)

// replay sends the session's branch as session/update notifications, in
// order: prompts as user_message_chunk, answers and reasoning summaries
// as agent chunks, calls as tool_call and their results as
// tool_call_update (completed or failed). Opaque reasoning content is
// never sent.
func (as *acpSession) replay() error {
	tools := map[string]string{}
	args := map[string]string{}
	for _, e := range as.sess.Branch() {
		switch e.Type {
		case session.EntryUser, session.EntrySteering:
			as.srv.update(as.id, chunk("user_message_chunk", e.ID, e.Text))
		case session.EntryAssistant:
			for _, it := range e.Items {
				as.replayItem(e.ID, it, tools, args)
			}
		case session.EntryToolResult:
			if r := e.Result; r != nil {
				as.replayResult(r, tools[r.CallID], args[r.CallID])
			}
		case session.EntryCompaction:
			if c := e.Compaction; c != nil && c.Summary != "" {
				as.srv.update(as.id, chunk("agent_thought_chunk", e.ID, "Earlier conversation, compacted:\n"+c.Summary))
			}
		}
	}
	return nil
}

func (as *acpSession) replayItem(entryID string, it session.Item, tools, args map[string]string) {
	switch it.Type {
	case session.ItemText:
		if it.Text != "" {
			as.srv.update(as.id, chunk("agent_message_chunk", entryID, it.Text))
		}
	case session.ItemReasoning:
		if it.Text != "" {
			as.srv.update(as.id, chunk("agent_thought_chunk", entryID, it.Text))
		}
	case session.ItemFunctionCall:
		tools[it.CallID], args[it.CallID] = it.Name, it.Arguments
		v := describeCall(as.cwd, it.Name, []byte(it.Arguments), nil)
		u := map[string]any{
			"sessionUpdate": "tool_call", "toolCallId": it.CallID, "title": v.title, "kind": v.kind,
			"status": "pending", "rawInput": rawArgs([]byte(it.Arguments)),
		}
		if len(v.locations) > 0 {
			u["locations"] = v.locations
		}
		as.srv.update(as.id, u)
	}
}

func (as *acpSession) replayResult(r *session.ToolResult, tool, args string) {
	status := "completed"
	if r.IsError {
		status = "failed"
	}
	var content []map[string]any
	if tool == "edit" && !r.IsError {
		content = append(content, describeCall(as.cwd, tool, []byte(args), nil).content...)
	}
	content = append(content, textContent(r.Text))
	as.srv.update(as.id, map[string]any{
		"sessionUpdate": "tool_call_update", "toolCallId": r.CallID, "status": status,
		"content": content, "rawOutput": map[string]any{"text": r.Text, "isError": r.IsError},
	})
}

// chunk is a ContentChunk update of text.
func chunk(kind, messageID, text string) map[string]any {
	return map[string]any{"sessionUpdate": kind, "messageId": messageID, "content": map[string]any{"type": "text", "text": text}}
}
