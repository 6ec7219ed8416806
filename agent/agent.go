package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Defaults and hard bounds of the loop.
const (
	// DefaultMaxToolCallsPerTurn is the per-response call limit; calls
	// beyond it are paired with errors and never executed.
	DefaultMaxToolCallsPerTurn = 32
	// DefaultMaxTurns bounds the provider turns of one run when
	// Config.MaxTurns is zero.
	DefaultMaxTurns = 100
	// DefaultOutputReserve is the fixed output reserve kept free of input
	// before every provider turn (16K tokens).
	DefaultOutputReserve = 16 * 1024
	// MaxParallelWave is the largest number of calls that may overlap.
	MaxParallelWave = 4
	// eventBuffer is the capacity of a run's event channel.
	eventBuffer = 256
)

// Errors callers branch on.
var (
	// ErrBusy is returned by Prompt while another run is active.
	ErrBusy = errors.New("agent: a run is already active")
	// ErrRunEnded is returned by a control submitted after the run closed.
	ErrRunEnded = errors.New("agent: run ended")
	// ErrEmptyInput is returned for an empty prompt or control text.
	ErrEmptyInput = errors.New("agent: empty input")
)

// Outcome is how a run ended, as recorded in its checkpoint.
type Outcome string

// Run outcomes (the protocol's run_finished.outcome values).
const (
	OutcomeCompleted Outcome = session.OutcomeCompleted
	OutcomeCancelled Outcome = session.OutcomeCancelled
	OutcomeFailed    Outcome = session.OutcomeFailed
	OutcomeMaxTurns  Outcome = session.OutcomeMaxTurns
)

// Config wires an Agent. Session, Transport, Model.Name, Host and Broker are
// required; everything else has a default.
type Config struct {
	// Session is the mutable session the agent owns. The agent appends to
	// it but does not close it.
	Session *session.Session
	// Transport opens provider streams (main requests and compaction).
	Transport provider.Transport
	// Model is the initial model; SetModel changes it between turns.
	Model provider.Model
	// Host is the tool catalog; its tools are advertised and executed.
	Host *tools.Host
	// Broker admits every call before any hook or tool sees it.
	Broker *tools.Broker
	// Instructions is the system prompt.
	Instructions string
	// Reasoning is the initial reasoning selection (nil: provider default).
	Reasoning *provider.Reasoning
	// MaxTurns bounds the provider turns of one run (0: DefaultMaxTurns).
	MaxTurns int
	// MaxToolCallsPerTurn bounds executed calls per response (0: 32; larger
	// values are clamped to 32).
	MaxToolCallsPerTurn int
	// OutputReserve is the output space kept free before every turn
	// (0: 16K). A larger explicit reasoning floor goes here.
	OutputReserve int
	// Retry decides whether a failed provider attempt is replaced
	// (nil: never; the turn fails cleanly).
	Retry RetryPolicy
	// Completion, when set, is the terminal gate asked before the run
	// ends naturally (see [CompletionPolicy]); a child inherits it.
	Completion *CompletionPolicy
	// RetryHook, when set, is told of every replacement Retry decided and
	// may stop it or add bounded host delay (see [RetryHook]); a child
	// inherits it.
	RetryHook RetryHook
	// RetryHookTimeout is RetryHook's advisory timeout (0:
	// DefaultRetryHookTimeout).
	RetryHookTimeout time.Duration
	// Telemetry, when set, observes coarse boundaries (no payloads).
	Telemetry Observer
	// Logger receives diagnostics (nil: discarded).
	Logger *slog.Logger
	// Principal names who runs act for (e.g. the session id); it goes into
	// every effect intent.
	Principal string
	// RunEnd, when set, is called once at the end of every run before its
	// checkpoint; see [RunEndHook].
	RunEnd RunEndHook
	// Ledger, when set, is the shared cost ledger the hard cost ceiling
	// counts instead of the session alone: the delegation manager sets it
	// on a root agent (a child inherits it) so that the root's and its
	// live children's settled usage count together, per response, toward
	// the root's session cost ceiling. ok false (no ledger yet) counts
	// the session alone. The token ceiling always counts the agent's own
	// session only. See [LedgerTotals].
	Ledger func() (totals session.Totals, ok bool)
	// Environment, when set, returns the environment context the model
	// is given as user-role input (the host's facts: workspace, OS,
	// shell, date, the effect policy the broker applies now, which it is
	// passed), or "" for none. Before each prompt the agent compares it
	// with the last one the model can see on the active branch and
	// appends it as a context entry when it differs: sent at a session's
	// start, again only when something in it changed (or a compaction
	// dropped it). It must not block for long; a child inherits it.
	Environment func(policy tools.Policy) string
	// Offer, when set, reports whether the model m is offered the tool
	// named name (a tool some models are not trained on); a tool it
	// refuses is neither advertised nor executed for that model (a call
	// of it is an unknown tool). Nil offers every tool of Host.
	Offer func(m provider.Model, name string) bool
	// Images, when set, keeps the images of prompts and tool results
	// (view_image); nil: prompts with images are refused and a result's
	// images are dropped with a note.
	Images ImageStore
	// Intents, when set, keeps the changes edit and write are about to
	// make, before they make them (the change store): a crash before such
	// a call's result is durable leaves them there, and crash recovery
	// records them with the call's indeterminate result, so a rewind can
	// take them back.
	Intents changes.IntentLog
}

