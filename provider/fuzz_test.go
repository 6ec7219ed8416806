package provider

import (
	"bytes"
	"io"
	"reflect"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// FuzzSSEReader checks that the parser never panics, never returns CR or LF
// inside an event name, never returns CR inside data, and yields the same
// events however the input is split into reads.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("event: response.created\ndata: {\"type\":\"response.created\"}\n\n"))
	f.Add([]byte("\xEF\xBB\xBFdata: a\r\ndata: b\r\r: c\nid: 1\nretry: 10\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, errW := readAllSSE(bytes.NewReader(in), 4096)
		split, errS := readAllSSE(iotest.OneByteReader(bytes.NewReader(in)), 4096)
		if (errW == io.EOF) != (errS == io.EOF) {
			t.Fatalf("whole err %v, split err %v", errW, errS)
		}
		if errW == io.EOF && len(whole) != len(split) {
			t.Fatalf("whole %d events, split %d", len(whole), len(split))
		}
		for i, ev := range whole {
			if bytes.ContainsAny([]byte(ev.Event), "\r\n") || bytes.ContainsRune([]byte(ev.Data), '\r') {
				t.Fatalf("event %d has a line break: %q", i, ev)
			}
			if errW == io.EOF && ev != split[i] {
				t.Fatalf("event %d differs: %q vs %q", i, ev, split[i])
			}
		}
	})
}

// FuzzDecodeEvent checks that any payload either decodes or fails with a
// typed body-phase error, never panics, and that emitted events are sane.
func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"type":"response.output_text.delta","item_id":"m","output_index":0,"delta":"hi"}`))
	f.Add([]byte(`{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":1,"input_tokens_details":null}}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var d decoder
		slow := decoder{noFast: true}
		for _, payload := range bytes.Split(in, []byte("\n")) {
			ev, st, err := d.decode(payload)
			sev, sst, serr := slow.decode(payload)
			if !reflect.DeepEqual(ev, sev) || st != sst || (err == nil) != (serr == nil) ||
				err != nil && (err.Class != serr.Class || err.Decode != serr.Decode) {
				t.Fatalf("fast and general decoders disagree on %q:\nfast %+v %+v %v\nslow %+v %+v %v", payload, ev, st, err, sev, sst, serr)
			}
			if err != nil {
				checkFailure(t, err, payload)
				return
			}
			if st.emit && (ev.Type < EventCreated || ev.Type > EventCompleted) {
				t.Fatalf("emitted bad event type %d", ev.Type)
			}
			if ev.Type == EventItemDone && ev.Item == nil || ev.Type == EventCompleted && ev.Response == nil {
				t.Fatalf("event %v without payload", ev.Type)
			}
			if st.final {
				return
			}
		}
	})
}

// FuzzRouteDecoders feeds the chat and anthropic decoders any sequence
// of frame payloads (one per line): they never panic, every failure is a
// typed, dispatched body-phase error, and a completed response carries
// only calls with an id and a name.
func FuzzRouteDecoders(f *testing.F) {
	f.Add([]byte("{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n[DONE]"))
	f.Add([]byte("{\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n{\"type\":\"content_block_stop\",\"index\":0}\n{\"type\":\"message_stop\"}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, d := range []frameDecoder{&chatDecoder{}, &anthropicDecoder{}} {
			var out []Event
			ended := false
			for _, payload := range bytes.Split(in, []byte("\n")) {
				var final bool
				var err *Error
				out, final, err = d.frame(&SSEEvent{Data: payload}, out[:0])
				if err == nil && !final {
					continue
				}
				checkRouteOutcome(t, out, final, err, payload)
				ended = true
				break
			}
			if !ended {
				out, err := d.end(out[:0])
				checkRouteOutcome(t, out, err == nil, err, nil)
			}
		}
	})
}

func checkRouteOutcome(t *testing.T, out []Event, final bool, err *Error, payload []byte) {
	t.Helper()
	if err != nil {
		checkFailure(t, err, payload)
		return
	}
	if !final || len(out) == 0 || out[len(out)-1].Type != EventCompleted || out[len(out)-1].Response == nil {
		t.Fatalf("a stream ended without its completed event: %+v", out)
	}
	for _, it := range out[len(out)-1].Response.Output {
		if it.Type == ItemFunctionCall && (it.CallID == "" || it.Name == "" || it.Arguments == "") {
			t.Fatalf("completed call without id, name or arguments: %+v", it)
		}
	}
}

// checkFailure fails t unless err is a typed decoder failure: a body-phase
// (or, for a WebSocket error frame with a status, an opening-phase),
// dispatched failure of a known class, a stream failure naming its codec
// step, invalid UTF-8 only for a payload that is not UTF-8.
func checkFailure(t *testing.T, err *Error, payload []byte) {
	t.Helper()
	statusFrame := err.Class == HTTPStatus && err.Phase == Opening
	if (err.Phase != Body && !statusFrame) || !err.Dispatched || err.Class == 0 {
		t.Fatalf("untyped failure %+v", err)
	}
	if err.Class == StreamFailure && err.Decode == DecodeNone {
		t.Fatalf("stream failure without decode kind")
	}
	if err.Decode == DecodeInvalidUTF8 && utf8.Valid(payload) {
		t.Fatalf("valid UTF-8 reported invalid")
	}
}
