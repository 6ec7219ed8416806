package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// readUntil reads server messages until pred matches one, returning all
// messages read (the match last).
func (c *rawClient) readUntil(what string, pred func(map[string]any) bool) []map[string]any {
	c.t.Helper()
	var got []map[string]any
	for range 10000 {
		m := c.read()
		got = append(got, m)
		if pred(m) {
			return got
		}
	}
	c.t.Fatalf("never saw %s", what)
	return nil
}

func isResponse(id any) func(map[string]any) bool {
	return func(m map[string]any) bool {
		_, hasMethod := m["method"]
		return !hasMethod && fmt.Sprint(m["id"]) == fmt.Sprint(id)
	}
}

func isEvent(kind string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		if m["method"] != "octet/event" {
			return false
		}
		p, _ := m["params"].(map[string]any)
		ev, _ := p["event"].(map[string]any)
		return ev["kind"] == kind
	}
}

// TestCancelRequestMidStream cancels a streaming prompt with
// $/cancelRequest, once by numeric id and once by string id, and checks
// the run ends cancelled with its progress ended.
func TestCancelRequestMidStream(t *testing.T) {
	st := newStack(t, tools.Controlled)
	long := strings.Repeat("word ", 50)
	st.Provider.Enqueue(
		providertest.Text(long).StallAfter(6),
		providertest.Text(long).StallAfter(6),
	)
	c, _ := newRawClient(t, Options{Runtime: st.Runtime})
	c.write(frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"rootUri":"file://%s","capabilities":{"experimental":{"octet":{"events":true}}},"trace":null}}`, st.Workspace)))
	c.readUntil("initialize answer", isResponse("init"))
	c.write(frame(`{"jsonrpc":"2.0","method":"initialized","params":{}}`))
	c.write(frame(`{"jsonrpc":"2.0","id":"s","method":"octet/session/new","params":{}}`))
	msgs := c.readUntil("session/new answer", isResponse("s"))
	sid := msgs[len(msgs)-1]["result"].(map[string]any)["sessionId"].(string)

	for _, id := range []string{`7`, `"p-2"`} {
		c.write(frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"octet/prompt","params":{"sessionId":%q,"text":"go","workDoneToken":"tok-%s"}}`, id, sid, strings.Trim(id, `"`))))
		c.readUntil("an output delta", isEvent("output_delta"))
		c.write(frame(fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":%s}}`, id)))
		var wantID any = 7.0
		if id != "7" {
			wantID = "p-2"
		}
		msgs := c.readUntil("prompt answer", isResponse(wantID))
		res, _ := msgs[len(msgs)-1]["result"].(map[string]any)
		if res["outcome"] != "cancelled" {
			t.Errorf("prompt %s answer %v, want outcome cancelled", id, msgs[len(msgs)-1])
		}
		var ended, finished bool
		for _, m := range msgs {
			if m["method"] == "$/progress" {
				p := m["params"].(map[string]any)
				if v := p["value"].(map[string]any); v["kind"] == "end" && p["token"] == "tok-"+strings.Trim(id, `"`) {
					ended = true
				}
			}
			if isEvent("run_finished")(m) {
				finished = true
			}
		}
		if !ended || !finished {
			t.Errorf("prompt %s: progress end %v, run_finished %v", id, ended, finished)
		}
	}
}

