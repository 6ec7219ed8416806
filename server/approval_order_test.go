package server

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// TestApprovalFollowsItsEvents checks that octet/confirmEffect reaches the
// client only after every event the run emitted before it — the answer's
// text and the call's tool_started — so an editor can show the approval in
// its place. A long answer before the call keeps the event stream busy
// when the broker asks (the approval used to overtake it).
func TestApprovalFollowsItsEvents(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			st := newStack(t, tools.Controlled)
			st.Provider.Enqueue(
				providertest.Reply(
					providertest.Message(strings.Repeat("word ", 3000)+"done"),
					providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"goodbye"}`),
				),
				providertest.Text("Edited."),
			)
			writeFile(t, filepath.Join(st.Workspace, "a.txt"), "hello world\n")
			e := st.editor(t, Options{}, map[string]any{"confirmEffect": true, "events": true})
			e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
			var before []string // what the client had when it was asked
			e.respond("octet/confirmEffect", func(params json.RawMessage) (any, error) {
				e.mu.Lock()
				notes := append([]note(nil), e.notes...)
				e.mu.Unlock()
				for _, ev := range eventsIn(notes, "") {
					kind, _ := ev.Event["kind"].(string)
					if kind == "tool_started" {
						kind += ":" + fmt.Sprint(ev.Event["callId"])
					}
					before = append(before, kind)
				}
				return confirmAnswer("approve", "")(params)
			})
			sid := e.newSession()
			ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"}))
			if ans.Outcome != "completed" {
				t.Fatalf("answer %+v", ans)
			}
			deltas := 0
			for _, k := range before {
				if k == "output_delta" {
					deltas++
				}
			}
			if len(before) == 0 || before[len(before)-1] != "tool_started:call_1" {
				last := "nothing"
				if len(before) > 0 {
					last = before[len(before)-1]
				}
				t.Fatalf("asked after %d events (%d text deltas), the last %s; want tool_started of call_1 last", len(before), deltas, last)
			}
		})
	}
}
