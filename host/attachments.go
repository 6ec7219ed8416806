package host

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds of the context a prompt carries (octet/prompt's context, ACP's
// resources).
const (
	// MaxAttachments is how many attachments one prompt may carry; more
	// are refused.
	MaxAttachments = 16
	// MaxAttachmentBytes is how much of one attachment the model is given;
	// a longer one is cut, with a note saying how much was left out.
	MaxAttachmentBytes = 64 << 10
	// MaxAttachmentsBytes bounds all attachments of one prompt together;
	// later attachments are cut to what remains.
	MaxAttachmentsBytes = 256 << 10
)

// Attachment is one item of context as the model is shown it: a title
// naming what it is and its text.
type Attachment struct{ Title, Body string }

// WithAttachments returns the user's message for the model: text, then
// each attachment in a delimited block naming what it is, each cut to
// MaxAttachmentBytes and all together to MaxAttachmentsBytes (a cut one
// says how much was left out). The caller refuses more than
// MaxAttachments.
func WithAttachments(text string, atts []Attachment) string {
	if len(atts) == 0 {
		return text
	}
	var b strings.Builder
	b.WriteString(text)
	b.WriteString("\n\nThe user attached this context:\n")
	budget := MaxAttachmentsBytes
	for i, a := range atts {
		shown, cut := ClipText(a.Body, min(MaxAttachmentBytes, budget))
		budget -= len(shown)
		fmt.Fprintf(&b, "\n--- attachment %d: %s ---\n%s", i+1, a.Title, shown)
		if !strings.HasSuffix(shown, "\n") {
			b.WriteByte('\n')
		}
		if cut > 0 {
			fmt.Fprintf(&b, "[attachment cut: %d more bytes not shown; use the read tool for the rest]\n", cut)
		}
		fmt.Fprintf(&b, "--- end of attachment %d ---\n", i+1)
	}
	return b.String()
}

// ClipText cuts s to at most n bytes on a UTF-8 boundary and reports how
// many bytes were left out.
func ClipText(s string, n int) (string, int) {
	if len(s) <= n {
		return s, 0
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], len(s) - cut
}
