package agent

import (
	"bytes"
	"testing"
)

// TestAppendEventMatchesMarshalEvent: the hand-written delta encoders
// produce exactly MarshalEvent's bytes (the wire and the replay buffer
// must not depend on which path encoded an event).
func TestAppendEventMatchesMarshalEvent(t *testing.T) {
	texts := []string{"", "w ", "line\nwith \"quotes\" <tags> & \\", "héllo ✓ \u2028 \xff", "\x00\x1f\t"}
	var evs []Event
	for _, s := range texts {
		evs = append(evs,
			&OutputDelta{Channel: ChannelText, Text: s},
			&OutputDelta{Channel: ChannelReasoning, Text: s},
			&ToolCallDelta{CallID: "call_" + s, Delta: s},
			&ToolCallStarted{CallID: "c", Name: s}, // the generic path
		)
	}
	for _, e := range evs {
		want, err := MarshalEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendEvent([]byte("prefix"), e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Errorf("AppendEvent(%#v) = %s, MarshalEvent = %s", e, got[len("prefix"):], want)
		}
	}
}

func TestAppendEventDeltaDoesNotAllocate(t *testing.T) {
	e := &OutputDelta{Channel: ChannelText, Text: "some streamed <text>\n"}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf, _ = AppendEvent(buf[:0], e) }); n != 0 {
		t.Errorf("AppendEvent(OutputDelta) allocates %v times", n)
	}
}
