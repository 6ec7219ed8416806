package agent

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/octet-agent/octet/provider"
)

// The per-logical-turn replacement envelope of the qualified Codex route.
// Stream-only failures permit 12 attempts, admission-only 30, mixed at
// most 36.
const (
	// MaxStreamReplacements bounds replacements after stream failures.
	MaxStreamReplacements = 11
	// MaxAdmissionReplacements bounds replacements after opening and
	// admission failures.
	MaxAdmissionReplacements = 29
	// MaxTotalReplacements bounds both allowances together.
	MaxTotalReplacements = 35
	// WebSocketRetryBudget is how many WebSocket replacements are tried
	// before the route falls back to HTTP, as Codex does.
	WebSocketRetryBudget = 5
)

// Backoff shapes. Inference retries follow Codex (200 ms doubling, ±10 %
// jitter), bounded; network waiting starts near 5 s, doubles with
// run-specific jitter and is capped at 60 s.
const (
	inferenceBackoffInitial = 200 * time.Millisecond
	inferenceBackoffCap     = 15 * time.Second
	networkWaitInitial      = 5 * time.Second
	networkWaitCap          = 60 * time.Second
)

// RecoveryConfig configures a [CodexRecovery].
type RecoveryConfig struct {
	// Profile is the host-selected runtime profile (configuration).
	Profile RuntimeProfile
	// Wire is the route's wire format (configuration); only
	// provider.WireResponses can be qualified, and empty fails closed.
	Wire provider.WireAPI
	// Model is the model of the first request; [CodexRecovery.Prepared]
	// follows model changes.
	Model provider.Model
	// Endpoint is the transport's endpoint features (the host-configured
	// route side of qualification).
	Endpoint provider.ResponsesFeatures
	// WebSocket is true when requests start on the Responses WebSocket.
	WebSocket bool
	// Budget holds the hard ceilings and the price table; nil means no
	// ceilings and no prices.
	Budget *Budget
	// MaxNetworkWait bounds the elapsed time of one outage; zero means
	// unbounded (cancellation still wins at once).
	MaxNetworkWait time.Duration
	// MaxRetryWait bounds all the time one logical turn spends on
	// replacements, from its first failure (the failed attempts, outage
	// waiting and backoff alike); zero means only the attempt budgets
	// bound it. A replacement whose delay would end past the bound is not
	// made: the turn fails at once with *RetryWaitLimit.
	MaxRetryWait time.Duration
	// InitialBackoff is the first inference backoff (zero: 200 ms, as
	// Codex); it doubles per replacement up to the cap. Tests on real
	// sockets shorten it; Retry-After and hints still apply in full.
	InitialBackoff time.Duration
	// Seed makes the jitter run-specific; zero picks a random seed.
	Seed uint64
	// Now is the clock; nil means time.Now (virtual under testing/synctest).
	Now func() time.Time
}

// CodexRecovery is the recovery policy of the qualified Codex route. It
// implements [RetryPolicy]: the loop asks it about every failed unfinished
// provider request of a run and does the mechanics it decides. Budgets are
// per logical turn and reset only by [CodexRecovery.TurnCompleted]; they
// survive re-preparation, WebSocket→HTTP fallback and network waiting.
// Unqualified routes never replay a body.
//
// A CodexRecovery serves one agent, one run at a time (Config.Retry);
// every run starts a fresh logical turn ([CodexRecovery.RunStarted]). A
// refusal resets nothing: the budgets and the outage are shared by the
// main request and its auxiliary (compaction) requests until a completed
// main response. Its methods are safe to call from
// several goroutines (an embedder may call SetMaxNetworkWait at any time).
type CodexRecovery struct {
	mu        sync.Mutex
	cfg       RecoveryConfig // as given, for CloneRetry
	profile   RuntimeProfile
	wire      provider.WireAPI
	endpoint  provider.ResponsesFeatures
	webSocket bool // the configured transport is the WebSocket
	route     Route
	qualErr   error
	budget    *Budget
	maxWait   time.Duration
	maxRetry  time.Duration // bound on one turn's retrying (0: none)
	backoff0  time.Duration // first inference backoff
	seed      uint64        // the configured (or random) seed; runs mix in their id
	rng       *rand.Rand
	now       func() time.Time

	stream    int  // stream replacements spent this logical turn
	admission int  // opening/admission replacements spent this logical turn
	wsFails   int  // WebSocket failures this logical turn
	onWS      bool // the current request goes over the WebSocket
	fellBack  bool // the run fell back to HTTP; it stays there

	waits       int // network waits in the current outage
	inOutage    bool
	outageStart time.Time
	retryStart  time.Time // the turn's first replaced failure (zero: none yet)
}

var (
	_ RetryPolicy = (*CodexRecovery)(nil)
	_ RunStarter  = (*CodexRecovery)(nil)
)

