package host_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/octet-agent/octet/host"
)

// TestWithAttachmentsBounds: one attachment is cut at host.MaxAttachmentBytes
// on a rune boundary with a note; all of them together stay within
// host.MaxAttachmentsBytes; without attachments the text is unchanged.
func TestWithAttachmentsBounds(t *testing.T) {
	if got := host.WithAttachments("hi", nil); got != "hi" {
		t.Errorf("no attachments: %q", got)
	}
	big := strings.Repeat("é", host.MaxAttachmentBytes) // 2 bytes each
	atts := slices.Repeat([]host.Attachment{{Title: "big", Body: big}}, host.MaxAttachments)
	out := host.WithAttachments("hi", atts)
	if len(out) > host.MaxAttachmentsBytes+host.MaxAttachments*200 {
		t.Errorf("%d bytes for %d attachments", len(out), len(atts))
	}
	if !strings.Contains(out, "[attachment cut: 65536 more bytes not shown") {
		t.Errorf("first attachment not cut at host.MaxAttachmentBytes with a note")
	}
	if !strings.HasPrefix(out, "hi\n\nThe user attached this context:\n\n--- attachment 1: big ---\n") {
		t.Errorf("message starts %q", out[:80])
	}
	if strings.ContainsRune(out, '\uFFFD') {
		t.Errorf("an attachment was cut inside a rune")
	}
}
