package acp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/octet-agent/octet/agent/team"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestSDKDelegation: the SDK's client decodes both forms of a delegated
// child. Without the subagents capability the child is a think tool call
// on the prompt's session ending completed with its answer; with it, a
// subagent_update announces the child session (idle end_turn at the end)
// and the child's answer streams on that session, not the parent's. The
// task, the model's text, is shown in the call's title and the
// announcement's description as its first line made visible and marked
// as cut (in the title as a Markdown code span), and whole as the
// child's first message.
func TestSDKDelegation(t *testing.T) {
	for _, mode := range []string{"toolcalls", "subagents"} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t)
			w.args = []string{mode}
			w.env = []string{"OCTET_EFFECT_POLICY=unsafe_host"}
			w.prov.Enqueue(
				providertest.Reply(providertest.FunctionCall("s1", team.ToolSpawn, `{"task":"CHILD-ONE `+"`answer`"+`\u202e\nin full"}`)).ForRequestContaining("ROOT-PROMPT"),
				providertest.Reply(providertest.FunctionCall("w1", team.ToolWait, `{"timeout_seconds":60}`)).ForRequestContaining("ROOT-PROMPT"),
				providertest.Text("done").ForRequestContaining("ROOT-PROMPT"),
				providertest.Text("child says one").ForRequestContaining("CHILD-ONE"),
			)
			var out sdkOut
			w.run(t, "delegate", &out)
			var card, announce []update
			child, childText, parentText, task := "", "", "", ""
			for _, u := range out.Updates {
				var c struct{ Text string }
				json.Unmarshal(u.Content, &c)
				switch {
				case u.OnSession == "" && u.SessionUpdate == "agent_message_chunk":
					parentText += c.Text
				case u.OnSession != "" && u.SessionUpdate == "user_message_chunk":
					task += c.Text
				case strings.HasPrefix(u.ToolCallID, "octet-agent-"):
					card = append(card, u)
				case u.SessionUpdate == "subagent_update":
					announce = append(announce, u)
				case u.OnSession != "" && u.SessionUpdate == "agent_message_chunk":
					child = u.OnSession
					childText += c.Text
				}
			}
			if out.Answer.StopReason != "end_turn" || parentText != "done" {
				t.Fatalf("answer %+v, text %q", out.Answer, parentText)
			}
			if mode == "toolcalls" {
				if len(announce) != 0 || child != "" {
					t.Fatalf("subagent traffic to a client without the capability: %+v", out.Updates)
				}
				if len(card) != 3 || card[0].Kind != "think" || card[0].Title != "root/worker1: ``CHILD-ONE `answer`⟨U+202E⟩ ⟨cut: 1 more line⟩``" || card[2].Status != "completed" || !strings.Contains(string(card[2].Content), "child says one") {
					t.Fatalf("child tool call %+v", card)
				}
				return
			}
			if len(card) != 0 || len(announce) != 2 || announce[0].Description != "CHILD-ONE `answer`⟨U+202E⟩ ⟨cut: 1 more line⟩" || childText != "child says one" || task != "CHILD-ONE `answer`\u202e\nin full" {
				t.Fatalf("tool calls %+v, subagent updates %+v, child task %q, text %q", card, announce, task, childText)
			}
		})
	}
}