// NewCodexRecovery returns the policy for one run.
func NewCodexRecovery(cfg RecoveryConfig) *CodexRecovery {
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	p := &CodexRecovery{
		cfg:       cfg,
		profile:   cfg.Profile,
		wire:      cfg.Wire,
		endpoint:  cfg.Endpoint,
		webSocket: cfg.WebSocket,
		budget:    cfg.Budget,
		maxWait:   max(cfg.MaxNetworkWait, 0),
		maxRetry:  max(cfg.MaxRetryWait, 0),
		backoff0:  cmp.Or(max(cfg.InitialBackoff, 0), inferenceBackoffInitial),
		seed:      seed,
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		now:       now,
	}
	// Until the loop reports a prepared request, the route is the host's
	// configuration with an empty request.
	p.setRoute(RouteFor(cfg.Profile, cfg.Wire, cfg.Model, cfg.Endpoint, cfg.WebSocket, &provider.Request{}))
	return p
}

// SetRoute records the route of the request the loop just prepared; the
// policy re-qualifies it (the input changes between turns) and keeps its
// budgets. After a fallback to HTTP the policy stays on HTTP for the run
// whatever the route says.
func (p *CodexRecovery) SetRoute(r Route) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setRoute(r)
}

func (p *CodexRecovery) setRoute(r Route) {
	p.route = r
	p.qualErr = r.Qualify()
	p.onWS = r.WebSocket && !p.fellBack
}

// Prepared re-qualifies the route for the request the loop just prepared
// (model and input change between attempts) and keeps the budgets.
func (p *CodexRecovery) Prepared(model provider.Model, req *provider.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setRoute(RouteFor(p.profile, p.wire, model, p.endpoint, p.webSocket, req))
}

// SetMaxNetworkWait bounds the elapsed time of one outage for embedding
// hosts; zero removes the bound. It does not extend any other deadline.
func (p *CodexRecovery) SetMaxNetworkWait(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.maxWait = max(d, 0)
}

// SetMaxRetryWait bounds all the time one logical turn spends retrying;
// zero removes the bound.
func (p *CodexRecovery) SetMaxRetryWait(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.maxRetry = max(d, 0)
}

// OutageDeadline reports the instant the current outage stops being
// waited out, when an outage is in progress and bounded. The loop bounds
// the opening (credential lookup, connect, headers) of the next attempt by
// it, never a healthy response body.
func (p *CodexRecovery) OutageDeadline() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inOutage || p.maxWait == 0 {
		return time.Time{}, false
	}
	return p.outageStart.Add(p.maxWait), true
}

// Spent reports the stream and admission replacements spent in the current
// logical turn.
func (p *CodexRecovery) Spent() (stream, admission int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stream, p.admission
}

// RunStarted starts a new logical turn for a new run of the agent: a run
// that ended without a completed response (refused, cancelled, or refused
// before sending) must not hand its spent budgets or its outage deadline
// to the next prompt. It also reseeds the jitter from
// the run id, so concurrent agents' runs do not wait in lockstep.
func (p *CodexRecovery) RunStarted(runID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetTurn()
	h := fnv.New64a()
	_, _ = h.Write([]byte(runID))
	s := p.seed ^ h.Sum64()
	p.rng = rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// TurnCompleted resets the per-turn budgets after a completed assistant
// response. It is the only reset: fallback, re-preparation and network
// waiting never reset them.
func (p *CodexRecovery) TurnCompleted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetTurn()
}

func (p *CodexRecovery) resetTurn() {
	p.stream, p.admission, p.wsFails = 0, 0, 0
	p.retryStart = time.Time{}
	p.endOutage()
}

func (p *CodexRecovery) endOutage() {
	p.inOutage, p.waits, p.outageStart = false, 0, time.Time{}
}

// Decide classifies one failure of an unfinished provider request and
// decides whether the loop replaces it, after which delay, and whether the
// failed attempt's usage is unknown (the loop persists that before any
// replacement, and also when the run ends here).
func (p *CodexRecovery) Decide(f Failure) RetryDecision {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := classify(f)
	d := RetryDecision{UsageUnknown: c.usageUnknown, Reason: c.reason}
	now := p.now()
	if f.Dispatched && !c.cut && c.class != classNetworkWait && c.class != classCanceled {
		// The request left the host: whatever the outage was, it is over,
		// and its deadline no longer applies to this failure.
		p.endOutage()
	}
	switch {
	case c.class == classCanceled:
		d.Err = f.Err
	case c.class == classPermanent:
		d.Err = &PermanentError{Code: c.code, Message: c.message, Operation: f.Operation, Err: f.Err}
	case p.qualErr != nil:
		d.Err = fmt.Errorf("%w; no replay: %w", p.qualErr, f.Err)
	case p.outageExpired(now):
		d.Err = p.waitLimit(now, c.usageUnknown, f.Err)
	case c.usageUnknown && p.budget.Active():
		d.Err = &CeilingError{Uncertain: true, Err: f.Err}
	case c.class == classNetworkWait:
		p.decideWait(&d, c, now)
	case c.class == classStream, c.class == classAdmission, c.class == classFallback:
		p.decideReplace(&d, c, f.Err)
	default:
		d.Err = f.Err
	}
	if d.Retry {
		p.boundRetry(&d, now, c.usageUnknown, f.Err)
	}
	// A refusal resets nothing: a main refusal ends the run (the next run
	// starts a fresh turn, RunStarted), and an auxiliary one must not hand
	// the main request a fresh envelope or a fresh outage.
	return d
}

