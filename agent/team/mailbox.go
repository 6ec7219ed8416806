package team

import (
	"sync"
	"unicode/utf8"
)

// Mailbox bounds: what one agent's mailbox holds, and the message text of
// one wait result.
const (
	MaxMailboxMessages = 64
	MaxMailboxBytes    = 1 << 20
	MaxPageBytes       = 16 << 10 // as the result encodes the text (escapedPrefix)
)

// Message is one message, or the part of one that a page carries, as a
// wait result shows it.
type Message struct {
	ID   int64  `json:"id"`
	From string `json:"from"`
	// Automatic marks a status notification (not written by an agent).
	Automatic bool   `json:"automatic,omitempty"`
	Text      string `json:"text"`
	// A message longer than a page continues on the next ones: its size,
	// where this part starts and where the next part does.
	Bytes  int  `json:"bytes,omitempty"`
	Offset int  `json:"offset,omitempty"`
	Next   *int `json:"next_offset,omitempty"`
}

// mailbox is an agent's inbox. Direct messages are never evicted (one that
// does not fit is refused); an automatic notification that does not fit
// evicts the oldest unleased automatic notifications, or is dropped. A
// wait leases a page; the lease commits (the page is consumed) only when
// its result became durable whole, and is restored otherwise.
type mailbox struct {
	mu    sync.Mutex
	msgs  []*boxed
	size  int
	ready chan struct{} // closed and replaced when unleased mail arrives
}

// boxed is one message in a mailbox.
type boxed struct {
	id        int64
	from      string
	auto      bool
	text      string
	delivered int  // bytes consumed by committed pages
	leased    bool // a page of it is out
}

func newMailbox() *mailbox { return &mailbox{ready: make(chan struct{})} }

// fits reports whether one more message of n bytes fits (m.mu held).
func (m *mailbox) fits(n int) bool {
	return len(m.msgs)+1 <= MaxMailboxMessages && m.size+n <= MaxMailboxBytes
}

// canPost reports whether a direct message of n bytes would be accepted.
func (m *mailbox) canPost(n int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fits(n)
}

// post adds message id. A direct one that does not fit is refused (false);
// an automatic one evicts the oldest unleased automatic notifications to
// fit, or is dropped (false).
func (m *mailbox) post(id int64, from, text string, auto bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for !m.fits(len(text)) {
		if !auto || !m.evictAuto() {
			return false
		}
	}
	m.msgs = append(m.msgs, &boxed{id: id, from: from, auto: auto, text: text})
	m.size += len(text)
	m.signal()
	return true
}

// evictAuto removes the oldest unleased automatic notification.
func (m *mailbox) evictAuto() bool {
	for i, b := range m.msgs {
		if b.auto && !b.leased {
			m.remove(i)
			return true
		}
	}
	return false
}

func (m *mailbox) remove(i int) {
	m.size -= len(m.msgs[i].text)
	m.msgs = append(m.msgs[:i], m.msgs[i+1:]...)
}

// signal wakes waiters (m.mu held).
func (m *mailbox) signal() {
	close(m.ready)
	m.ready = make(chan struct{})
}

// wake returns a channel closed at the next arrival, and whether unleased
// mail (direct only, with directOnly) is already there.
func (m *mailbox) wake(directOnly bool) (<-chan struct{}, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.msgs {
		if !b.leased && (!directOnly || !b.auto) {
			return m.ready, true
		}
	}
	return m.ready, false
}

// lease is a page of messages handed out by one wait.
type lease struct {
	m     *mailbox
	parts []leasedPart
	once  sync.Once
}

type leasedPart struct {
	b   *boxed
	end int // the page took b.text[b.delivered:end]
}

// lease hands out the oldest unleased messages, at most max bytes of
// text as the wait result encodes it (escapedPrefix): whole messages while
// they fit, and a message that alone is larger than the page in
// UTF-8-safe parts with continuation offsets.
func (m *mailbox) lease(max int) ([]Message, *lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := &lease{m: m}
	var page []Message
	left := max
	for _, b := range m.msgs {
		if b.leased {
			continue
		}
		n, cost := escapedPrefix(b.text[b.delivered:], left)
		if b.delivered+n < len(b.text) && len(page) > 0 || n == 0 {
			break
		}
		end := b.delivered + n
		msg := Message{ID: b.id, From: b.from, Automatic: b.auto, Text: b.text[b.delivered:end]}
		if b.delivered > 0 || end < len(b.text) {
			msg.Bytes, msg.Offset = len(b.text), b.delivered
			if end < len(b.text) {
				next := end
				msg.Next = &next
			}
		}
		b.leased = true
		page = append(page, msg)
		l.parts = append(l.parts, leasedPart{b: b, end: end})
		left -= cost
		if left <= 0 || end < len(b.text) {
			break
		}
	}
	return page, l
}

// resolve commits the page (durable) or restores it, once; later calls
// do nothing.
func (l *lease) resolve(durable bool) {
	l.once.Do(func() {
		m := l.m
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range l.parts {
			p.b.leased = false
			if durable {
				p.b.delivered = p.end
			}
		}
		for i := 0; i < len(m.msgs); {
			if m.msgs[i].delivered == len(m.msgs[i].text) && !m.msgs[i].leased {
				m.remove(i)
				continue
			}
			i++
		}
		if !durable && len(l.parts) > 0 {
			m.signal()
		}
	})
}

// escapedPrefix returns the length n of the longest prefix of s, whole
// runes, whose text in a JSON string takes at most budget bytes, and
// that size. A page is bounded by its encoded size, not its raw bytes:
// a control character takes six bytes in the result, so a page of them
// bounded by raw bytes could pass the result limit and be cut.
func escapedPrefix(s string, budget int) (n, size int) {
	for n < len(s) {
		r, w := utf8.DecodeRuneInString(s[n:])
		c := escapedLen(r, w)
		if size+c > budget {
			break
		}
		n, size = n+w, size+c
	}
	return n, size
}

// escapedLen is an upper bound of the bytes rune r (w bytes in UTF-8)
// takes in a JSON string as encoding/json writes it, HTML characters not
// escaped.
func escapedLen(r rune, w int) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029' || r == utf8.RuneError && w == 1:
		return 6
	}
	return w
}
