package session

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"
)

// Record kinds of the dispatch write-ahead log and of recovered output.
const (
	// KindDispatch is a [Dispatch]: a provider request about to be sent.
	KindDispatch = "dispatch"
	// KindDispatchSettled is a [DispatchSettled]: how a dispatch ended.
	KindDispatchSettled = "dispatch_settled"
	// KindRecoveredOutput is a [RecoveredOutput].
	KindRecoveredOutput = "recovered_output"
)

// Dispatch is the write-ahead record of one provider request. It is
// durable before the request's first byte is sent and is settled by a
// [DispatchSettled] naming its ID, written with the response's usage or a
// failure marker. A dispatch that is never settled (the process died with
// the request in flight) may have been billed: the session's usage is then
// uncertain ([Totals.UnsettledDispatches]), and a writable [Open] records
// that durably as a usage_uncertain marker with reason
// [ReasonUnsettledDispatch].
type Dispatch struct {
	// ID identifies the dispatch within its session.
	ID string
	// RunID is the run that made the request.
	RunID string
	// Operation is the typed operation, as in [Usage].
	Operation string
	// Model is the model the request was sent to.
	Model string
	// Attempt is the attempt number within the logical turn.
	Attempt int
	// LocalID and Input are set on the intent of a native steering
	// operation (Operation "native_steering"): the id the run gave the
	// steering input and its text. The operation is the request the
	// provider makes of it (the successor response): it is settled with
	// SettledSteeringCompleted together with the successor's usage.
	LocalID, Input string
}

// OperationNativeSteering is the [Dispatch] operation of a native steering
// intent.
const OperationNativeSteering = "native_steering"

// Outcomes of a [DispatchSettled].
const (
	// SettledUsage: the response completed; its usage record is in the
	// same batch.
	SettledUsage = "usage"
	// SettledNoUsage: the response completed without reporting usage.
	SettledNoUsage = "no_usage"
	// SettledUncertain: the request failed after it may have been sent; a
	// usage_uncertain marker is in the same batch.
	SettledUncertain = "uncertain"
	// SettledFailed: the request failed with usage known not to be billed
	// (not sent, or refused before generation).
	SettledFailed = "failed"
	// SettledCancelled: the run was cancelled and, as the contract
	// requires for a cancelled compaction, nothing of the request is
	// recorded.
	SettledCancelled = "cancelled"
	// SettledSteeringCompleted settles a native steering operation: its
	// successor response completed and was committed with its usage
	// (the ResponsesSteering.completed marker).
	SettledSteeringCompleted = "steering_completed"
	// SettledSteeringFailed: the provider refused the steering input
	// (response.steer.failed): it was not applied, and nothing of it is
	// billed; the run delivered it as ordinary steering.
	SettledSteeringFailed = "steering_failed"
	// SettledUnresolved: a native steering operation whose writer died
	// before it settled. Whether the provider applied the input is
	// unknown; a usage_uncertain marker is in the same batch, and the
	// session refuses new prompts ([Session.UnresolvedSteering]).
	SettledUnresolved = "unresolved"
)

// ReasonUnsettledDispatch is the [UsageUncertain.Reason] of the marker a
// writable [Open] writes for a dispatch it finds unsettled: the writer
// died after the request may have been sent.
const ReasonUnsettledDispatch = "unsettled_dispatch"

// DispatchSettled settles the [Dispatch] whose ID it names.
type DispatchSettled struct {
	// ID is the settled dispatch's ID.
	ID string
	// RunID is the run that made the request.
	RunID string
	// Outcome is one of the Settled* constants.
	Outcome string
}

// RecoveredOutput is the partial text or reasoning of an interrupted
// provider attempt that was replaced. It is historical progress kept for
// display only: never an entry, never sent to the provider again, never
// counted as usage.
type RecoveredOutput struct {
	// RunID is the run whose attempt was interrupted.
	RunID string
	// Channel is "text" or "reasoning".
	Channel string
	// Text is the partial output.
	Text string
	// Attempt is the interrupted attempt's number within its turn.
	Attempt int
}

