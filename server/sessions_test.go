package server

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// listedTitle returns the title octet/session/list shows for id.
func listedTitle(t *testing.T, e *fakeEditor, id string) string {
	t.Helper()
	var list struct{ Sessions []host.SessionInfo }
	e.mustCall("octet/session/list", map[string]any{}, &list)
	for _, in := range list.Sessions {
		if in.SessionID == id {
			return in.Title
		}
	}
	t.Fatalf("session %s not listed", id)
	return ""
}

// TestSessionRename: a session's title could not be changed.
// octet/session/rename records a title durably (listed, kept across a
// restart), neutralizes control and bidirectional characters and bounds
// the length; a session without a title takes one from its first prompt.
func TestSessionRename(t *testing.T) {
	st := newStack(t, tools.Controlled)
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	e.mustCall("octet/session/rename", map[string]any{"sessionId": sid, "title": "  Fix\tthe\x1b[31m build\u202e\r\nnow  "}, nil)
	if got := listedTitle(t, e, sid); got != "Fix the [31m build now" {
		t.Errorf("listed title %q", got)
	}
	for _, bad := range []string{"", " \t\n", strings.Repeat("x", host.MaxTitleRunes+1)} {
		if err := e.call("octet/session/rename", map[string]any{"sessionId": sid, "title": bad}, nil); codeOf(err) != -32602 {
			t.Errorf("rename to %d bytes %q…: %v, want -32602", len(bad), bad[:min(len(bad), 8)], err)
		}
	}
	if err := e.call("octet/session/rename", map[string]any{"sessionId": "nope", "title": "x"}, nil); codeOf(err) != CodeNoSession {
		t.Errorf("rename of an unknown session: %v, want -32011", err)
	}
	e.mustCall("octet/session/rename", map[string]any{"sessionId": sid, "title": "Release notes"}, nil)
	stopEditor(t, e)
	e2 := st.editor(t, Options{}, nil)
	if got := listedTitle(t, e2, sid); got != "Release notes" {
		t.Errorf("title after a restart %q", got)
	}

	// The automatic title: the first non-blank line, bounded; a session
	// that has a title keeps it.
	st.Provider.Enqueue(providertest.Text("ok"), providertest.Text("ok"), providertest.Text("ok"))
	var res struct{ SessionID string }
	e2.mustCall("octet/session/new", map[string]any{}, &res)
	long := strings.Repeat("word ", 40)
	waitAnswer(t, e2.promptAsync(map[string]any{"sessionId": res.SessionID, "text": "\n   \n  Fix the typo in\tmain.go  \nand run the tests"}))
	if got := listedTitle(t, e2, res.SessionID); got != "Fix the typo in main.go" {
		t.Errorf("automatic title %q", got)
	}
	waitAnswer(t, e2.promptAsync(map[string]any{"sessionId": res.SessionID, "text": "something else"}))
	if got := listedTitle(t, e2, res.SessionID); got != "Fix the typo in main.go" {
		t.Errorf("title after a second prompt %q", got)
	}
	e2.mustCall("octet/session/new", map[string]any{}, &res)
	waitAnswer(t, e2.promptAsync(map[string]any{"sessionId": res.SessionID, "text": long}))
	if got := listedTitle(t, e2, res.SessionID); utf8.RuneCountInString(got) > host.AutoTitleRunes || !strings.HasPrefix(got, "word word") || !strings.HasSuffix(got, "…") {
		t.Errorf("automatic title of a long prompt %q", got)
	}
	if got := listedTitle(t, e2, sid); got != "Release notes" {
		t.Errorf("a titled session changed title: %q", got)
	}
}

// host.TranscriptPage as the client decodes it.
type pageResult struct {
	Entries []struct {
		ID        string
		Type      string
		Text      string
		Truncated bool
	}
	NextBefore string
}

