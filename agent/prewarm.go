package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// Prewarming (FeaturePrewarm, granted by both the model and the
// endpoint, on the Responses WebSocket). While the agent is idle — a
// session just opened or resumed in an editor — the host may ask it to
// warm the provider for the next run: the agent builds the request that
// run's first turn would send now, through the same request builder
// (buildRequest: the effective model and reasoning, the advertised async
// tool schemas, the instructions, the active branch, the output bound),
// and sends it with "generate": false. The server prepares the request's
// prefix and completes without output; the next run's first request,
// sent in full as every request is (octet never chains a
// previous_response_id), repeats that prefix. Codex sends the same kind
// of warm-up when a session starts.
//
// The warm-up is not a turn: it writes no entry, emits no event, and
// its output (none is expected) never enters the session. It is a
// provider request all the same, accounted as one: its dispatch is
// durable before it is sent, a usage record (operation "prewarm") is
// written only when the provider reports usage, a response without
// usage settles as no_usage, and a failure after dispatch is a durable
// usage-uncertainty marker — never invented usage. It is never retried,
// and its failure fails nothing: the next run sends its request as it
// would have. It is not sent under a hard cumulative ceiling (an
// uncertain warm-up would stop every later request there) or when the
// transport has fallen back to HTTP. A run started while a warm-up is in
// flight waits for it to settle (at most PrewarmTimeout) before it
// builds its first request.

// OperationPrewarm is the typed operation of a warm-up request.
const OperationPrewarm = "prewarm"

// PrewarmTimeout bounds one warm-up, opening and body together.
const PrewarmTimeout = 15 * time.Second

// WarmupSender is implemented by transports that can send a warm-up
// request now (provider.Request.Warmup): the Responses WebSocket, and a
// FallbackTransport until it has fallen back to HTTP.
type WarmupSender interface {
	SendsWarmups() bool
}

func sendsWarmups(tr provider.Transport) bool {
	ws, ok := tr.(WarmupSender)
	return ok && ws.SendsWarmups()
}

// prewarmGranted reports whether a warm-up of the next request of model
// may be sent: model and endpoint grant prewarm and the WebSocket, the
// transport sends warm-ups now, and no hard ceiling is set (a policy
// that does not say is taken to have one).
func (a *Agent) prewarmGranted(model provider.Model) bool {
	if cr, ok := a.retry.(CeilingReporter); !ok || cr.HardCeilings() {
		return false
	}
	return a.granted(model).Has(provider.FeaturePrewarm|provider.FeatureWebSocket) && sendsWarmups(a.cfg.Transport)
}

// Prewarm sends a warm-up of the next run's first request when the
// agent is idle and the route grants it, and returns whether it sent
// one (see StartPrewarm).
func (a *Agent) Prewarm(ctx context.Context) (bool, error) {
	done := a.StartPrewarm(ctx)
	if done == nil {
		return false, nil
	}
	err := <-done
	if errors.Is(err, errNothingToWarm) {
		return false, nil
	}
	return true, err
}

// errNothingToWarm: the next request does not fit the context window
// (the next run compacts first), so there is nothing to warm.
var errNothingToWarm = errors.New("nothing to warm")

// StartPrewarm claims the warm-up when the agent is idle and the route
// grants it, and sends it on a goroutine; the channel it returns gets
// the warm-up's error (nil when it completed) once it has settled, and
// is then closed. It returns nil, starting nothing, while a run or
// another warm-up is active or when nothing grants a warm-up. A run
// started after StartPrewarm returned waits for the warm-up to settle.
// The error is for the log: nothing else depends on it. ctx (and
// PrewarmTimeout) bound the warm-up; a warm-up cancelled after it was
// sent leaves its usage uncertain, as any such request does.
func (a *Agent) StartPrewarm(ctx context.Context) <-chan error {
	sel := a.selection()
	if !a.prewarmGranted(sel.model) {
		return nil
	}
	a.mu.Lock()
	if a.active != nil || a.warming != nil {
		a.mu.Unlock()
		return nil
	}
	warming := make(chan struct{})
	a.warming = warming
	a.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		err := a.prewarm(ctx, sel)
		a.mu.Lock()
		a.warming = nil
		a.encoded.drop() // a run waiting for the warm-up has built nothing yet
		a.mu.Unlock()
		close(warming)
		done <- err
		close(done)
	}()
	return done
}

// prewarm builds the next run's first request with sel, sends it as a
// warm-up and settles it.
func (a *Agent) prewarm(ctx context.Context, sel selection) error {
	ctx, cancel := context.WithTimeout(ctx, PrewarmTimeout)
	defer cancel()
	r := newRun(a, ctx, PromptOptions{})
	defer r.cancel()
	r.pin = sel
	req, v, est := r.buildRequest()
	if r.checkContext(v) != nil || clampOutput(req, sel.model, est) != nil {
		return errNothingToWarm // the next run fails, or compacts first: nothing to warm
	}
	req.Warmup = true
	ar := &attemptResult{op: OperationPrewarm, estimate: est}
	err := r.attempt(req, ar)
	if err := r.settleWarmup(ar, err); err != nil {
		return fmt.Errorf("prewarm: %w", err)
	}
	return nil
}

// settleWarmup makes a warm-up's outcome durable: its reported usage (a
// response without usage settles as no_usage), or for a failure after
// dispatch a usage-uncertainty marker. It returns the failure.
func (r *Run) settleWarmup(ar *attemptResult, err error) error {
	if ar.logErr != nil {
		return ar.logErr // recording the dispatch failed: nothing was sent
	}
	if err == nil {
		var recs []session.Record
		if ar.resp.Usage != nil {
			rec, _, _ := r.usageRecord(OperationPrewarm, r.pin.model.Name, ar)
			recs = append(recs, rec)
		}
		recs = append(recs, r.settlement(settledOutcome(ar.resp.Usage))...)
		if aerr := r.a.sess.Append(recs...); aerr != nil {
			return fmt.Errorf("%w warm-up usage: %w", errPersist, aerr)
		}
		r.settled()
		return nil
	}
	if !dispatched(err) {
		return r.settleFailed(err)
	}
	u := session.UsageUncertain{RunID: r.id, Operation: OperationPrewarm, Reason: failureReason(err), Dispatched: true}
	if aerr := r.a.sess.Append(append([]session.Record{session.UncertainRecord(u)}, r.settlement(session.SettledUncertain)...)...); aerr != nil {
		return errors.Join(err, fmt.Errorf("%w usage uncertainty: %w", errPersist, aerr))
	}
	r.settled()
	return err
}

// awaitWarmup waits until a warm-up in flight has settled, or the run
// is cancelled.
func (r *Run) awaitWarmup() {
	r.a.mu.Lock()
	w := r.a.warming
	r.a.mu.Unlock()
	if w == nil {
		return
	}
	select {
	case <-w:
	case <-r.ctx.Done():
	}
}