// DispatchRecord returns a dispatch write-ahead record.
func DispatchRecord(d Dispatch) Record { return Record{Kind: KindDispatch, Dispatch: &d} }

// SettledRecord returns a record settling a dispatch.
func SettledRecord(d DispatchSettled) Record {
	return Record{Kind: KindDispatchSettled, Settled: &d}
}

// RecoveredRecord returns a recovered-output record.
func RecoveredRecord(o RecoveredOutput) Record {
	return Record{Kind: KindRecoveredOutput, Recovered: &o}
}

// validateDispatch reports a dispatch-log or recovered-output record that
// cannot be encoded; ok is false for other kinds.
func (r Record) validateDispatch() (err error, ok bool) {
	switch r.Kind {
	case KindDispatch:
		if r.Dispatch == nil || r.Dispatch.ID == "" {
			return fmt.Errorf("dispatch record without id"), true
		}
	case KindDispatchSettled:
		if r.Settled == nil || r.Settled.ID == "" {
			return fmt.Errorf("dispatch_settled record without dispatch id"), true
		}
	case KindRecoveredOutput:
		if r.Recovered == nil {
			return fmt.Errorf("recovered_output record without output"), true
		}
	default:
		return nil, false
	}
	return nil, true
}

// appendDispatchBody appends the members of a dispatch-log or
// recovered-output record; "id" comes first, where the opening scanner
// reads it.
func appendDispatchBody(b []byte, r Record) []byte {
	switch r.Kind {
	case KindDispatch:
		d := r.Dispatch
		b = appendStrField(b, "id", d.ID)
		b = appendStrField(b, "run_id", d.RunID)
		b = appendStrField(b, "operation", d.Operation)
		b = appendStrField(b, "model", d.Model)
		b = appendIntField(b, "attempt", int64(d.Attempt))
		b = appendStrField(b, "local_id", d.LocalID)
		b = appendStrField(b, "input", d.Input)
	case KindDispatchSettled:
		d := r.Settled
		b = appendStrField(b, "id", d.ID)
		b = appendStrField(b, "run_id", d.RunID)
		b = appendStrField(b, "outcome", d.Outcome)
	case KindRecoveredOutput:
		o := r.Recovered
		b = appendStrField(b, "run_id", o.RunID)
		b = appendStrField(b, "channel", o.Channel)
		b = appendStrField(b, "text", o.Text)
		b = appendIntField(b, "attempt", int64(o.Attempt))
	}
	return b
}

// decodeDispatchBody decodes the members of a dispatch-log or
// recovered-output record into sc.
func (d *decoder) decodeDispatchBody(kind string, r *Record, a *strAlloc, sc *bodyScratch) {
	switch kind {
	case KindDispatch:
		x := &sc.dispatch
		r.Dispatch = x
		d.obj(func(key []byte) {
			switch string(key) {
			case "id":
				x.ID = d.str(a)
			case "run_id":
				x.RunID = d.str(a)
			case "operation":
				x.Operation = d.str(a)
			case "model":
				x.Model = d.str(a)
			case "attempt":
				x.Attempt = int(d.int())
			case "local_id":
				x.LocalID = d.str(a)
			case "input":
				x.Input = d.str(a)
			default:
				d.skip(0)
			}
		})
	case KindDispatchSettled:
		x := &sc.settled
		r.Settled = x
		d.obj(func(key []byte) {
			switch string(key) {
			case "id":
				x.ID = d.str(a)
			case "run_id":
				x.RunID = d.str(a)
			case "outcome":
				if a == nil { // validating: keep only what the index needs
					if string(d.strBytes()) == SettledUnresolved {
						x.Outcome = SettledUnresolved
					}
					break
				}
				x.Outcome = d.str(a)
			default:
				d.skip(0)
			}
		})
	case KindRecoveredOutput:
		x := &sc.recovered
		r.Recovered = x
		d.obj(func(key []byte) {
			switch string(key) {
			case "run_id":
				x.RunID = d.str(a)
			case "channel":
				x.Channel = d.str(a)
			case "text":
				x.Text = d.str(a)
			case "attempt":
				x.Attempt = int(d.int())
			default:
				d.skip(0)
			}
		})
	}
}