// PromptOptions modify one run.
type PromptOptions struct {
	// WithoutTools starts the run with the sticky tool-free policy: no tool
	// schemas and tool_choice none on every request.
	WithoutTools bool
	// Images are images the prompt carries after its text (each a type
	// internal/images accepts); they are kept in Config.Images before the
	// prompt is durable. The caller checks the model takes image input.
	Images []provider.Image
	// Deliver, when set, is offered each event on the run's owner
	// goroutine, while the run is live, before it would be queued on
	// [Run.Events]: it returns true when it has taken the event (it will
	// then not be on Events) and false to have it queued as usual. It
	// lets a consumer take events without a goroutine handoff. It must
	// return promptly and never wait for anything the run does; it must
	// take an event only after it has consumed every event before it
	// (Seq one more than the last it consumed, from either path), so a
	// consumer sees the one ordered stream. A cancelled run, and every
	// event after one was queued while the consumer is behind, skips it
	// or is refused by it, so the delivery contract is unchanged.
	Deliver func(Event) bool
}

// RunUsage is the known usage of one run, its delegated children's
// mirrored usage included.
type RunUsage struct {
	// Requests counts the run's own provider responses with known usage.
	Requests int
	// Token sums of those responses.
	Input, CachedInput, Output, Reasoning int64
	// CostPicodollars is the known cost (0 when the model has no prices).
	CostPicodollars int64
	// Complete is false when any attempt of the run (or earlier in the
	// session) has unknown usage: the sums are then a known subtotal.
	Complete bool
}

// RunResult is how a run ended.
type RunResult struct {
	// RunID identifies the run.
	RunID string
	// Outcome is completed, cancelled, failed or max_turns.
	Outcome Outcome
	// Usage is the run's known usage.
	Usage RunUsage
	// Err explains a failed run (nil otherwise).
	Err error
}

// Agent drives runs on one session. At most one run is active at a time.
type Agent struct {
	cfg   Config
	sess  *session.Session
	log   *slog.Logger
	retry RetryPolicy
	obs   Observer
	// instructions overrides cfg.Instructions once SetInstructions is
	// called; it is read once per request preparation.
	instructions atomic.Pointer[string]

	mu        sync.Mutex
	model     provider.Model
	reasoning *provider.Reasoning
	active    *Run
	calib     calibration
	// unwritten holds the end of the last run (its delegated usage and
	// checkpoint) when it could not be written; the next run writes it
	// first (see Prompt).
	unwritten []session.Record

	// encoded keeps the encoded provider items of committed entries.
	encoded itemCache
}

// New returns an Agent for cfg.Session. Before returning it resolves crash
// leftovers on the active branch: every function call without a result is
// either replayed (its tool is ReplaySafe and the exact classification is
// Pure or WorkspaceRead, and the broker admits it) or paired with a durable
// "indeterminate" error and never executed. See docs/design/agent.md.
func New(cfg Config) (*Agent, error) {
	if cfg.Session == nil || cfg.Transport == nil || cfg.Host == nil || cfg.Broker == nil {
		return nil, errors.New("agent: Session, Transport, Host and Broker are required")
	}
	if cfg.Model.Name == "" {
		return nil, errors.New("agent: Model.Name is required")
	}
	if cfg.MaxTurns <= 0 {
		cfg.MaxTurns = DefaultMaxTurns
	}
	if cfg.MaxToolCallsPerTurn <= 0 || cfg.MaxToolCallsPerTurn > DefaultMaxToolCallsPerTurn {
		cfg.MaxToolCallsPerTurn = DefaultMaxToolCallsPerTurn
	}
	if cfg.OutputReserve <= 0 {
		cfg.OutputReserve = DefaultOutputReserve
	}
	a := &Agent{cfg: cfg, sess: cfg.Session, log: cfg.Logger, retry: cfg.Retry, obs: cfg.Telemetry, model: cfg.Model}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.retry == nil {
		a.retry = NoRetry{}
	}
	if a.obs == nil {
		a.obs = nopObserver{}
	} else {
		a.obs = safeObserver{o: a.obs, log: a.log}
	}
	if cfg.Reasoning != nil {
		r := *cfg.Reasoning
		a.reasoning = &r
	}
	if err := a.resolveLeftovers(context.Background()); err != nil {
		return nil, fmt.Errorf("agent: resolve unresolved calls: %w", err)
	}
	return a, nil
}

