package host

import (
	"slices"
	"strings"
	"testing"
)

// TestWithAttachmentsBounds: one attachment is cut at MaxAttachmentBytes
// on a rune boundary with a note; all of them together stay within
// MaxAttachmentsBytes; without attachments the text is unchanged.
func TestWithAttachmentsBounds(t *testing.T) {
	if got := WithAttachments("hi", nil); got != "hi" {
		t.Errorf("no attachments: %q", got)
	}
	big := strings.Repeat("é", MaxAttachmentBytes) // 2 bytes each
	atts := slices.Repeat([]Attachment{{Title: "big", Body: big}}, MaxAttachments)
	out := WithAttachments("hi", atts)
	if len(out) > MaxAttachmentsBytes+MaxAttachments*200 {
		t.Errorf("%d bytes for %d attachments", len(out), len(atts))
	}
	if !strings.Contains(out, "[attachment cut: 65536 more bytes not shown") {
		t.Errorf("first attachment not cut at MaxAttachmentBytes with a note")
	}
	if !strings.HasPrefix(out, "hi\n\nThe user attached this context:\n\n--- attachment 1: big ---\n") {
		t.Errorf("message starts %q", out[:80])
	}
	if strings.ContainsRune(out, '\uFFFD') {
		t.Errorf("an attachment was cut inside a rune")
	}
}
