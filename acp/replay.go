package acp

import (
	"encoding/base64"
	"fmt"

	"github.com/octet-agent/octet/session"
)

// replay sends the session's branch as session/update notifications, in
// order: prompts as user_message_chunk, answers and reasoning summaries
// as agent chunks, calls as tool_call and their results as
// tool_call_update (completed or failed, with the recorded diffs), then
// the session's plan, if it has one. Opaque reasoning content is never
// sent.
func (as *acpSession) replay() {
	for _, e := range as.hs.Branch() {
		switch e.Type {
		case session.EntryUser, session.EntrySteering:
			as.srv.update(as.id, chunk("user_message_chunk", e.ID, e.Text))
			as.replayImages(e.ID, e.PromptImages())
		case session.EntryAssistant:
			for _, it := range e.Items {
				as.replayItem(e.ID, it)
			}
		case session.EntryToolResult:
			if r := e.Result; r != nil {
				as.replayResult(r)
			}
		case session.EntryCompaction:
			if c := e.Compaction; c != nil && c.Summary != "" {
				as.srv.update(as.id, chunk("agent_thought_chunk", e.ID, "Earlier conversation, compacted:\n"+c.Summary))
			}
		}
	}
	if p := as.hs.Plan(); p != nil {
		// The session's plan, as the model last set it.
		as.srv.update(as.id, map[string]any{"sessionUpdate": "plan", "entries": planEntries(p.Steps)})
	}
}

func (as *acpSession) replayItem(entryID string, it session.Item) {
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
		v := describeCall(as.cwd, it.Name, []byte(it.Arguments))
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

func (as *acpSession) replayResult(r *session.ToolResult) {
	status := "completed"
	if r.IsError {
		status = "failed"
	}
	// The files the call changed, as recorded with its result.
	content := append(recordedContent(as.srv.log, as.cwd, r, as.hs.FileTexts), literalContent("text", r.Text))
	as.srv.update(as.id, map[string]any{
		"sessionUpdate": "tool_call_update", "toolCallId": r.CallID, "status": status,
		"content": content, "rawOutput": map[string]any{"text": r.Text, "isError": r.IsError},
	})
}

// chunk is a ContentChunk update of text.
// replayImages sends a prompt's images as image content of the user's
// message; an image gone from the image store is said in text.
func (as *acpSession) replayImages(entryID string, imgs []session.Image) {
	for _, im := range imgs {
		data, err := as.hs.Image(im)
		if err != nil {
			as.srv.update(as.id, chunk("user_message_chunk", entryID, fmt.Sprintf("[an image (%s) no longer in octet's image store]", im.MimeType)))
			continue
		}
		as.srv.update(as.id, map[string]any{"sessionUpdate": "user_message_chunk", "messageId": entryID,
			"content": map[string]any{"type": "image", "mimeType": im.MimeType, "data": base64.StdEncoding.EncodeToString(data)}})
	}
}

func chunk(kind, messageID, text string) map[string]any {
	return map[string]any{"sessionUpdate": kind, "messageId": messageID, "content": map[string]any{"type": "text", "text": text}}
}