// TestSessionFork: octet/session/fork makes a new session holding the
// source's active branch up to an entry; the source file is untouched
// (byte-identical, also after the fork runs); the fork starts with no
// usage, names its origin, and refuses an unknown entry or a cut between
// a tool call and its result.
func TestSessionFork(t *testing.T) {
	st := newStack(t, tools.Controlled)
	writeFile(t, filepath.Join(st.Workspace, "a.txt"), "hello world\n")
	st.Provider.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "read", `{"path":"a.txt"}`)),
		providertest.Text("It says hello."),
		providertest.Text("Second answer."),
		providertest.Text("Fork answer."),
	)
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "read a.txt"}))
	waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "again"}))
	var page pageResult
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": sid}, &page)
	// Newest first: assistant, user, assistant, tool_result, assistant(call), user.
	types := []string{}
	for _, en := range page.Entries {
		types = append(types, en.Type)
	}
	if strings.Join(types, ",") != "assistant,user,assistant,tool_result,assistant,user" {
		t.Fatalf("transcript types %v", types)
	}
	srcPath := filepath.Join(st.Runtime.SessionsDir, sid+".jsonl")
	before := readFile(t, srcPath)

	call := page.Entries[4].ID
	err := e.call("octet/session/fork", map[string]any{"sessionId": sid, "entryId": call}, nil)
	if codeOf(err) != -32602 || !strings.Contains(err.Error(), "call_1") {
		t.Errorf("fork between a call and its result: %v, want -32602 naming call_1", err)
	}
	if err := e.call("octet/session/fork", map[string]any{"sessionId": sid, "entryId": "no-such-entry"}, nil); codeOf(err) != -32602 || !strings.Contains(err.Error(), "no-such-entry") {
		t.Errorf("fork at an unknown entry: %v, want -32602", err)
	}
	at := page.Entries[2].ID // the first run's final answer
	var fork struct{ SessionID string }
	e.mustCall("octet/session/fork", map[string]any{"sessionId": sid, "entryId": at}, &fork)
	if fork.SessionID == "" || fork.SessionID == sid {
		t.Fatalf("fork result %+v", fork)
	}
	var fp pageResult
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": fork.SessionID}, &fp)
	if len(fp.Entries) != 4 || fp.Entries[0].ID != at || fp.Entries[3].Text != "read a.txt" {
		t.Errorf("fork transcript %+v, want the 4 entries up to %s", fp.Entries, at)
	}
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": fork.SessionID, "text": "in the fork"}))
	if ans.Outcome != "completed" {
		t.Fatalf("prompt on the fork: %+v", ans)
	}
	// The fork's request replays the prefix, not the source's later run.
	body, _ := json.Marshal(st.Provider.Requests()[len(st.Provider.Requests())-1].Body)
	if !strings.Contains(string(body), "It says hello.") || strings.Contains(string(body), "Second answer.") {
		t.Errorf("the fork's request does not hold exactly the prefix: %s", body)
	}
	if after := readFile(t, srcPath); after != before {
		t.Error("forking (and running the fork) changed the source session file")
	}
	fs, err := session.Inspect(filepath.Join(st.Runtime.SessionsDir, fork.SessionID+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if h := fs.Header(); h.ForkOf != sid || h.ForkEntry != at || h.Title != "test" {
		t.Errorf("fork header %+v", h)
	}
	if tot := fs.Totals(); tot.Requests != 1 || len(fs.Checkpoints()) != 1 {
		t.Errorf("fork accounting: %d requests, %d checkpoints; want only its own run's", tot.Requests, len(fs.Checkpoints()))
	}
}

// TestSessionDelete: octet/session/delete is refused while a run is
// active (SessionBusy, nothing removed); afterwards it closes the session
// and removes its file and listing cache.
func TestSessionDelete(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text(strings.Repeat("slow ", 40)).StallAfter(5))
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	path := filepath.Join(st.Runtime.SessionsDir, sid+".jsonl")
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "go"})
	runID := e.awaitRunID(sid)
	e.await("streaming", hasEvent("output_delta", runID))
	err := e.call("octet/session/delete", map[string]any{"sessionId": sid}, nil)
	if codeOf(err) != CodeSessionBusy || !strings.Contains(err.Error(), runID) {
		t.Errorf("delete during a run: %v, want -32010 naming %s", err, runID)
	}
	if _, err := os.Stat(path); err != nil || !isOpen(e.srv, sid) {
		t.Fatalf("a refused delete removed or closed the session: %v, open %v", err, isOpen(e.srv, sid))
	}
	e.mustCall("octet/cancel", map[string]any{"runId": runID}, nil)
	waitAnswer(t, ch)
	e.mustCall("octet/session/close", map[string]any{"sessionId": sid}, nil)
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, nil) // writes the listing cache
	if _, err := os.Stat(strings.TrimSuffix(path, ".jsonl") + ".listing"); err != nil {
		t.Fatalf("no listing cache to remove: %v", err)
	}
	e.mustCall("octet/session/delete", map[string]any{"sessionId": sid}, nil)
	for _, p := range []string{path, strings.TrimSuffix(path, ".jsonl") + ".listing"} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after delete: %v", filepath.Base(p), err)
		}
	}
	if isOpen(e.srv, sid) {
		t.Error("the deleted session is still open")
	}
	var list struct{ Sessions []host.SessionInfo }
	e.mustCall("octet/session/list", nil, &list)
	if len(list.Sessions) != 0 {
		t.Errorf("listed after delete: %+v", list.Sessions)
	}
	for _, m := range []string{"octet/session/resume", "octet/session/delete"} {
		if err := e.call(m, map[string]any{"sessionId": sid}, nil); codeOf(err) != CodeNoSession {
			t.Errorf("%s of a deleted session: %v, want -32011", m, err)
		}
	}
	if err := e.call("octet/session/delete", map[string]any{"sessionId": "../x"}, nil); codeOf(err) != CodeNoSession {
		t.Errorf("delete of a path: %v, want -32011", err)
	}
}