// TestWorkDoneProgressCancel cancels a run through its progress token.
func TestWorkDoneProgressCancel(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text(strings.Repeat("x ", 40)).StallAfter(5))
	e := st.editor(t, Options{}, map[string]any{"events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "go"})
	e.await("output", hasEvent("output_delta", ""))
	var tok struct{ Token string }
	_ = json.Unmarshal(e.awaitRequest("window/workDoneProgress/create"), &tok)
	e.notify("window/workDoneProgress/cancel", map[string]any{"token": tok.Token})
	if ans := waitAnswer(t, ch); ans.Outcome != "cancelled" {
		t.Errorf("answer %+v, want cancelled", ans)
	}
}

// TestSteerFollowUpAndBusy pauses a run on an approval, steers it, queues
// a follow-up, checks a second prompt is refused, then checks the model
// received both inputs and that controls after the end get RunEnded.
func TestSteerFollowUpAndBusy(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	st.Provider.Enqueue(providertest.Text("Follow-up handled."))
	writeFile(t, st.Workspace+"/a.txt", "hello world\n")
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true, "events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	release := make(chan struct{})
	e.respond("octet/confirmEffect", func(p json.RawMessage) (any, error) {
		<-release
		return confirmAnswer("approve", "")(p)
	})
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"})
	runID := e.awaitRunID(sid)
	e.awaitRequest("octet/confirmEffect")

	err := e.call("octet/prompt", map[string]any{"sessionId": sid, "text": "again"}, nil)
	if codeOf(err) != CodeSessionBusy || !strings.Contains(err.Error(), runID) {
		t.Errorf("second prompt: %v, want SessionBusy naming %s", err, runID)
	}
	var steer, follow struct{ MessageID string }
	e.mustCall("octet/steer", map[string]any{"runId": runID, "text": "STEER: keep it short"}, &steer)
	e.mustCall("octet/followUp", map[string]any{"runId": runID, "text": "FOLLOW: then say bye"}, &follow)
	if steer.MessageID == "" || follow.MessageID == "" || steer.MessageID == follow.MessageID {
		t.Errorf("message ids %q %q", steer.MessageID, follow.MessageID)
	}
	close(release)
	ans := waitAnswer(t, ch)
	if ans.Outcome != "completed" {
		t.Fatalf("answer %+v\n%s", ans, e.dump())
	}
	reqs := st.Provider.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d provider requests, want 3", len(reqs))
	}
	if in := string(reqs[1].Raw); !strings.Contains(in, "STEER: keep it short") {
		t.Errorf("second request lacks the steering input: %s", in)
	}
	if in := string(reqs[2].Raw); !strings.Contains(in, "FOLLOW: then say bye") {
		t.Errorf("third request lacks the follow-up: %s", in)
	}
	for _, m := range []string{"octet/steer", "octet/followUp", "octet/finishNow"} {
		if err := e.call(m, map[string]any{"runId": runID, "text": "late"}, nil); codeOf(err) != CodeRunEnded {
			t.Errorf("%s after the run: %v, want RunEnded -32803", m, err)
		}
	}
	var empty map[string]any
	e.mustCall("octet/cancel", map[string]any{"runId": runID}, &empty)
}

