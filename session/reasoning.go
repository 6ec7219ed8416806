package session

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// KindReasoning is a [Reasoning] record: the host's model and reasoning
// selection, typed (never a provider item).
const KindReasoning = "reasoning"

// Operations of a [Reasoning] record.
const (
	// ReasoningUpdate is a chronological change of the host's selection
	// (octet/setReasoning, octet/setModel, an ACP config option). The
	// last update is the session's effective selection: what a resumed
	// session starts with.
	ReasoningUpdate = "update"
	// ReasoningBaseline pins the selection the session's main requests
	// are sent with from here on: a run's start, the response boundary
	// at which an update made during a run took effect, a compaction
	// that rebased the retained prefix.
	ReasoningBaseline = "baseline"
)

// Reasons of a [ReasoningBaseline] record.
const (
	BaselineRunStart   = "run_start"
	BaselineBoundary   = "response_boundary"
	BaselineCompaction = "compaction"
)

// Reasoning is one typed reasoning record: the complete selection (model
// and effort) after a host update, or the request baseline pinned at a
// safe boundary. Updates and baselines are kept apart: the updates are
// the chronological history of what the host selected, the baselines
// what requests actually carried. Neither is an entry (never on the
// branch, never sent to the provider as input), and only the host
// writes them: nothing a provider returns can change a selection.
type Reasoning struct {
	// Op is ReasoningUpdate or ReasoningBaseline.
	Op string `json:"op"`
	// RunID is the run a baseline was pinned by, or the run that was
	// active when an update was made ("" when idle).
	RunID string `json:"run_id,omitempty"`
	// Model is the selected model's name.
	Model string `json:"model"`
	// Effort is the reasoning effort ("" for the provider's default).
	Effort string `json:"effort,omitempty"`
	// Summary is the reasoning summary setting ("" for none).
	Summary string `json:"summary,omitempty"`
	// Reason says why a baseline was pinned (Baseline*).
	Reason string `json:"reason,omitempty"`
	// Time is when the record was made.
	Time time.Time `json:"time"`
}

// ReasoningRecord returns a typed reasoning record.
func ReasoningRecord(r Reasoning) Record { return Record{Kind: KindReasoning, Reasoning: &r} }

// validateReasoning reports a reasoning record that cannot be encoded; ok
// is false for other kinds.
func (r Record) validateReasoning() (err error, ok bool) {
	if r.Kind != KindReasoning {
		return nil, false
	}
	x := r.Reasoning
	switch {
	case x == nil:
		return fmt.Errorf("reasoning record without selection"), true
	case x.Op != ReasoningUpdate && x.Op != ReasoningBaseline:
		return fmt.Errorf("reasoning record with unknown op %q", x.Op), true
	case x.Model == "":
		return fmt.Errorf("reasoning record without model"), true
	}
	return nil, true
}

// decodeReasoning decodes and validates one reasoning record line.
func decodeReasoning(line []byte) (Reasoning, error) {
	var x Reasoning
	if err := json.Unmarshal(line, &x); err != nil {
		return Reasoning{}, fmt.Errorf("reasoning record: %w", err)
	}
	if err, _ := ReasoningRecord(x).validateReasoning(); err != nil {
		return Reasoning{}, err
	}
	return x, nil
}

// addReasoning folds a reasoning record: r when it was just written,
// else its line.
func (ix *index) addReasoning(r *Reasoning, line []byte) error {
	if r == nil {
		x, err := decodeReasoning(line)
		if err != nil {
			return err
		}
		r = &x
	}
	ix.reasoning = append(ix.reasoning, *r)
	return nil
}

// ReasoningRecords returns every reasoning record in file order.
func (s *Session) ReasoningRecords() []Reasoning {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ix.reasoning)
}

// Selection returns the session's effective selection: its last
// [ReasoningUpdate]. ok is false when the host never changed it (the
// configuration then decides).
func (s *Session) Selection() (Reasoning, bool) { return s.lastReasoning(ReasoningUpdate) }

// Baseline returns the last pinned request baseline; ok is false before
// the first run.
func (s *Session) Baseline() (Reasoning, bool) { return s.lastReasoning(ReasoningBaseline) }

func (s *Session) lastReasoning(op string) (Reasoning, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.ix.reasoning) - 1; i >= 0; i-- {
		if s.ix.reasoning[i].Op == op {
			return s.ix.reasoning[i], true
		}
	}
	return Reasoning{}, false
}
