package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/octet-agent/octet/host"
	"go.lsp.dev/protocol"
)

// maxCallArgs bounds the streamed arguments kept per call for progress
// titles ("Running bash: go test").
const maxCallArgs = 16 << 10

// progress reports one run as $/progress begin/report/end on a work-done
// token: the client's, or one the server created with
// window/workDoneProgress/create. A zero progress (no token) does nothing.
type progress struct {
	s     *Server
	token json.RawMessage

	mu     sync.Mutex
	last   string
	ended  bool
	endMsg string // set when ended
	// pending: window/workDoneProgress/create is in flight; reports only
	// update last, which begin then carries. created is closed when the
	// request has been settled either way.
	pending bool
	created chan struct{}
	names   map[string]string // callId → tool name
	args    map[string]*bytes.Buffer
	// awaiting holds the calls whose approval is being asked: their
	// tool_started (emitted before the approval, but pumped concurrently)
	// must not replace "Waiting for approval" with "Running …".
	awaiting map[string]bool
	// decided holds the calls whose approval was decided: a tool_started
	// the pump observes only afterwards must not report a denied call as
	// running (an approved one was reported by approvalDone already).
	decided map[string]bool
}

// startProgress picks the run's token and sends begin. A token the
// server must first create is asked for in the background and waited for
// at most createGrace: the run's events never wait for a client that does
// not answer (they would otherwise be held for the request timeout);
// begin, with the latest state, follows once the client has accepted the
// token, and neither end nor the prompt's answer waits for that.
func (s *Server) startProgress(r *runState, clientToken json.RawMessage) *progress {
	p := &progress{s: s, names: map[string]string{}, args: map[string]*bytes.Buffer{}, awaiting: map[string]bool{}, decided: map[string]bool{}}
	p.last = "Starting"
	// The run is already going: an approval asked while the token is
	// being created must find the progress to report to.
	r.progMu.Lock()
	r.prog = p
	r.progMu.Unlock()
	if len(clientToken) > 0 && string(clientToken) != "null" {
		p.mu.Lock()
		p.begin(clientToken)
		p.mu.Unlock()
		return p
	}
	s.mu.Lock()
	can := s.caps.workDoneProgress
	s.tokenSeq++
	tok := fmt.Sprintf("octet/run/%s/%d", r.id, s.tokenSeq)
	s.mu.Unlock()
	token, _ := json.Marshal(tok)
	if !can {
		// The contract gives every client progress, also one that
		// advertised nothing; without window.workDoneProgress the server
		// may not ask for a token, so it reports on its own (a client
		// ignores a token it does not know).
		p.mu.Lock()
		p.adopt(r, token)
		p.mu.Unlock()
		return p
	}
	p.pending = true
	p.created = make(chan struct{})
	go func() {
		defer close(p.created)
		_, err := s.call(s.ctx, s.opts.RequestTimeout, "window/workDoneProgress/create",
			&protocol.WorkDoneProgressCreateParams{Token: protocol.String(tok)})
		p.mu.Lock()
		defer p.mu.Unlock()
		p.pending = false
		if err != nil {
			s.log.Warn("client refused a progress token; continuing without $/progress", "run", r.id, "error", err)
			return
		}
		if !p.ended {
			p.adopt(r, token)
			return
		}
		// The run ended before the client accepted the token: close the
		// progress the client now expects at once.
		p.begin(token)
		p.send(&protocol.WorkDoneProgressEnd{Kind: "end", Message: &p.endMsg})
	}()
	// An editor answers at once: wait a little so begin precedes the
	// run's first event, but never hold the events longer than that.
	t := time.NewTimer(createGrace)
	defer t.Stop()
	select {
	case <-p.created:
	case <-t.C:
		s.log.Warn("client has not answered window/workDoneProgress/create; streaming without waiting", "run", r.id)
	}
	return p
}

// createGrace is how long a run's events wait for the client to accept
// the progress token before they stream anyway.
const createGrace = 250 * time.Millisecond

