package provider

import (
	"encoding/json"
	"fmt"
	"io"
)

// Native compaction (Request.Compact). OpenAI's POST …/responses/compact
// takes {model, instructions, input, prompt_cache_key} and answers one
// JSON object, not a stream:
//
//	{"id", "object": "response.compaction", "created_at",
//	 "output": [the user messages kept…, {"type": "compaction", "encrypted_content", "id"}],
//	 "usage": {input_tokens, output_tokens, …}}
//
// The HTTP transport sends it like any request (credentials, dispatch
// detection, status errors, the opening bounded by the caller's context
// and OpenTimeout) and reads the body as a stream of one event, so the
// body has the stream's idle timeout and size bounds on the detached
// body context: the opening is outage-bounded, a healthy body is not.
// The decoder yields each output item (EventItemDone) and then
// EventCompleted with the items and the usage. The agent fails closed on
// any item but user messages and one compaction item.

// asOneEvent presents r, one JSON object, as a server-sent event stream
// of one event: each line prefixed "data: " (JSON text has no raw line
// breaks inside strings, so the event's data is the object), a blank
// line at the end.
func asOneEvent(r io.Reader) io.Reader {
	return &oneEvent{r: r, prefix: true}
}

type oneEvent struct {
	r       io.Reader
	out     []byte // transformed bytes not yet returned
	prefix  bool   // the next byte of r starts a line
	eof     bool
	scratch []byte
}

func (o *oneEvent) Read(p []byte) (int, error) {
	for len(o.out) == 0 {
		if o.eof {
			return 0, io.EOF
		}
		if o.scratch == nil {
			o.scratch = make([]byte, 32<<10)
		}
		m, err := o.r.Read(o.scratch)
		for _, b := range o.scratch[:m] {
			if o.prefix {
				o.out = append(o.out, "data: "...)
			}
			o.out = append(o.out, b)
			o.prefix = b == '\n'
		}
		if err == io.EOF {
			o.eof = true
			o.out = append(o.out, "\n\n"...)
		} else if err != nil {
			return 0, err
		}
	}
	n := copy(p, o.out)
	o.out = o.out[n:]
	if len(o.out) == 0 {
		o.out = o.out[:0:0] // let the consumed buffer go
	}
	return n, nil
}

// compactDecoder decodes the compaction object.
type compactDecoder struct{ seen bool }

func (c *compactDecoder) frame(ev *SSEEvent, out []Event) ([]Event, bool, *Error) {
	var w wireResponse
	if err := json.Unmarshal(ev.Data, &w); err != nil {
		return out, false, &Error{Phase: Body, Class: StreamFailure, Decode: DecodeJSON, Dispatched: true,
			Err: fmt.Errorf("decode compaction: %w", err)}
	}
	if w.Error != nil && (w.Error.Code != "" || w.Error.Message != "") {
		return out, false, &Error{Phase: Body, Class: ResponsesFailed, Dispatched: true,
			Type: string(w.Error.Type), Code: string(w.Error.Code), Message: string(w.Error.Message)}
	}
	c.seen = true
	r := (&decoder{}).assemble(&w)
	r.Status = "completed"
	for i := range r.Output {
		it := r.Output[i]
		out = append(out, Event{Type: EventItemDone, ItemID: it.ID, OutputIndex: i, Item: &it})
	}
	return append(out, Event{Type: EventCompleted, Response: r}), true, nil
}

func (c *compactDecoder) end(out []Event) ([]Event, *Error) {
	return out, &Error{Phase: Body, Class: TerminalEOF, Dispatched: true, Message: "compaction body ended without its object"}
}
