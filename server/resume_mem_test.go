package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/heaptest"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// TestResumedSessionsHoldLittle: a resumed session keeps a small part of
// its file in the heap — the file holds its branch, typed again for a run
// or a transcript page — where each used to keep its whole typed branch
// (about 1.2× its file); after a run (which keeps it while it lasts) the
// transcript serves the texts in full. (That the end of a run gives it
// back is host's TestEndedActivityReleasesBranch: the scripted provider
// here keeps every request.)
func TestResumedSessionsHoldLittle(t *testing.T) {
	if !heaptest.OwnProcess(t) {
		return
	}
	st := newStack(t, tools.Controlled)
	e := st.editor(t, Options{MaxSessions: 100}, nil)
	e.respond("window/workDoneProgress/create", func(json.RawMessage) (any, error) { return nil, nil })
	e.newSession() // warm up
	heap := heaptest.Live
	const n, size = 4, 1 << 20
	ids := make([]string, n)
	var files int64
	for i := range ids {
		ids[i] = writeWorkSession(t, st.Runtime.SessionsDir, st.Workspace, size, i)
		fi, err := os.Stat(filepath.Join(st.Runtime.SessionsDir, ids[i]+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		files += fi.Size()
	}
	h0 := heap()
	for _, id := range ids {
		e.mustCall("octet/session/resume", map[string]any{"sessionId": id}, nil)
	}
	resumed := float64(heap()-h0) / float64(files)
	t.Logf("heap per resumed session / its file: %.3f", resumed)
	if resumed > 0.25 {
		t.Errorf("a resumed session holds %.2f of its file in the heap, want ≤ 0.25", resumed)
	}
	st.Provider.Enqueue(providertest.Text("done"), providertest.Text("done"))
	if res := waitAnswer(t, e.promptAsync(map[string]any{"sessionId": ids[0], "text": "go on"})); res.Outcome != "completed" {
		t.Fatalf("prompt: %+v", res)
	}
	var page host.TranscriptPage
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": ids[0], "beforeEntryId": "", "limit": 3}, &page)
	// The page before the run's entries holds the last tool output.
	e.mustCall("octet/session/transcript", map[string]any{"sessionId": ids[0], "beforeEntryId": page.Entries[len(page.Entries)-1].ID, "limit": 3}, &page)
	want := strings.Repeat("line 0 of a tool's output, as long as lines get in a build log\n", 40)
	found := false
	for _, pe := range page.Entries {
		found = found || pe.Result != nil && pe.Result.Text == want
	}
	if !found {
		t.Errorf("the transcript page before the run lacks the last tool output in full: %+v", page.Entries)
	}
}
