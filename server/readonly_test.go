package server

import (
	"os"
	"testing"

	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// TestTranscriptReadsWithoutOpening: octet/session/transcript of a
// session this server has not opened reads it from disk read-only. The
// session's last writer left a request unsettled and a torn final record
// (it was killed); the transcript answers, and the file stays
// byte-identical: no torn tail cut, no uncertainty recorded, no agent
// attached. On the old code the transcript opened the session for
// writing (as resume does), which repaired the tail and recorded the
// request as unsettled.
func TestTranscriptReadsWithoutOpening(t *testing.T) {
	st := newStack(t, tools.Controlled)
	sess, err := session.Create(st.Runtime.SessionsDir, session.Header{Cwd: st.Workspace, Title: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	sid, path := sess.Header().ID, sess.Path()
	user, err := sess.AppendEntry(session.Entry{Type: session.EntryUser, Text: "question"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Append(session.DispatchRecord(session.Dispatch{ID: session.NewID(), RunID: "run1", Model: "m"})); err != nil {
		t.Fatal(err)
	}
	sess.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"kind":"entry","id":"torn`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before := readFile(t, path)

	e := st.editor(t, Options{}, nil)
	var page pageResult
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": sid}, &page)
	if len(page.Entries) != 1 || page.Entries[0].ID != user.ID {
		t.Fatalf("transcript %+v, want the one user entry", page.Entries)
	}
	if after := readFile(t, path); after != before {
		t.Fatalf("the transcript changed the session file:\nbefore %q\nafter  %q", before, after)
	}
	if err := e.call("octet/session/transcript", map[string]any{"sessionId": "no-such-session"}, nil); codeOf(err) != CodeNoSession {
		t.Errorf("transcript of an unknown session: %v, want %d", err, CodeNoSession)
	}
}
