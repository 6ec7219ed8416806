package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"
)

// Observer receives optional telemetry from outside the session ledger. It
// sees an opaque run-start hook and coarse request, tool and compaction
// boundaries with hashes and bounded measurements only: never prompts,
// arguments, results or provider payloads. Every method is called from the
// run's owner goroutine and must return quickly.
type Observer interface {
	// RunStarted is the opaque run-start hook.
	RunStarted(RunInfo)
	// RequestFinished closes one provider attempt (main or auxiliary).
	RequestFinished(RequestInfo)
	// ToolFinished closes one tool call dispatch.
	ToolFinished(ToolInfo)
	// CompactionFinished closes one compaction attempt.
	CompactionFinished(CompactionInfo)
	// RunFinished closes the run.
	RunFinished(RunInfo)
}

// RunInfo identifies a run opaquely.
type RunInfo struct {
	// RunID is the run's random identifier.
	RunID string
	// Outcome is set on RunFinished.
	Outcome Outcome
	// Turns is the number of provider turns (RunFinished).
	Turns int
	// Duration is the run's wall time (RunFinished).
	Duration time.Duration
}

// RequestInfo measures one provider attempt.
type RequestInfo struct {
	RunID string
	// Operation is "" for the main request, else the auxiliary operation.
	Operation string
	// Turn is the turn number (1-based) within the run.
	Turn int
	// Attempt is the attempt number within the turn (0: first).
	Attempt int
	// InputItems counts the request's input items.
	InputItems int
	// EstimatedTokens is the local estimate of the request.
	EstimatedTokens int
	// InstructionsHash is the hex SHA-256 of the instructions and tool
	// names (a cache-key fingerprint, not the text).
	InstructionsHash string
	// Duration spans opening through the last event.
	Duration time.Duration
	// OK reports a completed response.
	OK bool
	// Input and Output are the reported token counts (0 when unknown).
	Input, Output int64
}

// ToolInfo measures one tool call.
type ToolInfo struct {
	RunID string
	// Tool is the registered tool's name; "" when the model named a tool
	// the host does not have (that name is model text).
	Tool string
	// ArgumentsHash is the hex SHA-256 of the raw arguments.
	ArgumentsHash string
	// Executed reports the tool implementation ran.
	Executed bool
	// IsError reports an error result.
	IsError bool
	// ResultBytes is the length of the model-visible result.
	ResultBytes int
	// Duration spans admission through the durable result.
	Duration time.Duration
}

// CompactionInfo measures one compaction attempt.
type CompactionInfo struct {
	RunID string
	// TokensBefore is the estimate that triggered it.
	TokensBefore int
	// SummaryBytes is the length of the summary (0 on failure).
	SummaryBytes int
	// OK reports a durable compaction entry.
	OK bool
	// Duration is the attempt's wall time.
	Duration time.Duration
}

// safeObserver shields the run from its observer: a panicking hook is
// logged and ignored, so telemetry can neither fail a run nor crash the
// process between the run's checkpoint and its run_finished.
type safeObserver struct {
	o   Observer
	log *slog.Logger
}

var _ Observer = safeObserver{}

func (s safeObserver) guard(hook string) {
	if p := recover(); p != nil {
		s.log.Error("agent: telemetry observer panicked", "hook", hook, "panic", fmt.Sprint(p))
	}
}

func (s safeObserver) RunStarted(i RunInfo) {
	defer s.guard("RunStarted")
	s.o.RunStarted(i)
}

func (s safeObserver) RequestFinished(i RequestInfo) {
	defer s.guard("RequestFinished")
	s.o.RequestFinished(i)
}

func (s safeObserver) ToolFinished(i ToolInfo) {
	defer s.guard("ToolFinished")
	s.o.ToolFinished(i)
}

func (s safeObserver) CompactionFinished(i CompactionInfo) {
	defer s.guard("CompactionFinished")
	s.o.CompactionFinished(i)
}

func (s safeObserver) RunFinished(i RunInfo) {
	defer s.guard("RunFinished")
	s.o.RunFinished(i)
}

// nopObserver is the default Observer.
type nopObserver struct{}

func (nopObserver) RunStarted(RunInfo)                { /* no telemetry installed */ }
func (nopObserver) RequestFinished(RequestInfo)       { /* no telemetry installed */ }
func (nopObserver) ToolFinished(ToolInfo)             { /* no telemetry installed */ }
func (nopObserver) CompactionFinished(CompactionInfo) { /* no telemetry installed */ }
func (nopObserver) RunFinished(RunInfo)               { /* no telemetry installed */ }

var _ Observer = nopObserver{}

// hashHex returns the hex SHA-256 of the concatenated parts.
func hashHex(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
