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
func messagePrefix(from string) string { return messageMark + from + "] " }

const messageMark = "[message from "

// Send gives text to agentID on behalf of callerID: a descendant of the
// caller, or a peer (a child of the same parent; never another agent).
// To a pending or running child it is steering input at its next safe
// boundary; to an idle child of a generic team it waits, queued, for the
// child's next prompt (its next follow-up's). The message is rejected
// before anything is written when it is over MaxTextBytes or the child's
// pending messages (queued, being moved into a prompt, or handed to its
// run and not yet durable in its session) would pass MaxPendingMessages
// or MaxPendingBytes; an accepted message is recorded in provenance
// before it is queued and is never dropped or cut.
func (t *Team) Send(callerID, agentID, text string) error {
	if strings.TrimSpace(text) == "" {
		return errors.New("delegation: the message is empty")
	}
	if len(text) > MaxTextBytes || !utf8.ValidString(text) {
		return &LimitError{Limit: "text", Max: MaxTextBytes}
	}
	n, err := t.recipient(callerID, agentID)
	if err != nil {
		return err
	}
	from := t.pathOf(callerID)
	t.mu.Lock()
	defer t.mu.Unlock() // held across the append: sends stay in order
	if t.failed != nil {
		return t.failed
	}
	if t.closed {
		return ErrShutdown
	}
	if n.finishing || !n.status.Active() && (n.status != StatusIdle || !t.followups()) {
		return fmt.Errorf("delegation: %s has ended (%s) and takes no messages", n.path, n.status)
	}
	count, size := pendingLocked(n)
	if count+1 > MaxPendingMessages {
		return &LimitError{Limit: "pending_messages", Max: MaxPendingMessages}
	}
	if size+len(text) > MaxPendingBytes {
		return &LimitError{Limit: "pending_bytes", Max: MaxPendingBytes}
	}
	if err := t.recordLocked(Record{Kind: KindMessage, Agent: n.id, Path: n.path, From: from, Text: text}); err != nil {
		return err
	}
	n.inbox = append(n.inbox, queuedMsg{from: from, text: text})
	n.inboxBytes += len(text)
	t.command(n, cmdMessage)
	return nil
}

// recipient finds the agent callerID may message: one of its
// descendants, or one of its peers (another child of its parent).
func (t *Team) recipient(callerID, agentID string) (*node, error) {
	if n, err := t.descendant(callerID, agentID); err == nil {
		return n, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.nodes[callerID]
	n, found := t.nodes[agentID]
	if ok && found && c.parent != nil && n != c && n.parent == c.parent {
		return n, nil
	}
	return nil, fmt.Errorf("%w %q: an agent can message its own descendants and its peers (children of its parent) only", ErrUnknownAgent, agentID)
}

// pendingLocked counts the messages accepted for n that its session does
// not hold yet, and their bytes: those queued (the ones being moved into
// a prompt included) and those handed to its run as steering and not yet
// durable (delivery is in order, so they are the last ones handed over).
func pendingLocked(n *node) (count, size int) {
	delivered := 0
	for _, e := range n.sess.Branch() {
		if e.Type == session.EntrySteering && strings.HasPrefix(e.Text, messageMark) {
			delivered++
		}
	}
	for _, b := range n.steered[min(delivered, len(n.steered)):] {
		count++
		size += b
	}
	return count + len(n.inbox), size + n.inboxBytes
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
	id := t.msgIDs.Add(1)
	if err := t.recordLocked(Record{Kind: KindMessage, Agent: to.id, Path: to.path, From: n.path, Text: text, MessageID: id}); err != nil {
		return err
	}
	to.box.post(id, n.path, text, false)
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
	if leased != nil && len(page) > 0 {
		leased()
	}
	return page, l.resolve
}

// leased, when set by a test, runs after a non-empty page is leased and
// before it is returned (a crash between the lease and the result's
// append).
var leased func()
