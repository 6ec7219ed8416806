package team

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds of one child's accepted follow-up backlog: follow-ups accepted
// and not yet acknowledged, that is durable in the child's session. With
// tasks of at most MaxTextBytes the message bound is reached first.
const (
	MaxBacklogMessages = 32
	MaxBacklogBytes    = 4_325_376
)

// statusUndelivered ends a run whose follow-up could not be handed to the
// child's agent (its prompt was not appended); it is never shown.
const statusUndelivered Status = "undelivered"

// queuedTask is one accepted follow-up.
type queuedTask struct {
	task, from string
}

// followups reports whether children of t take follow-ups: those of a
// generic team (Config.Native, no Service).
func (t *Team) followups() bool { return t.cfg.Native && t.cfg.Service == nil }

// followable reports why n cannot take a follow-up now (t.mu held).
func (t *Team) followable(n *node) error {
	switch {
	case t.failed != nil:
		return t.failed
	case t.closed:
		return ErrShutdown
	case n.status.Active() && !t.followups():
		return fmt.Errorf("delegation: %s is busy (%s); send it a message instead", n.path, n.status)
	case n.finishing || !n.status.Active() && n.status != StatusIdle:
		return fmt.Errorf("delegation: %s has ended (%s) and takes no new task; start a new child", n.path, n.status)
	}
	return nil
}

// admitBacklog checks one more follow-up of size bytes against a backlog
// of count follow-ups and bytes bytes.
func admitBacklog(count, bytes, size int) error {
	if count+1 > MaxBacklogMessages {
		return &LimitError{Limit: "followup_backlog_messages", Max: MaxBacklogMessages}
	}
	if bytes+size > MaxBacklogBytes {
		return &LimitError{Limit: "followup_backlog_bytes", Max: MaxBacklogBytes}
	}
	return nil
}

// Followup gives a child of a generic team (Config.Native) a new task in
// its own context. An idle child is reserved as pending, under the team
// lock, before anything is published, so concurrent follow-ups cannot
// start overlapping runs; for a pending or running child the task joins
// its backlog (at most MaxBacklogMessages and MaxBacklogBytes, checked
// before anything is written), delivered in order each time a run
// completes. An accepted follow-up is recorded in provenance first and
// stays charged until the child's session holds it. A delivery that
// fails is retried (MaxDeliveryAttempts, RetryBackoff); a child whose run
// failed or was interrupted keeps its backlog, which runs, oldest first,
// ahead of its next follow-up. A child that ended takes nothing.
func (t *Team) Followup(callerID, agentID, task string) (Snapshot, error) {
	if strings.TrimSpace(task) == "" {
		return Snapshot{}, errors.New("delegation: the task is empty")
	}
	if len(task) > MaxTextBytes || !utf8.ValidString(task) {
		return Snapshot{}, &LimitError{Limit: "text", Max: MaxTextBytes}
	}
	n, err := t.descendant(callerID, agentID)
	if err != nil {
		return Snapshot{}, err
	}
	if err := t.ceilingRefusal(callerID); err != nil {
		return Snapshot{}, err
	}
	from := t.pathOf(callerID)
	t.mu.Lock()
	start, err := t.acceptLocked(n, from, task)
	if err != nil || !start {
		snap := t.snapshotOf(n)
		t.mu.Unlock()
		return snap, err
	}
	// An earlier task is still queued (its delivery failed, or the child
	// failed or was interrupted first): it runs first, its delivery
	// recorded by the worker.
	n.announce = len(n.backlog) > 1
	t.reservePendingLocked(n)
	t.mu.Unlock()
	t.notify(n)
	t.command(n, cmdFollowup)
	return t.snapshot(n), nil
}

// acceptLocked checks and records one follow-up for n and queues it
// (t.mu held across the append: follow-ups stay in order). start reports
// that n is idle and holds a new concurrency slot for it.
func (t *Team) acceptLocked(n *node, from, task string) (start bool, err error) {
	if err := t.followable(n); err != nil {
		return false, err
	}
	if err := admitBacklog(len(n.backlog), n.backlogBytes, len(task)); err != nil {
		return false, err
	}
	start = n.status == StatusIdle
	if start {
		if err := t.activeSlotLocked(n.parent, n); err != nil {
			return false, err
		}
		select {
		case t.sem <- struct{}{}:
		default:
			return false, &LimitError{Limit: "concurrent", Max: t.lim.Concurrent}
		}
	}
	// Accepted: durable before it is queued or delivered. A follow-up
	// that starts an idle child at once records its delivery, one that
	// waits its acceptance (its delivery is recorded when it starts).
	rec := Record{Kind: KindMessage, Agent: n.id, Path: n.path, From: from, Text: task, Followup: true}
	if start && len(n.backlog) == 0 {
		rec = Record{Kind: KindAgentStatus, Agent: n.id, Path: n.path, Status: string(StatusPending), Task: task, From: from}
	}
	if err := t.recordLocked(rec); err != nil {
		if start {
			<-t.sem
		}
		return false, err
	}
	n.backlog = append(n.backlog, queuedTask{task: task, from: from})
	n.backlogBytes += len(task)
	return start, nil
}

// reservePendingLocked reserves idle n as pending for the follow-up at
// the front of its backlog (t.mu held).
func (t *Team) reservePendingLocked(n *node) {
	n.status, n.task, n.followup = StatusPending, n.backlog[0].task, true
	n.settled, n.final, n.errText, n.run = false, "", "", nil
	n.done = make(chan struct{})
}

// reserveNext reserves n, idle after a completed run, as pending for its
// oldest queued follow-up, and reports whether it did (a shutdown or an
// interrupt may have taken it first).
func (t *Team) reserveNext(n *node) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.status != StatusIdle || n.finishing || t.closed || t.failed != nil || len(n.backlog) == 0 {
		return false
	}
	t.reservePendingLocked(n)
	return true
}

// announce records the delivery of n's front follow-up (agent_status
// pending with its task) and shows it; false when the record failed (the
// team has failed; the follow-up stays queued).
func (t *Team) announce(n *node) bool {
	t.mu.Lock()
	q := n.backlog[0]
	t.mu.Unlock()
	if err := t.record(Record{Kind: KindAgentStatus, Agent: n.id, Path: n.path, Status: string(StatusPending), Task: q.task, From: q.from}); err != nil {
		return false
	}
	t.notify(n)
	return true
}

// unacknowledged reports whether n's current run is a follow-up its
// session does not hold yet.
func (t *Team) unacknowledged(n *node) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return n.followup
}