// TestResumeAfterSeq checks the replay buffer: events after afterSeq, the
// transcript and usage, and replayTruncated when the buffer is too short.
func TestResumeAfterSeq(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text("first answer here"), providertest.Text("second answer here"))
	e := st.editor(t, Options{EventBuffer: 6}, map[string]any{"events": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	sid := e.newSession()
	a1 := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "one"}))
	a2 := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "two"}))
	all := append(e.eventsOf(a1.RunID), e.eventsOf(a2.RunID)...)
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("session seq not contiguous across runs: event %d has seq %d", i, ev.Seq)
		}
	}
	last := all[len(all)-1].Seq

	type resume struct {
		SessionID        string
		Head             string
		Transcript       []map[string]any
		UsageUncertain   bool
		PendingApprovals []any
		Events           []host.Event
		ReplayTruncated  bool
		ActiveRunID      string
	}
	var r resume
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid, "afterSeq": last - 3}, &r)
	if r.ReplayTruncated || len(r.Events) != 3 || r.Events[0].Seq != last-2 {
		t.Errorf("resume afterSeq=%d: truncated %v, %d events starting %v", last-3, r.ReplayTruncated, len(r.Events), r.Events)
	}
	for i, ev := range r.Events {
		var p eventNote
		_ = json.Unmarshal(ev.Params, &p)
		want := all[len(all)-3+i]
		if ev.Method != "octet/event" || p.Seq != want.Seq || p.Event["kind"] != want.Event["kind"] {
			t.Errorf("replayed %d = %s %s, want seq %d kind %v", i, ev.Method, ev.Params, want.Seq, want.Event["kind"])
		}
	}
	if r.Head == "" || len(r.Transcript) < 4 || r.PendingApprovals == nil || r.ActiveRunID != "" {
		t.Errorf("resume state: head %q, %d transcript entries, pending %v, active %q", r.Head, len(r.Transcript), r.PendingApprovals, r.ActiveRunID)
	}
	if r.Transcript[0]["type"] != "user" || r.Transcript[0]["text"] != "one" {
		t.Errorf("transcript starts %v", r.Transcript[0])
	}
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid, "afterSeq": 0}, &r)
	if !r.ReplayTruncated || len(r.Events) != 6 || r.Events[5].Seq != last {
		t.Errorf("resume afterSeq=0 with a 6-event buffer: truncated %v, %d events", r.ReplayTruncated, len(r.Events))
	}
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid, "afterSeq": last}, &r)
	if r.ReplayTruncated || len(r.Events) != 0 {
		t.Errorf("resume at the last seq: truncated %v, %d events", r.ReplayTruncated, len(r.Events))
	}

	// A second connection (a restarted editor) opens the session from disk.
	e2 := st.editor(t, Options{}, nil)
	var r2 resume
	e2.mustCall("octet/session/resume", map[string]any{"sessionId": sid, "afterSeq": 10}, &r2)
	if r2.Head != r.Head || len(r2.Transcript) != len(r.Transcript) || !r2.ReplayTruncated {
		t.Errorf("fresh resume: head %q vs %q, %d vs %d entries, truncated %v", r2.Head, r.Head, len(r2.Transcript), len(r.Transcript), r2.ReplayTruncated)
	}
	var list struct {
		Sessions []host.SessionInfo
	}
	e2.mustCall("octet/session/list", map[string]any{"cwd": st.Workspace}, &list)
	if !slices.ContainsFunc(list.Sessions, func(s host.SessionInfo) bool { return s.SessionID == sid && s.Title == "test" }) {
		t.Errorf("session/list %+v lacks %s", list.Sessions, sid)
	}
}

// TestResumeReplaysPendingApproval checks that a pending approval is in
// the resume result and asked again, and that answering the replayed
// request decides it.
func TestResumeReplaysPendingApproval(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	writeFile(t, st.Workspace+"/a.txt", "hello world\n")
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	asked := 0
	e.respond("octet/confirmEffect", func(p json.RawMessage) (any, error) {
		e.mu.Lock()
		asked++
		n := asked
		e.mu.Unlock()
		if n == 1 {
			<-never // the first asker (a closed editor window) never answers
			return nil, nil
		}
		return confirmAnswer("approve", "")(p)
	})
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"})
	e.awaitRequest("octet/confirmEffect")
	var r struct {
		PendingApprovals []confirmParams
		ActiveRunID      string
	}
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, &r)
	if len(r.PendingApprovals) != 1 || r.PendingApprovals[0].CallID != "call_1" || r.ActiveRunID == "" {
		t.Fatalf("resume pending %+v active %q", r.PendingApprovals, r.ActiveRunID)
	}
	if ans := waitAnswer(t, ch); ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	if got := readFile(t, st.Workspace+"/a.txt"); got != "goodbye world\n" {
		t.Errorf("a.txt = %q; the replayed approval should have approved it", got)
	}
}

