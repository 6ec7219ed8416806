package agent

import (
	"fmt"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Async tools (FeatureAsyncTools, granted by both the model and the
// endpoint). Tools whose static concurrency is Parallel are advertised
// async (provider.FunctionTool.Async) unless a hard cumulative ceiling
// is set (tool accounting is then serialized) or the run is tool-free.
// A committed assistant message whose calls are all async, at most
// MaxParallelWave of them, each statically parallel and admitted by the
// broker as a parallel observation (Pure, WorkspaceRead, HostRead) is a
// wholly eligible batch: its calls start, the run-owned job holds them,
// and the next request goes out at once without their outputs. Their
// results are persisted in call order after that next response is
// committed (it did not consume them), before its own calls run; a run
// that would then end goes on, so the model sees them. Anything else —
// a sync, effectful, denied, mixed or non-parallel call — is a barrier:
// the batch runs as every batch does, its results before the next
// request. A pending job disables compaction; a run's end cancels and
// settles it (each started call records its own outcome). After a crash
// an async call without a result gets the indeterminate error and never
// runs again (resolveLeftovers), even when its tool is replay-safe.

// asyncJob is a started async batch: the wave of its calls and the sink
// their decisions and progress go to until it is settled.
type asyncJob struct {
	wave *waveRun
	sink *toolSink
}

// CeilingReporter is implemented by retry policies that know whether a
// hard cumulative ceiling (tokens, cost) is set. A policy that does not
// implement it is taken to have one (async tools stay off).
type CeilingReporter interface {
	HardCeilings() bool
}

// HardCeilings reports whether the budget sets a hard ceiling.
func (p *CodexRecovery) HardCeilings() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.budget.Active()
}

// HardCeilings reports none.
func (NoRetry) HardCeilings() bool { return false }

// asyncGranted reports whether the run may advertise async tools to
// model.
func (r *Run) asyncGranted(model provider.Model) bool {
	cr, ok := r.a.retry.(CeilingReporter)
	if !ok || cr.HardCeilings() || r.toolFree || r.ctl.finishRequested() {
		return false
	}
	return r.a.granted(model).Has(provider.FeatureAsyncTools)
}

// markAsync advertises the statically parallel tools of defs as async.
func (r *Run) markAsync(defs []provider.FunctionTool) {
	for i := range defs {
		if t, ok := r.a.cfg.Host.Lookup(defs[i].Name); ok && t.Concurrency() == tools.Parallel {
			defs[i].Async = true
		}
	}
}

// asyncEligible is the cheap test of a committed batch before admission:
// every call async and statically parallel, at most MaxParallelWave of
// them, on a run that advertised async tools.
func (r *Run) asyncEligible(calls []session.Item, truncated bool) bool {
	if truncated || len(calls) == 0 || len(calls) > MaxParallelWave || r.async != nil || !r.asyncGranted(r.pin.model) {
		return false
	}
	for _, c := range calls {
		if !c.Async || !r.staticParallel(c) {
			return false
		}
	}
	return true
}

// dispatchAsync starts an eligible batch as the run's async job, or, when
// admission makes it ineligible (a denial, a call that is not a parallel
// observation after all), dispatches it as a barrier.
func (r *Run) dispatchAsync(calls []session.Item) error {
	r.pending = make([]pendingCall, len(calls))
	for i, c := range calls {
		r.pending[i] = pendingCall{item: c}
	}
	sink := newToolSink()
	var wave []admitted
	for i := range calls {
		next, err := r.admitDeferred(i, sink)
		if err != nil {
			r.revoke(wave)
			sink.close()
			return err
		}
		if next == nil || !next.adm.Parallel() {
			// A barrier: what was admitted runs now, then this call,
			// then the rest, each as the ordinary dispatch would.
			defer sink.close()
			if err := r.executeWave(wave, sink); err != nil {
				if next != nil {
					next.adm.Revoke()
				}
				return err
			}
			if next == nil {
				err = r.persistDenial(i, sink)
			} else {
				err = r.executeWave([]admitted{*next}, sink)
			}
			if err != nil {
				return err
			}
			return r.dispatchRest(i+1, sink)
		}
		wave = append(wave, *next)
	}
	r.async = &asyncJob{wave: r.startWave(wave), sink: sink}
	return nil
}

// settleAsync waits for the run's async job and persists its results in
// call order; with stop it cancels the job first (a run's end).
func (r *Run) settleAsync(stop bool) error {
	job := r.async
	if job == nil {
		return nil
	}
	r.async = nil
	if stop {
		job.wave.cancel()
	}
	defer job.sink.close()
	if err := r.settleWave(job.wave, job.sink); err != nil {
		return fmt.Errorf("settle async tool calls: %w", err)
	}
	r.pending = nil
	return nil
}
