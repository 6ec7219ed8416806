package server

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// TestFailedCallSaysWhy: a failed call's tool_finished carries its
// result text (error), so a client shows the reason (a denial's, the
// tool's), not the call's arguments; a call that succeeded has none.
func TestFailedCallSaysWhy(t *testing.T) {
	st := newStack(t, tools.Controlled)
	writeFile(t, filepath.Join(st.Workspace, "a.txt"), "hello world\n")
	st.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "read", `{"path":"missing.txt"}`)),
		providertest.Reply(providertest.FunctionCall("call_2", "edit", `{"path":"a.txt","old_text":"hello","new_text":"bye"}`)),
		providertest.Reply(providertest.FunctionCall("call_3", "read", `{"path":"a.txt"}`)),
		providertest.Text("Done."),
	)
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true, "events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.respond("octet/confirmEffect", func(params json.RawMessage) (any, error) {
		var p confirmParams
		_ = json.Unmarshal(params, &p)
		return map[string]any{"decision": "deny", "digest": p.Digest, "reason": "not now"}, nil
	})
	sid := e.newSession()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "edit"}))
	got := map[string]string{}
	for _, ev := range e.eventsOf(ans.RunID) {
		if ev.Event["kind"] == "tool_finished" {
			msg, _ := ev.Event["error"].(string)
			got[ev.Event["callId"].(string)] = msg
		}
	}
	if got["call_1"] != "missing.txt: no such file or directory" {
		t.Errorf("the failed read's tool_finished error %q", got["call_1"])
	}
	if !strings.Contains(got["call_2"], "not now") {
		t.Errorf("the denied edit's tool_finished error %q, want the denial with the person's reason", got["call_2"])
	}
	if msg, ok := got["call_3"]; !ok || msg != "" {
		t.Errorf("the read's tool_finished error %q (seen %v)", msg, ok)
	}
}

// TestRunOutcomesInTranscript: a resumed view learns how each run ended
// (the live view had run_finished): the transcript page and resume name
// the runs of their entries that failed or were cancelled; completed
// runs are not listed.
func TestRunOutcomesInTranscript(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(
		providertest.Status(400, "invalid_request_error", "bad", "the request is bad"),
		providertest.Text("Fine."),
		providertest.Text(strings.Repeat("word ", 50)).StallAfter(6),
	)
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true, "events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	sid := e.newSession()
	failed := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "one"}))
	completed := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "two"}))
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "three"})
	cancelled := e.awaitRunID(sid)
	for cancelled == failed.RunID || cancelled == completed.RunID {
		cancelled = e.awaitRunID(sid)
	}
	e.await("an output delta", hasEvent("output_delta", cancelled))
	e.mustCall("octet/cancel", map[string]any{"runId": cancelled}, nil)
	waitAnswer(t, ch)
	if failed.Outcome != "failed" || completed.Outcome != "completed" {
		t.Fatalf("runs %+v %+v", failed, completed)
	}
	var page host.TranscriptPage
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": sid}, &page)
	if len(page.Runs) != 2 || page.Runs[0].RunID != failed.RunID || page.Runs[0].Outcome != "failed" || !strings.Contains(page.Runs[0].Error, "the request is bad") ||
		page.Runs[1].RunID != cancelled || page.Runs[1].Outcome != "cancelled" {
		t.Errorf("transcript runs %+v, want %s failed then %s cancelled", page.Runs, failed.RunID, cancelled)
	}
	var res struct{ Runs []host.RunEnd }
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, &res)
	if len(res.Runs) != 2 {
		t.Errorf("resume runs %+v", res.Runs)
	}
}

// TestUsageCarriesSessionTotals: each usage event carries the session's
// totals besides the run's, so a status line shows the session's cost,
// not one that starts again at every prompt.
func TestUsageCarriesSessionTotals(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text("One."), providertest.Text("Two."))
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true, "events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	sid := e.newSession()
	var runs []string
	for _, text := range []string{"one", "two"} {
		runs = append(runs, waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": text})).RunID)
	}
	usage := func(run string) (runInput, sessionInput float64) {
		for _, ev := range e.eventsOf(run) {
			if ev.Event["kind"] == "usage" {
				s, _ := ev.Event["session"].(map[string]any)
				runInput, _ = ev.Event["input"].(float64)
				sessionInput, _ = s["input"].(float64)
			}
		}
		return runInput, sessionInput
	}
	r1, s1 := usage(runs[0])
	r2, s2 := usage(runs[1])
	if r1 == 0 || s1 != r1 || r2 == 0 || s2 != r1+r2 {
		t.Errorf("usage input: run 1 %v (session %v), run 2 %v (session %v); want the session's to add up", r1, s1, r2, s2)
	}
}