// TestSessionSettingsAndBranch covers octet/setModel, octet/setReasoning,
// octet/policy and octet/session/branch.
func TestSessionSettingsAndBranch(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text("first"), providertest.Text("second"), providertest.Text("third"))
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	var eff struct{ Effective string }
	e.mustCall("octet/setModel", map[string]any{"sessionId": sid, "model": "gpt-5.1-codex"}, &eff)
	if eff.Effective != "gpt-5.1-codex" {
		t.Errorf("setModel effective %q", eff.Effective)
	}
	e.mustCall("octet/setReasoning", map[string]any{"sessionId": sid, "effort": "high"}, &eff)
	if eff.Effective != "high" {
		t.Errorf("setReasoning effective %q", eff.Effective)
	}
	if err := e.call("octet/setReasoning", map[string]any{"sessionId": sid, "effort": "ludicrous"}, nil); codeOf(err) != -32602 {
		t.Errorf("bad effort: %v", err)
	}
	var pol map[string]any
	e.mustCall("octet/policy", map[string]any{"sessionId": sid}, &pol)
	if ep, _ := pol["effect_policy"].(map[string]any); ep["value"] != "controlled" {
		t.Errorf("policy %v", pol)
	}
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "one"}))
	reqs := st.Provider.Requests()
	if m := reqs[0].Body["model"]; m != "gpt-5.1-codex" {
		t.Errorf("request model %v after setModel", m)
	}
	if r, _ := reqs[0].Body["reasoning"].(map[string]any); r["effort"] != "high" {
		t.Errorf("request reasoning %v after setReasoning", reqs[0].Body["reasoning"])
	}
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "two"}))
	type resume struct {
		Head       string
		Transcript []map[string]any
	}
	var before resume
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, &before)
	if len(before.Transcript) != 4 {
		t.Fatalf("transcript has %d entries, want 4", len(before.Transcript))
	}
	first := before.Transcript[1]["id"].(string) // the first answer
	var br struct{ Head string }
	e.mustCall("octet/session/branch", map[string]any{"sessionId": sid, "entryId": first}, &br)
	if br.Head != first {
		t.Errorf("branch head %q, want %q", br.Head, first)
	}
	if err := e.call("octet/session/branch", map[string]any{"sessionId": sid, "entryId": "nope"}, nil); codeOf(err) != -32602 {
		t.Errorf("branch to an unknown entry: %v", err)
	}
	var after resume
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, &after)
	if after.Head != first || len(after.Transcript) != 2 {
		t.Errorf("after branch: head %q, %d entries", after.Head, len(after.Transcript))
	}
	// The next prompt continues from the branch point.
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "three"}))
	if in := string(st.Provider.Requests()[2].Raw); strings.Contains(in, `"two"`) || !strings.Contains(in, "three") {
		t.Errorf("third request should not contain the abandoned branch: %s", in)
	}
}

// TestFinishNow makes a paused run tool-free: the next provider request
// carries no tools.
func TestFinishNow(t *testing.T) {
	st := newStack(t, tools.Controlled)
	editScript(st)
	writeFile(t, st.Workspace+"/a.txt", "hello world\n")
	e := st.editor(t, Options{}, map[string]any{"confirmEffect": true, "events": true})
	release := make(chan struct{})
	e.respond("octet/confirmEffect", func(p json.RawMessage) (any, error) {
		<-release
		return confirmAnswer("deny", "")(p)
	})
	sid := e.newSession()
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "edit"})
	runID := e.awaitRunID(sid)
	e.awaitRequest("octet/confirmEffect")
	var empty map[string]any
	e.mustCall("octet/finishNow", map[string]any{"runId": runID, "text": "wrap up"}, &empty)
	close(release)
	if ans := waitAnswer(t, ch); ans.Outcome != "completed" {
		t.Fatalf("answer %+v", ans)
	}
	reqs := st.Provider.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if tl, _ := reqs[1].Body["tools"].([]any); len(tl) != 0 || !strings.Contains(string(reqs[1].Raw), "wrap up") {
		t.Errorf("request after finishNow has %d tools / lacks the text: %s", len(tl), reqs[1].Raw)
	}
}

