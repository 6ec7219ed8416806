package provider

import "net/http"

// codec is one wire format over HTTP server-sent events: what the
// shared HTTP transport ([HTTP]) needs to know to send a request and read
// its stream. Everything else (connecting, dispatch detection, timeouts,
// bounds, status errors, credentials) is the transport's, the same for
// every route.
type codec interface {
	// path is appended to the base URL ("/responses").
	path() string
	// encode returns the request body.
	encode(req *Request) ([]byte, error)
	// header adds the route's own headers (a version header, say);
	// configured headers are added after it and may replace them.
	header(h http.Header)
	// keyHeader is where the route sends its key by default.
	keyHeader() string
	// newDecoder returns the decoder of one response stream.
	newDecoder() frameDecoder
}

// frameDecoder turns one response's SSE events into [Event]s. A returned
// *Error is terminal (phase Body, dispatched; the transport fills in the
// request facts).
type frameDecoder interface {
	// frame decodes one dispatched SSE event, appending what it reports
	// to out; final is true when the terminal event is among them.
	frame(ev *SSEEvent, out []Event) (_ []Event, final bool, _ *Error)
	// end is called at a clean end of the body. A format whose stream
	// may end without a terminal frame returns the terminal events;
	// otherwise it returns the error (TerminalEOF).
	end(out []Event) ([]Event, *Error)
}

// responsesCodec is the OpenAI Responses API over HTTP.
type responsesCodec struct{}

func (responsesCodec) path() string                        { return "/responses" }
func (responsesCodec) encode(req *Request) ([]byte, error) { return req.EncodeHTTP() }
func (responsesCodec) header(http.Header)                  {}
func (responsesCodec) keyHeader() string                   { return KeyAuthorization }
func (responsesCodec) newDecoder() frameDecoder            { return &decoder{} }

// frame decodes one Responses event. "[DONE]" (which the Responses API
// never sends, but Chat Completions servers do) before response.completed
// is a terminal EOF.
func (d *decoder) frame(ev *SSEEvent, out []Event) ([]Event, bool, *Error) {
	if len(ev.Data) == 6 && string(ev.Data) == "[DONE]" {
		return out, false, &Error{Phase: Body, Class: TerminalEOF, Dispatched: true, Message: "[DONE] before response.completed"}
	}
	e, st, err := d.decode(ev.Data)
	if err != nil {
		return out, false, err
	}
	if st.emit {
		out = append(out, e)
	}
	return out, st.final, nil
}

// end reports a Responses stream that ended before response.completed.
func (d *decoder) end(out []Event) ([]Event, *Error) {
	return out, &Error{Phase: Body, Class: TerminalEOF, Dispatched: true, Message: "stream ended without response.completed"}
}

func codecFor(w WireAPI) codec {
	switch w {
	case WireChat:
		return chatCodec{}
	case WireAnthropic:
		return anthropicCodec{}
	}
	return responsesCodec{}
}