// writeLongSession writes a session of n user/assistant pairs into the
// stack's sessions directory and returns its id and its branch.
func writeLongSession(t *testing.T, st *stack, n int, text func(i int) string) (string, []session.Entry) {
	t.Helper()
	s, err := session.Create(st.Runtime.SessionsDir, session.Header{Cwd: st.Workspace, Title: "long"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs := make([]session.Record, 0, 2*n)
	parent := ""
	for i := range n {
		u := session.Entry{ID: session.NewID(), Parent: parent, Type: session.EntryUser, Text: text(i)}
		a := session.Entry{ID: session.NewID(), Parent: u.ID, Type: session.EntryAssistant, StopReason: "completed",
			Items: []session.Item{{Type: session.ItemText, Text: "answer"}}}
		recs = append(recs, session.EntryRecord(u), session.EntryRecord(a))
		parent = a.ID
	}
	if err := s.Append(recs...); err != nil { // one durable batch
		t.Fatal(err)
	}
	return s.Header().ID, s.Branch()
}

// TestSessionTranscriptPaging: resume sent the whole branch in one
// message, unbounded. octet/session/transcript pages it newest first
// (default 50, at most 500 entries, about 1 MiB, entries cut to 256 KiB
// and marked), and resume returns only the newest page, oldest first,
// naming where paging continues.
func TestSessionTranscriptPaging(t *testing.T) {
	st := newStack(t, tools.Controlled)
	sid, branch := writeLongSession(t, st, 300, func(i int) string { return "prompt " + string(rune('a'+i%26)) })
	e := st.editor(t, Options{}, nil)

	var r struct {
		Transcript           []host.PagedEntry
		TranscriptNextBefore string
	}
	e.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, &r)
	n := len(branch)
	if len(r.Transcript) != host.DefaultTranscriptLimit || r.Transcript[0].ID != branch[n-host.DefaultTranscriptLimit].ID ||
		r.Transcript[len(r.Transcript)-1].ID != branch[n-1].ID || r.TranscriptNextBefore != branch[n-host.DefaultTranscriptLimit].ID {
		t.Fatalf("resume transcript: %d entries, next %q", len(r.Transcript), r.TranscriptNextBefore)
	}

	// Walk every page back to the root: each entry exactly once.
	seen, before, pages := 0, "", 0
	for {
		var p pageResult
		e.mustCall("octet/session/transcript", map[string]any{"sessionId": sid, "beforeEntryId": before, "limit": 70}, &p)
		pages++
		for i, en := range p.Entries {
			if want := branch[n-1-seen-i].ID; en.ID != want {
				t.Fatalf("page %d entry %d = %s, want %s", pages, i, en.ID, want)
			}
		}
		seen += len(p.Entries)
		if p.NextBefore == "" {
			break
		}
		if p.NextBefore != p.Entries[len(p.Entries)-1].ID {
			t.Fatalf("nextBefore %q is not the page's oldest entry", p.NextBefore)
		}
		before = p.NextBefore
	}
	if seen != n || pages != (n+69)/70 {
		t.Errorf("paged %d of %d entries in %d pages", seen, n, pages)
	}
	var p pageResult
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": sid, "beforeEntryId": branch[0].ID}, &p)
	// (p is reused below: a field absent from a later answer is cleared first.)
	if len(p.Entries) != 0 || p.NextBefore != "" {
		t.Errorf("page before the root: %+v", p)
	}
	p = pageResult{}
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": sid, "beforeEntryId": branch[1].ID, "limit": 1}, &p)
	if len(p.Entries) != 1 || p.Entries[0].ID != branch[0].ID || p.NextBefore != "" {
		t.Errorf("the last page of one: %+v", p)
	}
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": sid, "limit": 10_000}, &p)
	if len(p.Entries) != host.MaxTranscriptLimit {
		t.Errorf("limit 10000 gave %d entries, want the maximum %d", len(p.Entries), host.MaxTranscriptLimit)
	}
	if err := e.call("octet/session/transcript", map[string]any{"sessionId": sid, "beforeEntryId": "gone"}, nil); codeOf(err) != -32602 {
		t.Errorf("unknown beforeEntryId: %v, want -32602", err)
	}

	// Large entries: no page over the byte bound, no entry over its own.
	big, bigBranch := writeLongSession(t, st, 10, func(i int) string { return strings.Repeat("é", 200_000) })
	var raw json.RawMessage
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": big}, &raw)
	if len(raw) > host.MaxTranscriptPageBytes+4096 {
		t.Errorf("page of %d bytes, over the %d bound", len(raw), host.MaxTranscriptPageBytes)
	}
	p = pageResult{}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Entries) < 2 || p.NextBefore == "" || len(p.Entries) >= len(bigBranch) {
		t.Errorf("big page: %d entries, next %q", len(p.Entries), p.NextBefore)
	}
	for _, en := range p.Entries {
		if en.Type == "user" && (!en.Truncated || len(en.Text) > host.MaxTranscriptEntryBytes || !utf8.ValidString(en.Text) ||
			!strings.Contains(en.Text, "more bytes in the session file")) {
			t.Errorf("big entry: truncated %v, %d bytes", en.Truncated, len(en.Text))
		}
	}
}

