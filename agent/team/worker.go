package team

import (
	"fmt"
	"strings"
	"time"

	"github.com/octet-agent/octet/agent"
)

// MaxCommands is the capacity of each worker's command channel.
const MaxCommands = 32

// Follow-up delivery retries: a follow-up whose prompt cannot be appended
// is tried MaxDeliveryAttempts times, waiting RetryBackoff, then twice as
// long each time, in between.
const (
	MaxDeliveryAttempts = 4
	RetryBackoff        = 100 * time.Millisecond
)

// command wakes a worker (a child's owner goroutine). The work it stands
// for (a follow-up, a message, an interrupt, the shutdown) is already in
// the child's state under the team lock, in FIFO order, before the
// command is sent; the worker re-reads that state on every command.
type command int

const (
	cmdFollowup command = iota + 1
	cmdMessage
	cmdInterrupt
	cmdShutdown
)

// command sends c to n's worker without blocking. A full channel is
// control backpressure: the command is not sent, and nothing is lost or
// reordered, because its work stays queued in n's state and a full
// channel means the worker has commands to read and will see it.
func (t *Team) command(n *node, c command) {
	if n.cmds == nil {
		return
	}
	select {
	case n.cmds <- c:
	default:
		t.backpressure.Add(1)
		t.log.Debug("delegation: worker command channel full; the work stays queued", "agent", n.path, "command", int(c))
	}
}

// awaitWork blocks while n is idle until a follow-up reserved it (run:
// it holds a concurrency slot for n; announce: its delivery is still to
// be recorded) or n is done for good. An idle child whose context ended
// (its parent's run did) ends cancelled, unless the team is shutting
// down, which ends it itself.
func (t *Team) awaitWork(n *node) (run, announce bool) {
	for {
		t.mu.Lock()
		st, finishing, closed := n.status, n.finishing, t.closed
		announce, n.announce = n.announce, false
		t.mu.Unlock()
		switch {
		case st == StatusPending && !finishing:
			return true, announce
		case st != StatusIdle || finishing:
			return false, false
		case n.ctx.Err() != nil:
			if !closed {
				t.finishIdle(n, StatusCancelled)
			}
			return false, false
		}
		select {
		case <-n.cmds:
		case <-n.ctx.Done():
		}
	}
}

// deliver runs n's reserved task, retrying a follow-up whose prompt
// could not be appended up to MaxDeliveryAttempts times with a doubling
// backoff; each retry is durable and visible first (pending, its reason
// in the error). The child keeps its slot meanwhile.
func (t *Team) deliver(n *node) (Status, string) {
	for attempt := 1; ; attempt++ {
		st, detail := t.run(n)
		if st != statusUndelivered {
			return st, detail
		}
		if attempt == MaxDeliveryAttempts {
			return st, fmt.Sprintf("the follow-up could not be delivered in %d attempts (%s); it stays queued, first, and is delivered with the next follow-up", attempt, detail)
		}
		wait := RetryBackoff << (attempt - 1)
		why := fmt.Sprintf("delivery attempt %d of %d failed (%s); retrying in %s", attempt, MaxDeliveryAttempts, detail, wait)
		t.mu.Lock()
		n.errText = why
		t.mu.Unlock()
		if err := t.transition(n, StatusPending, why); err != nil {
			return StatusCancelled, err.Error()
		}
		if !t.pause(n, wait) {
			return StatusCancelled, ""
		}
	}
}

// pause waits d before a retry; an interrupt cuts it short (the retry
// then stops at once); false when n's context ended.
func (t *Team) pause(n *node, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		t.mu.Lock()
		interrupted := n.interrupted
		t.mu.Unlock()
		if interrupted {
			return true
		}
		select {
		case <-timer.C:
			return true
		case <-n.cmds:
		case <-n.ctx.Done():
			return false
		}
	}
}

// interruptRun stops the current or reserved run of a generic team's
// pending or running child, which stays idle; false when n is not such a
// child.
func (t *Team) interruptRun(n *node) bool {
	if !t.followups() {
		return false
	}
	t.mu.Lock()
	active := n.status.Active() && !n.finishing
	if active {
		n.interrupted = true
		if n.runCancel != nil {
			n.runCancel()
		}
	}
	t.mu.Unlock()
	if active {
		t.command(n, cmdInterrupt)
	}
	return active
}

// queuedMsg is one accepted direct message not yet handed to its child.
type queuedMsg struct {
	from, text string
}

// steer hands n's queued direct messages to its run as steering, in
// order; once the run takes no more input they stay queued, first, for
// its next prompt.
func (t *Team) steer(n *node, r *agent.Run) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for n.inPrompt == 0 && len(n.inbox) > 0 {
		m := n.inbox[0]
		if _, err := r.Steer(messagePrefix(m.from) + m.text); err != nil {
			return
		}
		n.inbox = n.inbox[1:]
		n.inboxBytes -= len(m.text)
		n.steered = append(n.steered, len(m.text))
	}
}

// takePromptLocked reserves n's queued direct messages for the prompt
// being built (t.mu held); they stay charged until the append succeeds.
func (t *Team) takePromptLocked(n *node) []queuedMsg {
	n.inPrompt = len(n.inbox)
	return append([]queuedMsg(nil), n.inbox...)
}

// ackPromptLocked drops the messages the durable prompt now holds.
func (t *Team) ackPromptLocked(n *node) {
	for _, m := range n.inbox[:n.inPrompt] {
		n.inboxBytes -= len(m.text)
	}
	n.inbox = n.inbox[n.inPrompt:]
	n.inPrompt = 0
}

// restorePrompt gives back the reservation of a prompt that was not
// appended: the messages are again the front of the queue, in order.
func (t *Team) restorePrompt(n *node) {
	t.mu.Lock()
	n.inPrompt = 0
	t.mu.Unlock()
}

// promptText is a run's prompt: the queued messages, oldest first, each
// as its sender's message, then the task.
func promptText(msgs []queuedMsg, task string) string {
	if len(msgs) == 0 {
		return task
	}
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(messagePrefix(m.from))
		b.WriteString(m.text)
		b.WriteString("\n\n")
	}
	b.WriteString(task)
	return b.String()
}