// adopt registers token as the run's (so window/workDoneProgress/cancel
// finds it) and sends begin. The caller holds p.mu and the run has not
// ended, so runPrompt's cleanup, which runs after end, removes it.
func (p *progress) adopt(r *runState, token json.RawMessage) {
	p.s.mu.Lock()
	r.token = tokenKey(token)
	p.s.byToken[r.token] = r
	p.s.mu.Unlock()
	p.begin(token)
}

// begin sends begin on token with the latest state. The caller holds p.mu.
func (p *progress) begin(token json.RawMessage) {
	p.token = token
	cancellable := true
	msg := p.last
	p.send(&protocol.WorkDoneProgressBegin{Kind: "begin", Title: "octet", Cancellable: &cancellable, Message: &msg})
}

// off reports whether the run has no progress (no token and none coming).
func (p *progress) off() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.token == nil && !p.pending
}

// send writes one $/progress notification.
func (p *progress) send(value any) {
	if p.token == nil {
		return
	}
	v, err := protocol.Marshal(value)
	if err != nil {
		p.s.log.Error("encoding progress", "error", err)
		return
	}
	b := make([]byte, 0, len(v)+len(p.token)+24)
	b = append(b, `{"token":`...)
	b = append(b, p.token...)
	b = append(b, `,"value":`...)
	b = append(b, v...)
	b = append(b, '}')
	p.s.notify("$/progress", json.RawMessage(b))
}

// report sends a report unless it repeats the previous message.
func (p *progress) report(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reportLocked(msg)
}

// reportLocked is report with p.mu held.
func (p *progress) reportLocked(msg string) {
	if p.ended || msg == "" || msg == p.last {
		return
	}
	p.last = msg
	if p.token == nil {
		return // none, or begin (carrying last) is still to come
	}
	p.send(&protocol.WorkDoneProgressReport{Kind: "report", Message: &msg})
}

// awaitApproval reports msg while callID's approval is asked; reports for
// that call's tool_started are held back until approvalDone.
func (p *progress) awaitApproval(callID, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.awaiting[callID] = true
	p.reportLocked(msg)
}

// approvalDone ends the wait for callID's approval and reports msg.
func (p *progress) approvalDone(callID, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.awaiting, callID)
	p.decided[callID] = true
	p.reportLocked(msg)
}

// end sends end exactly once. It never waits for the client: when the
// token the server asked for is still unanswered, the token's begin and end
// follow together if the client accepts it later (see startProgress).
func (p *progress) end(outcome string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	p.endMsg = outcomeMessage(outcome)
	if p.token == nil {
		return // no progress, the client never accepted the token, or it has not answered yet
	}
	p.send(&protocol.WorkDoneProgressEnd{Kind: "end", Message: &p.endMsg})
}

func outcomeMessage(outcome string) string {
	switch outcome {
	case "completed":
		return "Done"
	case "cancelled":
		return "Cancelled"
	case "max_turns":
		return "Stopped: turn limit reached"
	default:
		return "Failed"
	}
}

// deltaMessage is the report an output_delta makes.
func deltaMessage(ev wireEvent) string {
	channel := ev.Channel
	if channel == "" {
		var b struct {
			Channel string `json:"channel"`
		}
		_ = json.Unmarshal(ev.Body, &b)
		channel = b.Channel
	}
	if channel == "reasoning" {
		return "Thinking"
	}
	return "Writing"
}

// quiet reports whether observing ev (a delta) would send nothing: for a
// tool_call_delta always, for an output_delta when progress is off, has
// ended or already says what the delta would report.
func (p *progress) quiet(ev wireEvent) bool {
	if ev.Kind != "output_delta" {
		return ev.Kind == "tool_call_delta"
	}
	msg := deltaMessage(ev)
	p.mu.Lock()
	defer p.mu.Unlock()
	return (p.token == nil && !p.pending) || p.ended || msg == p.last
}