// TestSessionStateFirstOnResume: a resumed session gets session_state
// (idle, running with activeRunId, waiting_for_approval) before any other
// event.
func TestSessionStateFirstOnResume(t *testing.T) {
	st := newStack(t, tools.Controlled)
	writeFile(t, filepath.Join(st.Workspace, "a.txt"), "hello world\n")
	st.Provider.Enqueue(
		providertest.Text(strings.Repeat("slow ", 40)).StallAfter(5),
		providertest.Reply(providertest.FunctionCall("call_1", "edit", `{"path":"a.txt","old_text":"hello","new_text":"goodbye"}`)),
		providertest.Text("Edited."),
	)
	e := st.editor(t, Options{}, map[string]any{"events": true, "confirmEffect": true})
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	release := make(chan struct{})
	e.respond("octet/confirmEffect", func(p json.RawMessage) (any, error) {
		<-release
		return confirmAnswer("deny", "")(p)
	})
	sid := e.newSession()

	// firstAfterResume resumes and returns the session's first event
	// after the resume's cursor (lastSeq): events emitted before the
	// resume may still be arriving (the pump is concurrent with an
	// approval request), so order is judged by seq.
	firstAfterResume := func() eventNote {
		t.Helper()
		var r resumeResult
		e.mustCall("octet/session/resume", map[string]any{"sessionId": sid, "afterSeq": 0}, &r)
		var first eventNote
		e.await("an event after resume", func(notes []note) bool {
			first = eventNote{}
			for _, ev := range eventsIn(notes, "") {
				if ev.SessionID == sid && ev.Seq > r.LastSeq && (first.Seq == 0 || ev.Seq < first.Seq) {
					first = ev
				}
			}
			return first.Seq != 0
		})
		if first.Seq != r.LastSeq+1 {
			t.Errorf("session_state seq %d, want lastSeq+1 = %d", first.Seq, r.LastSeq+1)
		}
		return first
	}
	if ev := firstAfterResume(); ev.Event["kind"] != "session_state" || ev.Event["state"] != "idle" || ev.Event["activeRunId"] != nil {
		t.Errorf("idle: first event %v", ev.Event)
	}
	ch := e.promptAsync(map[string]any{"sessionId": sid, "text": "go"})
	runID := e.awaitRunID(sid)
	e.await("streaming", hasEvent("output_delta", runID))
	if ev := firstAfterResume(); ev.Event["kind"] != "session_state" || ev.Event["state"] != "running" || ev.Event["activeRunId"] != runID || ev.RunID != runID {
		t.Errorf("running: first event %+v, want running %s", ev, runID)
	}
	e.mustCall("octet/cancel", map[string]any{"runId": runID}, nil)
	waitAnswer(t, ch)

	ch = e.promptAsync(map[string]any{"sessionId": sid, "text": "edit a.txt"})
	e.awaitRequest("octet/confirmEffect")
	ev := firstAfterResume()
	if ev.Event["kind"] != "session_state" || ev.Event["state"] != "waiting_for_approval" || ev.Event["activeRunId"] == nil {
		t.Errorf("waiting: first event %v", ev.Event)
	}
	close(release)
	waitAnswer(t, ch)

	// A client that turned events off is not sent it.
	e2 := st.editor(t, Options{}, map[string]any{"events": false})
	e2.mustCall("octet/session/resume", map[string]any{"sessionId": sid}, nil)
	e2.mustCall("octet/policy", map[string]any{"sessionId": sid}, nil)
	if evs := e2.eventsOf(""); len(evs) != 0 {
		t.Errorf("events:false client got %v", evs)
	}
}

