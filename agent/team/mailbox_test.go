package team

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func ids(page []Message) []int64 {
	var out []int64
	for _, m := range page {
		out = append(out, m.ID)
	}
	return out
}

// TestMailboxBounds: 64 messages and 1 MiB; a direct message over either
// is refused and never evicts; an automatic one evicts only the oldest
// unleased automatic notifications, or is dropped.
func TestMailboxBounds(t *testing.T) {
	m := newMailbox()
	for i := range MaxMailboxMessages {
		if !post(m, "root/w", "direct "+string(rune('a'+i%26)), false) {
			t.Fatalf("direct message %d refused", i+1)
		}
	}
	if post(m, "root/w", "one too many", false) {
		t.Fatal("65th direct message accepted")
	}
	if post(m, "root/w", "status", true) {
		t.Fatal("an automatic notification evicted a direct message")
	}

	m = newMailbox()
	big := strings.Repeat("x", MaxTextBytes)
	for i := range MaxMailboxBytes / MaxTextBytes {
		if !post(m, "root/w", big, false) {
			t.Fatalf("128 KiB message %d refused under 1 MiB", i+1)
		}
	}
	if post(m, "root/w", "x", false) {
		t.Fatal("a byte past 1 MiB accepted")
	}

	m = newMailbox()
	post(m, "root/w", "direct", false)
	for range MaxMailboxMessages - 1 {
		post(m, "root/w", "auto", true)
	}
	if !post(m, "root/w", "newest auto", true) {
		t.Fatal("automatic notification not admitted by evicting the oldest")
	}
	page, l := m.lease(MaxMailboxBytes)
	if len(page) != MaxMailboxMessages || page[0].Text != "direct" || page[1].ID != 3 || page[len(page)-1].Text != "newest auto" {
		t.Fatalf("after eviction: %d messages, first %q, second id %d", len(page), page[0].Text, page[1].ID)
	}
	// Every automatic notification is leased: a new one cannot evict any
	// and is dropped; a direct one is refused.
	if post(m, "root/w", "dropped", true) || post(m, "root/w", "refused", false) {
		t.Fatal("a full mailbox of leased messages took another")
	}
	l.resolve(true)
	if _, ok := m.wake(false); ok {
		t.Fatal("committed messages still in the mailbox")
	}
}

// TestMailboxLease: a page is consumed only when its lease commits; a
// restored page is handed out again, whole, in order.
func TestMailboxLease(t *testing.T) {
	m := newMailbox()
	for _, s := range []string{"one", "two", "three"} {
		post(m, "root/w", s, false)
	}
	page, l := m.lease(MaxPageBytes)
	if got := ids(page); len(got) != 3 {
		t.Fatalf("page %v", got)
	}
	if again, _ := m.lease(MaxPageBytes); len(again) != 0 {
		t.Fatal("a leased page was handed out twice")
	}
	post(m, "root/w", "four", false)
	l.resolve(false) // the result was not durable (cut, unsaved, cancelled)
	l.resolve(true)  // a late second answer changes nothing
	page, l = m.lease(MaxPageBytes)
	if got := ids(page); len(got) != 4 || got[0] != 1 || got[3] != 4 {
		t.Fatalf("after restore %v, want 1..4", got)
	}
	l.resolve(true)
	if page, _ := m.lease(MaxPageBytes); len(page) != 0 {
		t.Fatalf("committed page handed out again: %v", ids(page))
	}
}

// TestMailboxLongMessagePages: a message longer than a page is handed out
// in UTF-8-safe parts with continuation offsets; a restored part is handed
// out again from the same offset.
func TestMailboxLongMessagePages(t *testing.T) {
	m := newMailbox()
	long := strings.Repeat("ü€𝄞 ", 5000) // 50 KB of 2-, 3- and 4-byte runes
	post(m, "root/w", long, false)
	post(m, "root/w", "after", false)
	var got strings.Builder
	restored, after := false, false
	for !after {
		page, l := m.lease(MaxPageBytes)
		if len(page) == 0 {
			t.Fatal("ran out of pages")
		}
		if p := page[0]; !restored && p.Offset > 0 {
			restored = true
			l.resolve(false) // the same part comes again
			continue
		}
		for _, p := range page {
			if p.ID != 1 {
				if p.Text != "after" || got.String() != long {
					t.Fatalf("reassembled %d of %d bytes before the next message", got.Len(), len(long))
				}
				after = true
				continue
			}
			if len(p.Text) > MaxPageBytes || !utf8.ValidString(p.Text) || p.Bytes != len(long) || p.Offset != got.Len() {
				t.Fatalf("part at %d: %d bytes, valid %v, bytes %d offset %d", got.Len(), len(p.Text), utf8.ValidString(p.Text), p.Bytes, p.Offset)
			}
			got.WriteString(p.Text)
		}
		l.resolve(true)
	}
	if !restored {
		t.Fatal("no part was restored")
	}
}

// post adds a message to m with the next id of m (1, 2, …).
func post(m *mailbox, from, text string, auto bool) bool {
	m.mu.Lock()
	id := int64(len(m.msgs)) + 1
	for _, b := range m.msgs {
		id = max(id, b.id+1)
	}
	m.mu.Unlock()
	return m.post(id, from, text, auto)
}
