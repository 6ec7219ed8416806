package acp

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/fsroot"
	"github.com/octet-agent/octet/provider"
)

// contentBlock is one ACP ContentBlock of a prompt.
type contentBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	URI      string `json:"uri"`
	Name     string `json:"name"`
	Data     string `json:"data"`
	MimeType string `json:"mimeType"`
	Resource *struct {
		URI      string  `json:"uri"`
		Text     *string `json:"text"`
		Blob     *string `json:"blob"`
		MimeType string  `json:"mimeType"`
	} `json:"resource"`
}

// promptInput is what a prompt's blocks give the model: the user's
// message and the images attached to it.
type promptInput struct {
	text   string
	images []provider.Image
}

// readPrompt builds the user's message from a prompt's blocks: the text
// blocks in order, then each resource_link (a workspace file's content,
// read without following links; any other URI is named only) and each
// embedded resource as an attachment, the same delimited blocks, count
// and size bounds as octet/prompt's context attachments. Image blocks
// (and embedded resources whose blob is an image octet takes) are the
// prompt's images, checked by their bytes (host.DecodeImage); audio is
// refused, as promptCapabilities says.
func readPrompt(cwd string, blocks []contentBlock) (promptInput, error) {
	if len(blocks) == 0 {
		return promptInput{}, invalidParams("prompt has no content blocks")
	}
	var in promptInput
	var text strings.Builder
	var atts []host.Attachment
	for i, b := range blocks {
		switch b.Type {
		case "text":
			if text.Len() > 0 {
				text.WriteString("\n\n")
			}
			text.WriteString(b.Text)
		case "resource_link":
			if b.URI == "" {
				return promptInput{}, invalidParams("prompt[%d]: resource_link without uri", i)
			}
			atts = append(atts, linkAttachment(cwd, b.URI, b.Name))
		case "resource":
			att, img, err := embeddedResource(i, b)
			if err != nil {
				return promptInput{}, err
			}
			if img != nil {
				in.images = append(in.images, *img)
			} else {
				atts = append(atts, att)
			}
		case "image":
			img, err := host.DecodeImage(b.MimeType, b.Data)
			if err != nil {
				return promptInput{}, invalidParams("prompt[%d]: %v", i, err)
			}
			in.images = append(in.images, img)
		case "audio":
			return promptInput{}, invalidParams("prompt[%d]: octet does not take audio content (promptCapabilities says so)", i)
		default:
			return promptInput{}, invalidParams("prompt[%d]: unknown content type %q", i, truncate(b.Type, 40))
		}
	}
	if len(atts) > host.MaxAttachments {
		return promptInput{}, invalidParams("prompt has %d resources; at most %d are allowed", len(atts), host.MaxAttachments)
	}
	if err := host.CheckImages(in.images); err != nil {
		return promptInput{}, invalidParams("%v", err)
	}
	in.text = host.WithAttachments(text.String(), atts)
	return in, nil
}

// embeddedResource reads an embedded resource block: text is an
// attachment; a blob that is an image octet takes is an image; any other
// blob is named without its content.
func embeddedResource(i int, b contentBlock) (host.Attachment, *provider.Image, error) {
	r := b.Resource
	if r == nil || r.URI == "" {
		return host.Attachment{}, nil, invalidParams("prompt[%d]: resource without resource.uri", i)
	}
	switch {
	case r.Text != nil:
		return host.Attachment{Title: r.URI, Body: *r.Text}, nil, nil
	case r.Blob != nil && strings.HasPrefix(r.MimeType, "image/"):
		img, err := host.DecodeImage(r.MimeType, *r.Blob)
		if err != nil {
			return host.Attachment{Title: r.URI, Body: fmt.Sprintf("[image resource (%s) not included: %v]", r.MimeType, err)}, nil, nil
		}
		return host.Attachment{}, &img, nil
	default:
		return host.Attachment{Title: r.URI, Body: fmt.Sprintf("[binary resource (%s) not shown]", firstNonEmpty(r.MimeType, "unknown type"))}, nil, nil
	}
}

// clip cuts s to at most n bytes at a rune boundary.
func clip(s string, n int) string {
	s, _ = host.ClipText(s, n)
	return s
}

// linkAttachment reads a resource_link: a file:// URI of a file inside
// the workspace is read (bounded, no links followed); anything else is
// named for the model without content.
func linkAttachment(cwd, uri, name string) host.Attachment {
	title := firstNonEmpty(name, uri) + " (" + uri + ")"
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" {
		return host.Attachment{Title: title, Body: "[a link octet does not open; its content is not included]"}
	}
	rel, err := filepath.Rel(cwd, filepath.Clean(filepath.FromSlash(u.Path)))
	if err != nil || !filepath.IsLocal(rel) {
		return host.Attachment{Title: title, Body: "[outside the workspace; not read]"}
	}
	root, err := fsroot.Open(cwd)
	if err != nil {
		return host.Attachment{Title: title, Body: "[cannot open the workspace: " + err.Error() + "]"}
	}
	defer root.Close()
	data, _, err := root.ReadFile(filepath.ToSlash(rel), int64(host.MaxAttachmentsBytes))
	if err != nil {
		return host.Attachment{Title: title, Body: "[not read: " + err.Error() + "]"}
	}
	if !utf8.Valid(data) {
		return host.Attachment{Title: title, Body: "[binary file; not shown]"}
	}
	return host.Attachment{Title: filepath.ToSlash(rel), Body: string(data)}
}
