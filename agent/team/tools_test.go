package team

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/octet-agent/octet/tools"
)

// TestAnswerPages: a long answer is read in UTF-8-safe pages of at most
// the page size, whose continuation offsets reassemble it exactly.
func TestAnswerPages(t *testing.T) {
	answer := strings.Repeat("héllo wörld ✓ 𝄞 ", 1500) // multi-byte runes of 2, 3 and 4 bytes
	var got strings.Builder
	off, pages := 0, 0
	for {
		var v view
		v.withPage(answer, off, maxFinalBytes)
		if len(v.Final) > maxFinalBytes || !utf8.ValidString(v.Final) {
			t.Fatalf("page at %d: %d bytes, valid %v", off, len(v.Final), utf8.ValidString(v.Final))
		}
		if v.FinalBytes != len(answer) || v.Offset != off {
			t.Fatalf("page metadata %d/%d, want %d/%d", v.Offset, v.FinalBytes, off, len(answer))
		}
		got.WriteString(v.Final)
		pages++
		if v.Next == nil {
			break
		}
		off = *v.Next
	}
	if got.String() != answer || pages < len(answer)/maxFinalBytes {
		t.Fatalf("%d pages reassemble %d of %d bytes", pages, got.Len(), len(answer))
	}
	// An offset inside a rune moves to the next rune.
	var v view
	v.withPage("a✓b", 2, 10)
	if v.Final != "b" {
		t.Fatalf("page from inside a rune: %q", v.Final)
	}
	// A short answer is not paged.
	v = view{}
	v.withPage("short", 0, 10)
	if v.Final != "short" || v.FinalBytes != 0 || v.Next != nil {
		t.Fatalf("short answer %+v", v)
	}
}

// TestWaitTextFitsTheResultLimit: however many long answers, escaped
// characters included, the wait result stays whole under the broker's
// limit (the broker never cuts it), each answer paged.
func TestWaitTextFitsTheResultLimit(t *testing.T) {
	var snaps []Snapshot
	for range 32 {
		snaps = append(snaps, Snapshot{ID: "w", Path: "root/w", Status: StatusCompleted, Final: strings.Repeat("<&>\"\n\x01", 3000)})
	}
	text, err := waitText(snaps, 0, []Message{{ID: 1, From: "root/w", Text: strings.Repeat("m<", MaxPageBytes/2)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(text) > maxWaitText {
		t.Fatalf("wait text %d bytes > %d", len(text), maxWaitText)
	}
	var res struct {
		Agents   []view
		Messages []Message
	}
	if err := json.Unmarshal([]byte(text), &res); err != nil || len(res.Agents) != 32 {
		t.Fatalf("wait text does not decode: %v", err)
	}
	if len(res.Messages) != 1 || len(res.Messages[0].Text) != MaxPageBytes {
		t.Fatal("the leased message page was not carried whole")
	}
	for _, a := range res.Agents {
		if a.Next == nil || a.Final == "" {
			t.Fatalf("long answer not paged: %+v", a)
		}
	}
}

// TestWaitTextBoundsErrors: 32 children failed with long errors and a
// full message page still make a whole wait result under the limit.
func TestWaitTextBoundsErrors(t *testing.T) {
	var snaps []Snapshot
	for range 32 {
		snaps = append(snaps, Snapshot{ID: "w", Path: "root/w", Status: StatusFailed, Error: strings.Repeat("provider said no. ", 4000)})
	}
	text, err := waitText(snaps, 0, []Message{{ID: 1, From: "root/w", Text: strings.Repeat("m", MaxPageBytes)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(text) > maxWaitText {
		t.Fatalf("wait text %d bytes > %d", len(text), maxWaitText)
	}
}

// TestUnknownChildSaysWhatToDo: naming a child that is not the caller's
// in this turn (one of an earlier turn, which has ended) says so and what
// to do, both before any child was started and after.
func TestUnknownChildSaysWhatToDo(t *testing.T) {
	f := newFixture(t, fixtureOpt{})
	res, err := waitTool{base{caller: "root", team: f.owner.Team, current: f.owner.Current}}.Execute(t.Context(), tools.Invocation{Arguments: []byte(`{"agent_ids":["worker1"]}`)})
	if err != nil || !res.IsError || !strings.Contains(res.Text, "earlier turns have ended") {
		t.Fatalf("wait before any spawn: %+v, %v", res, err)
	}
	tm := f.team()
	if _, err := tm.Interrupt("root", "worker9"); err == nil || !errors.Is(err, ErrUnknownAgent) || !strings.Contains(err.Error(), "earlier turns have ended") {
		t.Fatalf("interrupt of an unknown child: %v", err)
	}
}