// observe turns an event into a human-level report.
func (p *progress) observe(ev wireEvent) {
	if p.off() {
		return
	}
	switch ev.Kind {
	case "run_started":
		p.report("Thinking")
	case "output_delta":
		p.report(deltaMessage(ev))
	case "tool_call_started":
		var b struct {
			CallID, Name string
		}
		if json.Unmarshal(ev.Body, &b) == nil {
			p.mu.Lock()
			p.names[b.CallID] = b.Name
			p.mu.Unlock()
		}
	case "tool_call_delta":
		var b struct {
			CallID, Delta string
		}
		if json.Unmarshal(ev.Body, &b) == nil {
			p.mu.Lock()
			buf := p.args[b.CallID]
			if buf == nil {
				buf = new(bytes.Buffer)
				p.args[b.CallID] = buf
			}
			if buf.Len()+len(b.Delta) <= maxCallArgs {
				buf.WriteString(b.Delta)
			}
			p.mu.Unlock()
		}
	case "tool_started":
		var b struct {
			CallID, Tool string
		}
		if json.Unmarshal(ev.Body, &b) == nil {
			// Checked and reported under one lock: an approval asked
			// in between must not be overwritten.
			p.mu.Lock()
			args := p.args[b.CallID]
			delete(p.args, b.CallID)
			if !p.awaiting[b.CallID] && !p.decided[b.CallID] {
				p.reportLocked(toolMessage(b.Tool, args))
			}
			p.mu.Unlock()
		}
	case "tool_finished":
		var b struct{ CallID string }
		_ = json.Unmarshal(ev.Body, &b)
		p.mu.Lock()
		delete(p.decided, b.CallID)
		p.reportLocked("Thinking")
		p.mu.Unlock()
	case "provider_retry":
		p.report(retryMessage(ev.Body))
	case "compaction_started":
		p.report("Compacting context")
	case "compaction_finished":
		p.report("Thinking")
	}
}

// toolMessage is "Running bash: go test" / "Running edit: main.go".
func toolMessage(tool string, args *bytes.Buffer) string {
	msg := "Running " + tool
	if args == nil {
		return msg
	}
	var a map[string]any
	if json.Unmarshal(args.Bytes(), &a) != nil {
		return msg
	}
	for _, k := range []string{"command", "path", "pattern"} {
		if v, ok := a[k].(string); ok && v != "" {
			line, _, _ := strings.Cut(v, "\n")
			return msg + ": " + host.Clip(line, 60)
		}
	}
	return msg
}

// retryMessage names the failure and the retry: "cannot connect to the
// provider: connection refused; retrying 3/12 in 5s", or "Waiting for
// network: …" (events without a cause read "Reconnecting 3/12 in 5s").
func retryMessage(body json.RawMessage) string {
	var b struct {
		Attempt     int    `json:"attempt"`
		MaxAttempts *int   `json:"maxAttempts"`
		DelayMs     int64  `json:"delayMs"`
		RetryKind   string `json:"retryKind"`
		Cause       string `json:"cause"`
	}
	if json.Unmarshal(body, &b) != nil {
		return "Reconnecting"
	}
	cause := host.Clip(strings.TrimSpace(b.Cause), maxCauseMessage)
	if b.RetryKind == "waiting_for_network" || b.MaxAttempts == nil {
		if cause == "" {
			return "Waiting for network"
		}
		return "Waiting for network: " + cause
	}
	retry := fmt.Sprintf("%d/%d in %s", b.Attempt, *b.MaxAttempts, humanDelay(time.Duration(b.DelayMs)*time.Millisecond))
	if cause == "" {
		return "Reconnecting " + retry
	}
	return cause + "; retrying " + retry
}

// maxCauseMessage bounds the cause in a progress message.
const maxCauseMessage = 120

func humanDelay(d time.Duration) string {
	switch {
	case d >= time.Second && d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	case d >= time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
}