// Broker returns the effect broker the agent admits calls through (for
// its session's policy: Broker.SetPolicy).
func (a *Agent) Broker() *tools.Broker { return a.cfg.Broker }

// Model returns the current model.
func (a *Agent) Model() provider.Model {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.model
}

// Reasoning returns the selected reasoning effort ("" for the provider's
// default).
func (a *Agent) Reasoning() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reasoning == nil {
		return ""
	}
	return a.reasoning.Effort
}

// Active returns the active run, or nil.
func (a *Agent) Active() *Run {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.active
}

// Prompt appends text as a user entry and starts a run that drives the
// model until it answers without tool calls (and no follow-up is queued),
// the turn limit, a failure or cancellation. ctx cancellation and
// Run.Cancel both abort the run. It returns ErrBusy while another run is
// active. The user entry is durable when Prompt returns without error.
// Before it, calls on the active branch without a result are resolved as
// New does (replayed or paired with an indeterminate error).
func (a *Agent) Prompt(ctx context.Context, text string, opts PromptOptions) (*Run, error) {
	if text == "" {
		return nil, ErrEmptyInput
	}
	a.mu.Lock()
	if a.active != nil {
		a.mu.Unlock()
		return nil, ErrBusy
	}
	r := newRun(a, ctx, opts)
	a.active = r
	a.mu.Unlock()
	if err := a.writeUnwritten(); err != nil {
		r.cancel()
		a.release(r)
		return nil, err
	}
	// Calls left without a result since New (a branch moved into the
	// middle of a batch, a run whose settlement could not be written) are
	// resolved under the same rules as crash leftovers.
	if err := a.resolveLeftovers(ctx); err != nil {
		r.cancel()
		a.release(r)
		return nil, fmt.Errorf("agent: resolve unresolved calls: %w", err)
	}
	if err := a.syncEnvironment(r.id); err != nil {
		r.cancel()
		a.release(r)
		return nil, fmt.Errorf("agent: persist environment context: %w", err)
	}
	refs, err := a.keepImages(opts.Images)
	if err != nil {
		r.cancel()
		a.release(r)
		return nil, fmt.Errorf("agent: keep the prompt's images: %w", err)
	}
	user := session.Entry{Type: session.EntryUser, RunID: r.id, Text: text}
	if len(refs) > 0 {
		user.Attached = &session.Attached{Images: refs}
	}
	if _, err := a.sess.AppendEntry(user); err != nil {
		r.cancel()
		a.release(r)
		return nil, fmt.Errorf("agent: persist prompt: %w", err)
	}
	go r.drive()
	return r, nil
}

// Compact starts a run that summarizes the whole conversation now (a
// person's /compact) and ends: the next prompt sees the summary in place
// of everything before it. The run emits CompactionStarted and
// CompactionFinished like an automatic compaction; it fails when the
// summary could not be made, and completes without either event when
// there is nothing to summarize. It returns ErrBusy while another run is
// active. Of opts only Deliver is used (the run is always tool-free and
// carries no images).
func (a *Agent) Compact(ctx context.Context, opts PromptOptions) (*Run, error) {
	a.mu.Lock()
	if a.active != nil {
		a.mu.Unlock()
		return nil, ErrBusy
	}
	r := newRun(a, ctx, PromptOptions{WithoutTools: true, Deliver: opts.Deliver})
	r.compactOnly = true
	a.active = r
	a.mu.Unlock()
	err := a.writeUnwritten()
	if err == nil {
		err = a.resolveLeftovers(ctx)
	}
	if err != nil {
		r.cancel()
		a.release(r)
		return nil, err
	}
	go r.drive()
	return r, nil
}

// writeUnwritten writes the end of the previous run that could not be
// written when it ended (before anything of the next run, which it
// precedes). Until it is durable no new run starts.
func (a *Agent) writeUnwritten() error {
	a.mu.Lock()
	recs := a.unwritten
	a.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	if err := a.sess.Append(recs...); err != nil {
		return fmt.Errorf("agent: the previous run's checkpoint still cannot be written (%s): %w", writeAdvice(err), err)
	}
	a.mu.Lock()
	a.unwritten = nil
	a.mu.Unlock()
	return nil
}

// release clears the active run if it is r; the agent is then idle and
// keeps no encoded context.
func (a *Agent) release(r *Run) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.active == r {
		a.active = nil
		a.encoded.drop()
	}
}

// snapshot returns the model and reasoning selection for one request.
func (a *Agent) snapshot() (provider.Model, *provider.Reasoning) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var r *provider.Reasoning
	if a.reasoning != nil {
		c := *a.reasoning
		r = &c
	}
	return a.model, r
}

// newID returns a random identifier with the given prefix.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