// TestModels: octet/models lists the model table with limits, reasoning
// support and the configured prices, and the default model; setModel's
// refusal lists the names.
func TestModels(t *testing.T) {
	st := newStack(t, tools.Controlled)
	e := st.editor(t, Options{}, nil)
	var res struct {
		Models []struct {
			ID              string
			ContextWindow   int
			MaxOutputTokens int
			Reasoning       bool
			Prices          *struct{ Input, CachedInput, Output string }
		}
		Default string
	}
	e.mustCall("octet/models", nil, &res)
	byID := map[string]int{}
	for i, m := range res.Models {
		byID[m.ID] = i
	}
	g, ok := byID["gpt-5"]
	if !ok || len(res.Models) < 10 {
		t.Fatalf("models %+v", res.Models)
	}
	if m := res.Models[g]; m.ContextWindow != 400_000 || m.MaxOutputTokens != 128_000 || !m.Reasoning || m.Prices == nil ||
		m.Prices.Input != "1.25" || m.Prices.CachedInput != "0.125" || m.Prices.Output != "10" {
		t.Errorf("gpt-5: %+v %+v", m, m.Prices)
	}
	if m := res.Models[byID["gpt-4.1"]]; m.Reasoning || m.Prices != nil || m.ContextWindow != 1_047_576 {
		t.Errorf("gpt-4.1: %+v", m)
	}

	// A configured catalog: its default and prices.
	st.Runtime.Catalog = func() host.Catalog {
		c := host.DefaultCatalog()
		c.Default = "gpt-5-mini"
		c.Prices = nil
		return c
	}
	e.mustCall("octet/models", map[string]any{}, &res)
	if res.Default != "gpt-5-mini" || res.Models[0].Prices != nil {
		t.Errorf("configured catalog: default %q, first %+v", res.Default, res.Models[0])
	}
	sid := e.newSession()
	err := e.call("octet/setModel", map[string]any{"sessionId": sid, "model": "gpt-9"}, nil)
	if codeOf(err) != -32602 || !strings.Contains(err.Error(), "gpt-5.3-codex") || !strings.Contains(err.Error(), "gpt-4.1") {
		t.Errorf("setModel to an unknown model: %v, want -32602 listing the models", err)
	}
}

