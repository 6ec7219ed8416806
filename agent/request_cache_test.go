package agent

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/session"
)

// longBranch appends turns to s until the branch holds about size bytes
// of text: a prompt, an assistant call and its tool result per turn.
func longBranch(t testing.TB, s *session.Session, size int) {
	out := strings.Repeat("func main() { fmt.Println(\"hello, <world>\") }\n", 50)
	for i := 0; size > 0; i++ {
		id := fmt.Sprintf("call_%06d", i)
		if _, err := s.AppendEntry(session.Entry{Type: session.EntryUser, Text: "read main.go again"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendEntry(session.Entry{Type: session.EntryAssistant, Items: []session.Item{
			{Type: session.ItemText, Text: "Reading it."},
			{Type: session.ItemFunctionCall, CallID: id, Name: "read", Arguments: `{"path":"main.go"}`},
		}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendEntry(session.Entry{Type: session.EntryToolResult, Result: &session.ToolResult{CallID: id, Text: out}}); err != nil {
			t.Fatal(err)
		}
		size -= len(out) + 100
	}
}

// buildAndEncode is what each turn costs before it is sent.
func buildAndEncode(t testing.TB, a *Agent) []byte {
	req, _, _ := testRun(a).buildRequest()
	body, err := req.EncodeHTTP()
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestRequestReusesCommittedEntries: building a turn's request on a long
// branch encodes only what changed since the last turn (it used to encode
// the whole branch again), and its bytes are those of a first build.
func TestRequestReusesCommittedEntries(t *testing.T) {
	h := newHarness(t, harnessOpt{})
	longBranch(t, h.sess, 1600<<10)
	buildAndEncode(t, h.agent) // fills the cache
	if _, err := h.sess.AppendEntry(session.Entry{Type: session.EntryUser, Text: "one more <thing> & \u2028"}); err != nil {
		t.Fatal(err)
	}
	timeBest := func(fresh bool) (time.Duration, []byte) {
		d, body := time.Duration(1<<62), []byte(nil)
		for range 7 {
			a := h.agent
			if fresh {
				var err error
				if a, err = New(h.agent.cfg); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			body = buildAndEncode(t, a)
			d = min(d, time.Since(start))
		}
		return d, body
	}
	warmT, warm := timeBest(false)
	coldT, cold := timeBest(true)
	t.Logf("%d-byte request: %v warm, %v fresh", len(warm), warmT, coldT)
	if !bytes.Equal(warm, cold) {
		t.Fatalf("request bytes differ between a cached and a first build (%d vs %d bytes)", len(warm), len(cold))
	}
	if warmT*2 > coldT {
		t.Fatalf("%d-byte request: %v to build on a warm agent, %v on a fresh one: committed entries are encoded again", len(warm), warmT, coldT)
	}
}