// TestSessionListPages checks limit/cursor paging and the cwd filter.
func TestSessionListPages(t *testing.T) {
	st := newStack(t, tools.Controlled)
	e := st.editor(t, Options{}, nil)
	ids := map[string]bool{e.newSession(): true, e.newSession(): true, e.newSession(): true}
	type page struct {
		Sessions   []host.SessionInfo
		NextCursor string
	}
	var p1, p2, other page
	e.mustCall("octet/session/list", map[string]any{"limit": 2}, &p1)
	e.mustCall("octet/session/list", map[string]any{"limit": 2, "cursor": p1.NextCursor}, &p2)
	if len(p1.Sessions) != 2 || p1.NextCursor == "" || len(p2.Sessions) != 1 || p2.NextCursor != "" {
		t.Fatalf("pages %+v / %+v", p1, p2)
	}
	for _, s := range append(p1.Sessions, p2.Sessions...) {
		if !ids[s.SessionID] || s.Cwd != st.Workspace || s.CreatedAt.IsZero() || s.UpdatedAt.Before(s.CreatedAt) {
			t.Errorf("listed %+v", s)
		}
		delete(ids, s.SessionID)
	}
	if len(ids) != 0 {
		t.Errorf("not listed: %v", ids)
	}
	e.mustCall("octet/session/list", map[string]any{"cwd": t.TempDir()}, &other)
	if len(other.Sessions) != 0 {
		t.Errorf("cwd filter kept %d sessions", len(other.Sessions))
	}
	if err := e.call("octet/session/list", map[string]any{"cursor": "x"}, nil); codeOf(err) != -32602 {
		t.Errorf("bad cursor: %v", err)
	}
}

// TestBareClientGetsProgress: a client that advertises no capabilities
// at all and sends no workDoneToken still gets $/progress begin … end for
// its run (on a server token, without window/workDoneProgress/create,
// which it did not allow), and can cancel through that token.
func TestBareClientGetsProgress(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text("Hello."), providertest.Text(strings.Repeat("word ", 50)).StallAfter(4))
	c, _ := newRawClient(t, Options{Runtime: st.Runtime})
	c.write(frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"rootUri":"file://%s","capabilities":{}}}`, st.Workspace)))
	c.readUntil("initialize answer", isResponse(1))
	c.write(frame(`{"jsonrpc":"2.0","id":2,"method":"octet/session/new","params":{}}`))
	msgs := c.readUntil("session/new answer", isResponse(2))
	sid := msgs[len(msgs)-1]["result"].(map[string]any)["sessionId"].(string)

	c.write(frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"octet/prompt","params":{"sessionId":%q,"text":"hi"}}`, sid)))
	msgs = c.readUntil("prompt answer", isResponse(3))
	var kinds []string
	var token any
	for _, m := range msgs {
		if m["method"] == "window/workDoneProgress/create" {
			t.Errorf("asked a client without window.workDoneProgress for a token: %v", m)
		}
		if m["method"] == "$/progress" {
			p := m["params"].(map[string]any)
			if token == nil {
				token = p["token"]
			} else if p["token"] != token {
				t.Errorf("progress token changed from %v to %v", token, p["token"])
			}
			kinds = append(kinds, p["value"].(map[string]any)["kind"].(string))
		}
	}
	if len(kinds) < 2 || kinds[0] != "begin" || kinds[len(kinds)-1] != "end" || slices.Index(kinds, "end") != len(kinds)-1 {
		t.Fatalf("progress kinds %v, want begin … end", kinds)
	}

	c.write(frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"octet/prompt","params":{"sessionId":%q,"text":"go on"}}`, sid)))
	var tok any
	c.readUntil("progress begin", func(m map[string]any) bool {
		if m["method"] != "$/progress" {
			return false
		}
		tok = m["params"].(map[string]any)["token"]
		return true
	})
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "window/workDoneProgress/cancel", "params": map[string]any{"token": tok}})
	c.write(frame(string(b)))
	msgs = c.readUntil("cancelled answer", isResponse(4))
	if res, _ := msgs[len(msgs)-1]["result"].(map[string]any); res["outcome"] != "cancelled" {
		t.Errorf("answer %v, want cancelled through the server's progress token", msgs[len(msgs)-1])
	}
}