// boundRetry applies MaxRetryWait to a replacement the policy decided:
// it says when the turn gives up (RetryDecision.GiveUpIn, also the
// outage bound's), and refuses a replacement whose delay ends past it.
func (p *CodexRecovery) boundRetry(d *RetryDecision, now time.Time, unknown bool, err error) {
	left, bounded := time.Duration(0), false
	if d.Kind == RetryWaitingForNetwork && p.maxWait > 0 {
		left, bounded = p.outageStart.Add(p.maxWait).Sub(now), true
	}
	if p.maxRetry > 0 {
		if p.retryStart.IsZero() {
			p.retryStart = now
		}
		r := p.retryStart.Add(p.maxRetry).Sub(now)
		if r <= 0 || d.Delay > r {
			*d = RetryDecision{UsageUnknown: d.UsageUnknown, Reason: d.Reason,
				Err: &RetryWaitLimit{Elapsed: now.Sub(p.retryStart), Limit: p.maxRetry, Delay: d.Delay, UsageUnknown: unknown, Err: err}}
			return
		}
		if !bounded || r < left {
			left, bounded = r, true
		}
	}
	if bounded {
		d.GiveUpIn = &left
	}
}

// outageExpired reports whether a bounded outage ran past its deadline.
func (p *CodexRecovery) outageExpired(now time.Time) bool {
	return p.inOutage && p.maxWait > 0 && !now.Before(p.outageStart.Add(p.maxWait))
}

func (p *CodexRecovery) waitLimit(now time.Time, unknown bool, err error) error {
	e := &NetworkWaitLimit{Elapsed: now.Sub(p.outageStart), Limit: p.maxWait, UsageUnknown: unknown, Err: err}
	p.endOutage()
	return e
}

// decideWait handles a positively pre-send outage: unbounded count,
// elapsed time bounded by MaxNetworkWait, no inference budget spent.
func (p *CodexRecovery) decideWait(d *RetryDecision, c classified, now time.Time) {
	if !p.inOutage {
		p.inOutage, p.outageStart, p.waits = true, now, 0
	}
	p.waits++
	delay := p.networkBackoff(p.waits)
	if c.hasRetryAfter {
		delay = max(delay, c.retryAfter)
	}
	d.Kind, d.Attempt, d.MaxAttempts = RetryWaitingForNetwork, p.waits, nil
	if p.maxWait > 0 {
		// A backoff that outlives the outage allowance waits until the
		// actual deadline (never expiring early); the attempt made there
		// is the last one of the outage.
		delay = min(delay, p.outageStart.Add(p.maxWait).Sub(now))
	}
	d.Retry, d.Delay = true, delay
}

// decideReplace spends one replacement of the failure's class, if any is
// left, and computes the delay.
func (p *CodexRecovery) decideReplace(d *RetryDecision, c classified, err error) {
	used, limit, budget := &p.admission, MaxAdmissionReplacements, "admission"
	if c.class == classStream {
		used, limit, budget = &p.stream, MaxStreamReplacements, "stream"
	}
	total := p.stream + p.admission
	if c.class == classFallback && !p.onWS {
		d.Err = err // HTTP cannot fall back further
		return
	}
	if *used >= limit || total >= MaxTotalReplacements {
		if total >= MaxTotalReplacements {
			budget = "total"
		}
		d.Err = &ExhaustedError{Budget: budget, Attempts: total + 1, Err: err}
		return
	}
	*used++
	total++
	maxAttempts := total + min(limit-*used, MaxTotalReplacements-total)
	d.Retry, d.Kind, d.Attempt, d.MaxAttempts = true, RetryInterruptedInference, total, &maxAttempts
	d.Delay = p.inferenceBackoff(*used)
	if c.class == classFallback {
		d.Delay = 0
	}
	d.Delay = max(d.Delay, c.hint)
	if c.hasRetryAfter {
		d.Delay = max(d.Delay, c.retryAfter) // never shortened
	}
	if p.onWS {
		p.wsFails++
		if c.class == classFallback || p.wsFails > WebSocketRetryBudget {
			d.FallbackHTTP, p.onWS, p.fellBack = true, false, true
		}
	}
}