// pendingDispatch is a dispatch not yet settled.
type pendingDispatch struct {
	loc recLoc
	// own is true for a dispatch this Session wrote: its request is in
	// flight in this process, which will settle it, so it does not make
	// the totals uncertain.
	own bool
}

// addDispatchLog folds a dispatch-log or recovered-output record; id is the
// record's "id" member (the dispatch's id) and r its decoded body.
func (ix *index) addDispatchLog(r *Record, id string, loc recLoc, own bool) error {
	switch r.Kind {
	case KindDispatch:
		if id == "" {
			return fmt.Errorf("dispatch record without id")
		}
		if _, dup := ix.dispatches[id]; dup {
			return fmt.Errorf("duplicate dispatch id %q", id)
		}
		if ix.dispatches == nil {
			ix.dispatches = make(map[string]pendingDispatch)
		}
		ix.dispatches[id] = pendingDispatch{loc: loc, own: own}
		if !own {
			ix.totals.UnsettledDispatches++
		}
	case KindDispatchSettled:
		if r.Settled != nil && r.Settled.Outcome == SettledUnresolved {
			ix.unresolved = append(ix.unresolved, loc)
		}
		// A settlement of an unknown dispatch is tolerated: it settles
		// nothing.
		if p, ok := ix.dispatches[id]; ok {
			delete(ix.dispatches, id)
			if !p.own {
				ix.totals.UnsettledDispatches--
			}
		}
	case KindRecoveredOutput:
		ix.recovered = append(ix.recovered, loc)
	}
	return nil
}

// unsettled returns the dispatches other writers left unsettled, in file
// order.
func (ix *index) unsettled() []recLoc {
	var out []recLoc
	for p := range maps.Values(ix.dispatches) {
		if !p.own {
			out = append(out, p.loc)
		}
	}
	slices.SortFunc(out, func(a, b recLoc) int { return cmp.Compare(a.off, b.off) })
	return out
}

// firstPending returns the offset of the first dispatch not yet settled,
// own or another writer's (0: none), for the listing cache.
func (ix *index) firstPending() int64 {
	var first int64
	for p := range maps.Values(ix.dispatches) {
		if first == 0 || p.loc.off < first {
			first = p.loc.off
		}
	}
	return first
}

// readDispatch decodes the dispatch record at loc.
func (s *Session) readDispatch(loc recLoc) (Dispatch, error) {
	buf := make([]byte, loc.n)
	if _, err := s.f.ReadAt(buf, loc.off); err != nil {
		return Dispatch{}, fmt.Errorf("read dispatch record at line %d: %w", loc.line, err)
	}
	var sc bodyScratch
	r, err := decodeBody(KindDispatch, buf, &s.alloc, &sc)
	if err != nil {
		return Dispatch{}, fmt.Errorf("decode dispatch record at line %d: %w", loc.line, err)
	}
	return *r.Dispatch, nil
}

