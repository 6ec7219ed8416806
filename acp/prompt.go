package acp

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/octet-agent/octet/internal/fsroot"
	"github.com/octet-agent/octet/server"
)

// contentBlock is one ACP ContentBlock of a prompt.
type contentBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	URI      string `json:"uri"`
	Name     string `json:"name"`
	Resource *struct {
		URI      string  `json:"uri"`
		Text     *string `json:"text"`
		Blob     *string `json:"blob"`
		MimeType string  `json:"mimeType"`
	} `json:"resource"`
}

// promptText builds the user's message from a prompt's blocks: the text
// blocks in order, then each resource_link (a workspace file's content,
// read without following links; any other URI is named only) and each
// embedded resource as an attachment, the same delimited blocks, count
// and size bounds as octet/prompt's context attachments.
func promptText(cwd string, blocks []contentBlock) (string, error) {
	if len(blocks) == 0 {
		return "", invalidParams("prompt has no content blocks")
	}
	var text strings.Builder
	var atts []attachment
	for i, b := range blocks {
		switch b.Type {
		case "text":
			if text.Len() > 0 {
				text.WriteString("\n\n")
			}
			text.WriteString(b.Text)
		case "resource_link":
			if b.URI == "" {
				return "", invalidParams("prompt[%d]: resource_link without uri", i)
			}
			atts = append(atts, linkAttachment(cwd, b.URI, b.Name))
		case "resource":
			r := b.Resource
			if r == nil || r.URI == "" {
				return "", invalidParams("prompt[%d]: resource without resource.uri", i)
			}
			switch {
			case r.Text != nil:
				atts = append(atts, attachment{title: r.URI, body: *r.Text})
			default:
				atts = append(atts, attachment{title: r.URI, body: fmt.Sprintf("[binary resource (%s) not shown]", firstNonEmpty(r.MimeType, "unknown type"))})
			}
		case "image", "audio":
			return "", invalidParams("prompt[%d]: octet does not take %s content (promptCapabilities says so)", i, b.Type)
		default:
			return "", invalidParams("prompt[%d]: unknown content type %q", i, truncate(b.Type, 40))
		}
	}
	if len(atts) > server.MaxAttachments {
		return "", invalidParams("prompt has %d resources; at most %d are allowed", len(atts), server.MaxAttachments)
	}
	return withAttachments(text.String(), atts), nil
}

// attachment is one resource of a prompt, as the model is shown it.
type attachment struct{ title, body string }

func withAttachments(text string, atts []attachment) string {
	if len(atts) == 0 {
		return text
	}
	var b strings.Builder
	b.WriteString(text)
	b.WriteString("\n\nThe user attached this context:\n")
	budget := server.MaxAttachmentsBytes
	for i, a := range atts {
		shown := clip(a.body, min(server.MaxAttachmentBytes, budget))
		budget -= len(shown)
		fmt.Fprintf(&b, "\n--- attachment %d: %s ---\n%s", i+1, a.title, shown)
		if !strings.HasSuffix(shown, "\n") {
			b.WriteByte('\n')
		}
		if left := len(a.body) - len(shown); left > 0 {
			fmt.Fprintf(&b, "[attachment cut: %d more bytes not shown; use the read tool for the rest]\n", left)
		}
		fmt.Fprintf(&b, "--- end of attachment %d ---\n", i+1)
	}
	return b.String()
}

// clip cuts s to at most n bytes at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// linkAttachment reads a resource_link: a file:// URI of a file inside
// the workspace is read (bounded, no links followed); anything else is
// named for the model without content.
func linkAttachment(cwd, uri, name string) attachment {
	title := firstNonEmpty(name, uri) + " (" + uri + ")"
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" {
		return attachment{title: title, body: "[a link octet does not open; its content is not included]"}
	}
	rel, err := filepath.Rel(cwd, filepath.Clean(filepath.FromSlash(u.Path)))
	if err != nil || !filepath.IsLocal(rel) {
		return attachment{title: title, body: "[outside the workspace; not read]"}
	}
	root, err := fsroot.Open(cwd)
	if err != nil {
		return attachment{title: title, body: "[cannot open the workspace: " + err.Error() + "]"}
	}
	defer root.Close()
	data, _, err := root.ReadFile(filepath.ToSlash(rel), int64(server.MaxAttachmentsBytes))
	if err != nil {
		return attachment{title: title, body: "[not read: " + err.Error() + "]"}
	}
	if !utf8.Valid(data) {
		return attachment{title: title, body: "[binary file; not shown]"}
	}
	return attachment{title: filepath.ToSlash(rel), body: string(data)}
}