// inferenceBackoff is Codex's 200 ms·2^(n-1) with ±10 % jitter, capped.
func (p *CodexRecovery) inferenceBackoff(n int) time.Duration {
	return p.jitter(expBackoff(p.backoff0, n, inferenceBackoffCap), inferenceBackoffCap)
}

// networkBackoff starts near 5 s and doubles with jitter, capped at 60 s.
func (p *CodexRecovery) networkBackoff(n int) time.Duration {
	return p.jitter(expBackoff(networkWaitInitial, n, networkWaitCap), networkWaitCap)
}

func expBackoff(initial time.Duration, n int, limit time.Duration) time.Duration {
	d := initial
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// jitter scales d by a run-specific factor in [0.9, 1.1], keeping it ≤ limit.
func (p *CodexRecovery) jitter(d, limit time.Duration) time.Duration {
	f := 0.9 + 0.2*p.rng.Float64()
	return min(time.Duration(float64(d)*f), limit)
}

// PermanentError is a failure carrying an explicit permanent provider code
// (policy, auth, quota, context length, overload denials,
// misalignment_policy_violation, …). It outranks any retry- or
// context-sounding message: exactly one request is made.
type PermanentError struct {
	// Code is the provider's permanent code.
	Code string
	// Message is the provider's message.
	Message string
	// Operation is the auxiliary operation, or "" for the main request.
	Operation string
	// Err is the underlying provider failure.
	Err error
}

func (e *PermanentError) Error() string {
	return fmt.Sprintf("provider refused the request with permanent code %s: %s", e.Code, e.Message)
}

// Unwrap returns the provider failure.
func (e *PermanentError) Unwrap() error { return e.Err }

// ExhaustedError ends a logical turn whose replacement budget ran out.
type ExhaustedError struct {
	// Budget is "stream", "admission" or "total".
	Budget string
	// Attempts is how many requests the turn made.
	Attempts int
	// Err is the last provider failure.
	Err error
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("provider recovery exhausted its %s budget after %d attempts: %v", e.Budget, e.Attempts, e.Err)
}

// Unwrap returns the last provider failure.
func (e *ExhaustedError) Unwrap() error { return e.Err }

// NetworkWaitLimit ends a run whose outage outlived the host's
// SetMaxNetworkWait bound. UsageUnknown is true when the deadline cut an
// opening that may already have been dispatched; the loop persists that
// uncertainty before returning the error.
type NetworkWaitLimit struct {
	// Elapsed is how long the outage was waited out.
	Elapsed time.Duration
	// Limit is the configured bound.
	Limit time.Duration
	// UsageUnknown is true when an attempt may have been accepted.
	UsageUnknown bool
	// Err is the last failure.
	Err error
}

func (e *NetworkWaitLimit) Error() string {
	return fmt.Sprintf("network still unavailable after %s (limit %s): %v", e.Elapsed, e.Limit, e.Err)
}

// Unwrap returns the last failure.
func (e *NetworkWaitLimit) Unwrap() error { return e.Err }

// RetryWaitLimit ends a turn whose retrying would outlast MaxRetryWait
// (max_retry_wait_secs): the next replacement's delay (a backoff, or the
// provider's Retry-After, which is never shortened) ends past the bound.
type RetryWaitLimit struct {
	// Elapsed is how long the turn has retried; Limit the bound.
	Elapsed, Limit time.Duration
	// Delay is the wait the next replacement needed.
	Delay time.Duration
	// UsageUnknown is true when the last attempt may have been accepted.
	UsageUnknown bool
	// Err is the last failure.
	Err error
}

func (e *RetryWaitLimit) Error() string {
	return fmt.Sprintf("gave up retrying after %s: the next attempt would wait %s, past the %s bound (max_retry_wait_secs): %v",
		e.Elapsed.Round(time.Millisecond), e.Delay.Round(time.Millisecond), e.Limit, e.Err)
}

// Unwrap returns the last failure.
func (e *RetryWaitLimit) Unwrap() error { return e.Err }

// IsRecoveryTerminal reports whether err is one of the policy's own
// terminal errors (permanent code, exhaustion, outage or retry limit,
// ceiling).
func IsRecoveryTerminal(err error) bool {
	var (
		pe *PermanentError
		ee *ExhaustedError
		nw *NetworkWaitLimit
		rw *RetryWaitLimit
		ce *CeilingError
	)
	return errors.As(err, &pe) || errors.As(err, &ee) || errors.As(err, &nw) || errors.As(err, &rw) || errors.As(err, &ce)
}
