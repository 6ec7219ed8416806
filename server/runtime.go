package server

import (
	"context"
	"errors"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/host"
)

// The server drives sessions through the host (package host): a handler
// decodes its params, calls the host and encodes the answer. A run is
// driven through the small runHandle seam (backend.go), which turns the
// agent's events into wireEvents.

// startRun starts a run of text on hs; deliver, when set, is offered
// each event before it is queued (agent.PromptOptions.Deliver).
func startRun(ctx context.Context, hs *host.Session, text string, opts agent.PromptOptions, deliver func(wireEvent) bool) (runHandle, error) {
	return started(hs, opts, deliver, func(o agent.PromptOptions) (*agent.Run, error) { return hs.Prompt(ctx, text, o) })
}

// startCompact starts hs's compaction run (octet/session/compact), its
// events offered to deliver as startRun's are.
func startCompact(ctx context.Context, hs *host.Session, deliver func(wireEvent) bool) (runHandle, error) {
	return started(hs, agent.PromptOptions{}, deliver, func(o agent.PromptOptions) (*agent.Run, error) { return hs.Compact(ctx, o) })
}

// started starts a run of hs with opts (Deliver set from deliver).
func started(hs *host.Session, opts agent.PromptOptions, deliver func(wireEvent) bool, start func(agent.PromptOptions) (*agent.Run, error)) (runHandle, error) {
	if deliver != nil {
		opts.Deliver = func(ev agent.Event) bool { return deliver(offered(ev)) }
	}
	r, err := start(opts)
	if errors.Is(err, agent.ErrBusy) {
		return nil, errBusy
	}
	if err != nil {
		return nil, err
	}
	return &agentRun{r: r, sess: hs}, nil
}

// agentRun adapts *agent.Run to runHandle.
type agentRun struct {
	r    *agent.Run
	sess *host.Session
}

func (a *agentRun) ID() string { return a.r.ID() }

func (a *agentRun) Next() (wireEvent, bool) {
	for ev := range a.r.Events() {
		w := offered(ev)
		w.Body = w.appendBody(nil)
		return w, true
	}
	return wireEvent{}, false
}

// offered is ev as a wireEvent whose body is encoded only when asked for
// (appendBody): a deliver function that refuses it encodes nothing.
func offered(ev agent.Event) wireEvent {
	w := wireEvent{Kind: ev.Kind(), Seq: ev.Seq(), event: ev}
	if d, ok := ev.(*agent.OutputDelta); ok {
		w.Channel = d.Channel
	}
	return w
}

func (a *agentRun) Steer(text string) (string, error) { return mapRunErr(a.r.Steer(text)) }

func (a *agentRun) FollowUp(text string) (string, error) { return mapRunErr(a.r.FollowUp(text)) }

func (a *agentRun) FinishNow(text string) error {
	_, err := mapRunErr("", a.r.FinishNow(text))
	return err
}

func (a *agentRun) Cancel() { a.r.Cancel() }

func (a *agentRun) Wait() runResult {
	res := a.r.Wait()
	u := res.Usage
	return runResult{
		Outcome: string(res.Outcome),
		Usage:   host.RunUsage(u),
		Err:     a.sess.Explain(res.Err),
	}
}

func mapRunErr(id string, err error) (string, error) {
	if errors.Is(err, agent.ErrRunEnded) {
		return "", errRunEnded
	}
	return id, err
}