// TestUsageContextTokens: usage events said nothing of how full the
// context is; they carry contextTokens (the last request's input+output)
// and contextWindow.
func TestUsageContextTokens(t *testing.T) {
	st := newStack(t, tools.Controlled)
	st.Provider.Enqueue(providertest.Text("hello"))
	e := st.editor(t, Options{}, map[string]any{"events": true})
	sid := e.newSession()
	ans := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": sid, "text": "hi"}))
	var usage map[string]any
	for _, ev := range e.eventsOf(ans.RunID) {
		if ev.Event["kind"] == "usage" {
			usage = ev.Event
		}
	}
	in, _ := usage["input"].(float64)
	out, _ := usage["output"].(float64)
	if usage == nil || usage["contextWindow"] != float64(128_000) || usage["contextTokens"] != in+out || in == 0 {
		t.Errorf("usage event %v, want contextTokens = input+output and contextWindow 128000", usage)
	}
}

// TestOpenSessions200 measures what 200 open sessions hold in one server
// (real runtime, built-in tools, in-process over net.Pipe): the process's
// RSS and file descriptors before and after opening them (new empty
// sessions, then sessions resumed with a 100-entry transcript), and after
// closing them all (docs/performance.md; -v prints the figures). It checks
// one descriptor per open session and none left after the closes.
func TestOpenSessions200(t *testing.T) {
	const n = 200
	st := newStack(t, tools.Controlled)
	e := st.editor(t, Options{MaxSessions: 1000}, nil)
	fds := func() int { es, _ := os.ReadDir("/proc/self/fd"); return len(es) }
	rss := func() int { runtime.GC(); debug.FreeOSMemory(); return vmRSS(os.Getpid()) }
	e.mustCall("octet/session/close", map[string]any{"sessionId": e.newSession()}, nil) // warm up
	ids := make([]string, n)
	for i := range ids {
		ids[i], _ = writeLongSession(t, st, 50, func(int) string { return "a prompt of some length, as people write them" })
	}
	r0, f0 := rss(), fds()
	opened := make([]string, 0, 2*n)
	for range n {
		opened = append(opened, e.newSession())
	}
	r1, f1 := rss(), fds()
	for _, id := range ids {
		e.mustCall("octet/session/resume", map[string]any{"sessionId": id}, nil)
	}
	r2, f2 := rss(), fds()
	for _, id := range append(opened, ids...) {
		e.mustCall("octet/session/close", map[string]any{"sessionId": id}, nil)
	}
	r3, f3 := rss(), fds()
	t.Logf("RSS %d KB idle; +%d KB for %d new sessions (%d KB each), +%d KB for %d resumed (%d KB each); %d KB after closing all",
		r0, r1-r0, n, (r1-r0)/n, r2-r1, n, (r2-r1)/n, r3)
	t.Logf("fds %d idle; %.2f per new session, %.2f per resumed session; %d left after closing", f0, float64(f1-f0)/n, float64(f2-f1)/n, f3-f0)
	if per := float64(f2-f0) / (2 * n); per > 1.05 {
		t.Errorf("%.2f file descriptors per open session, want 1", per)
	}
	if f3 > f0 {
		t.Errorf("%d file descriptors left after closing every session", f3-f0)
	}
}
