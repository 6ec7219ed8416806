package team

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/octet-agent/octet/session"
)

// Bounds of the messages pending for one child: sent but not yet durable
// in its session (33 messages of the largest size fill the byte bound).
const (
	MaxPendingMessages = 96
	MaxPendingBytes    = 4_325_376
)

// messagePrefix starts every message a parent sends, as the child's
// session records it; delivery is counted by it (the agent's own
// corrective steering never carries it).
func messagePrefix(from string) string { return "[message from " + from + "] " }

// Send delivers text to a running descendant of callerID at its next safe
// boundary (as steering input, durable in its session). The message is
// rejected before anything is written when it is over MaxTextBytes or the
// child's pending messages (sent, not yet durable in its session) would
// pass MaxPendingMessages or MaxPendingBytes; an accepted message is
// recorded in provenance before it is delivered and never dropped.
func (t *Team) Send(callerID, agentID, text string) error {
	if strings.TrimSpace(text) == "" {
		return errors.New("delegation: the message is empty")
	}
	if len(text) > MaxTextBytes || !utf8.ValidString(text) {
		return &LimitError{Limit: "text", Max: MaxTextBytes}
	}
	n, err := t.descendant(callerID, agentID)
	if err != nil {
		return err
	}
	from := t.pathOf(callerID)
	prefix := messagePrefix(from)
	t.mu.Lock()
	defer t.mu.Unlock() // held across the append: sends stay in order
	if t.failed != nil {
		return t.failed
	}
	if t.closed {
		return ErrShutdown
	}
	if n.run == nil || !n.status.Active() {
		return fmt.Errorf("delegation: %s is not running; only a running child takes messages", n.path)
	}
	count, size := pending(n, prefix)
	if count+1 > MaxPendingMessages {
		return &LimitError{Limit: "pending_messages", Max: MaxPendingMessages}
	}
	if size+len(text) > MaxPendingBytes {
		return &LimitError{Limit: "pending_bytes", Max: MaxPendingBytes}
	}
	if err := t.recordLocked(Record{Kind: KindMessage, Agent: n.id, Path: n.path, From: from, Text: text}); err != nil {
		return err
	}
	if _, err := n.run.Steer(prefix + text); err != nil {
		return fmt.Errorf("delegation: %s has ended; the message was not delivered", n.path)
	}
	n.sent = append(n.sent, len(text))
	return nil
}

// pending counts the messages sent to n that its session does not yet
// hold, and their bytes (delivery is in order, so they are the last ones).
func pending(n *node, prefix string) (count, size int) {
	delivered := 0
	for _, e := range n.sess.Branch() {
		if e.Type == session.EntrySteering && strings.HasPrefix(e.Text, prefix) {
			delivered++
		}
	}
	for _, b := range n.sent[min(delivered, len(n.sent)):] {
		count++
		size += b
	}
	return count, size
}

// statusNote is the automatic notification of a child's end.
func statusNote(st Status, detail string) string {
	if detail == "" {
		return string(st)
	}
	return string(st) + ": " + clipText(detail, 1024)
}

// clipText bounds s to n bytes on a rune boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Post sends text from agent fromID to its parent's mailbox (delivered by
// the parent's next wait). It is refused before anything is written when
// it is over MaxTextBytes or the mailbox is full (a direct message never
// evicts another); an accepted message is in provenance before it is in
// the mailbox.
func (t *Team) Post(fromID, text string) error {
	if strings.TrimSpace(text) == "" {
		return errors.New("delegation: the message is empty")
	}
	if len(text) > MaxTextBytes || !utf8.ValidString(text) {
		return &LimitError{Limit: "text", Max: MaxTextBytes}
	}
	t.mu.Lock()
	defer t.mu.Unlock() // the check, the record and the post are one step
	if t.failed != nil {
		return t.failed
	}
	if t.closed {
		return ErrShutdown
	}
	n, ok := t.nodes[fromID]
	if !ok || n.parent == nil {
		return fmt.Errorf("%w %q", ErrUnknownAgent, fromID)
	}
	to := n.parent
	if !to.box.canPost(len(text)) {
		return &LimitError{Limit: "mailbox", Max: MaxMailboxMessages}
	}
	if err := t.recordLocked(Record{Kind: KindMessage, Agent: to.id, Path: to.path, From: n.path, Text: text}); err != nil {
		return err
	}
	to.box.post(n.path, text, false)
	return nil
}

// Lease hands out a page (at most max bytes of text) of agentID's
// mailbox; resolve(true) consumes it once the result carrying it is
// durable, resolve(false) restores it.
func (t *Team) Lease(agentID string, max int) ([]Message, func(durable bool)) {
	t.mu.Lock()
	n, ok := t.nodes[agentID]
	t.mu.Unlock()
	if !ok {
		return nil, func(bool) {}
	}
	page, l := n.box.lease(max)
	return page, l.resolve
}