// settleUnsettled durably turns every dispatch another writer left
// unsettled into a usage_uncertain marker (reason
// [ReasonUnsettledDispatch]) with its settlement, and records the end of
// every run left without a checkpoint ([Session.OpenRuns]), as one
// batch. The caller holds the exclusive lock, has folded the whole file
// and is the session's only live writer.
func (s *Session) settleUnsettled() error {
	locs := s.ix.unsettled()
	if len(locs) == 0 && len(s.ix.openRuns) == 0 {
		return nil
	}
	recs := make([]Record, 0, 2*len(locs)+len(s.ix.openRuns))
	for _, loc := range locs {
		d, err := s.readDispatch(loc)
		if err != nil {
			return fmt.Errorf("session %s: %w", s.path, err)
		}
		slog.Warn("session: request dispatched but never settled; usage is uncertain",
			"path", s.path, "line", loc.line, "run", d.RunID, "operation", d.Operation)
		outcome := SettledUncertain
		if d.Operation == OperationNativeSteering {
			// Whether the provider applied the input is unknown: it is
			// never guessed, and the session takes no new prompt.
			outcome = SettledUnresolved
		}
		recs = append(recs,
			UncertainRecord(UsageUncertain{RunID: d.RunID, Operation: d.Operation, Reason: ReasonUnsettledDispatch, Dispatched: true, Attempt: d.Attempt}),
			SettledRecord(DispatchSettled{ID: d.ID, RunID: d.RunID, Outcome: outcome}))
	}
	// The runs that requests were in flight for, and any other that ended
	// without its checkpoint, get theirs after the markers.
	recs = append(recs, s.unrecordedCheckpoints()...)
	// The writable open that called this rewrites the listing cache.
	if err := s.writeBatch(recs); err != nil {
		if advice := WriteFailureAdvice(err); advice != "" {
			return fmt.Errorf("session %s: record the end of runs left unsettled by a writer that is gone (%s): %w", s.path, advice, err)
		}
		return fmt.Errorf("session %s: record the end of runs left unsettled by a writer that is gone: %w", s.path, err)
	}
	return nil
}

// UnresolvedSteering returns the native steering operations a writer
// that died left unsettled ([SettledUnresolved]), in file order, then
// those another live writer has not settled yet. A session that has any
// takes no new prompt: whether the provider applied the input is
// unknown, and octet never guesses it from text or replays it.
func (s *Session) UnresolvedSteering() []DispatchSettled {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := readRecords(s, KindDispatchSettled, s.ix.unresolved, func(r Record) DispatchSettled { return *r.Settled })
	for _, loc := range s.ix.unsettled() {
		if d, err := s.readDispatch(loc); err == nil && d.Operation == OperationNativeSteering {
			out = append(out, DispatchSettled{ID: d.ID, RunID: d.RunID})
		}
	}
	return out
}

// RecoveredOutputs returns every recovered-output record in file order.
func (s *Session) RecoveredOutputs() []RecoveredOutput {
	s.mu.Lock()
	defer s.mu.Unlock()
	return readRecords(s, KindRecoveredOutput, s.ix.recovered, func(r Record) RecoveredOutput { return *r.Recovered })
}

// totalsLocked is the totals as [Session.Totals] reports them: an
// unsettled dispatch makes usage uncertain, and the cause names the first
// reason. The caller holds s.mu.
func (s *Session) totalsLocked() Totals {
	t := s.ix.totals
	if t.UnsettledDispatches == 0 {
		return t
	}
	t.Uncertain = true
	if t.Cause.Reason == "" {
		t.Cause = UsageUncertain{Reason: ReasonUnsettledDispatch, Dispatched: true}
		if locs := s.ix.unsettled(); len(locs) > 0 {
			if d, err := s.readDispatch(locs[0]); err == nil {
				t.Cause.RunID, t.Cause.Operation, t.Cause.Attempt = d.RunID, d.Operation, d.Attempt
			}
		}
	}
	return t
}

// checkNewDispatch refuses a dispatch id that is pending already or
// dispatched earlier in the same batch.
func (ix *index) checkNewDispatch(id string, before []Record) error {
	dup := false
	if _, ok := ix.dispatches[id]; ok {
		dup = true
	}
	for _, r := range before {
		dup = dup || r.Kind == KindDispatch && r.Dispatch.ID == id
	}
	if dup {
		return fmt.Errorf("duplicate dispatch id %q", id)
	}
	return nil
}
