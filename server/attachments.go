package server

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/fsroot"
	"github.com/octet-agent/octet/provider"
)

// maxAttachmentLabel bounds a labelled attachment's label.
const maxAttachmentLabel = 200

// attachment is one octet/prompt context item: a file or a range of one
// ({uri, range?}), labelled text ({label, text}), or an image ({type:
// "image", mimeType, data}).
type attachment struct {
	URI   string    `json:"uri"`
	Range *lspRange `json:"range"`
	Label string    `json:"label"`
	Text  *string   `json:"text"`
	// Type is "image" for an image, else "" (or "text").
	Type     string `json:"type"`
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

// withAttachments returns the user's message for the model (text, then
// each text attachment as host.WithAttachments shows it) and the images
// attached (host.DecodeImage). Files are read through the session
// workspace's document overlay (unsaved text of open documents), else
// from disk without following links, inside the workspace only.
func (s *Server) withAttachments(workspace, text string, items []attachment) (string, []provider.Image, error) {
	var atts []host.Attachment
	var imgs []provider.Image
	for i, it := range items {
		switch it.Type {
		case "image":
			if it.URI != "" || it.Text != nil || it.Label != "" {
				return "", nil, invalidParams("context[%d]: an image is {type: \"image\", mimeType, data}, without uri, label or text", i)
			}
			img, err := host.DecodeImage(it.MimeType, it.Data)
			if err != nil {
				return "", nil, invalidParams("context[%d]: %v", i, err)
			}
			imgs = append(imgs, img)
			continue
		case "", "text":
		default:
			return "", nil, invalidParams("context[%d]: type %q is not image or text", i, host.Clip(it.Type, 40))
		}
		if len(atts) == host.MaxAttachments {
			return "", nil, invalidParams("context has more than %d text attachments", host.MaxAttachments)
		}
		title, body, err := s.readAttachment(workspace, it)
		if err != nil {
			return "", nil, invalidParams("context[%d]: %v", i, err)
		}
		atts = append(atts, host.Attachment{Title: title, Body: body})
	}
	if err := host.CheckImages(imgs); err != nil {
		return "", nil, invalidParams("%v", err)
	}
	return host.WithAttachments(text, atts), imgs, nil
}

// readAttachment returns an attachment's title and text.
func (s *Server) readAttachment(workspace string, it attachment) (title, body string, err error) {
	switch {
	case it.URI != "" && (it.Text != nil || it.Label != ""):
		return "", "", fmt.Errorf("give either {uri, range?} or {label, text}, not both")
	case it.URI == "":
		if it.Text == nil {
			return "", "", fmt.Errorf("an attachment needs uri, or label and text")
		}
		label := strings.ToValidUTF8(it.Label, "\uFFFD")
		if label == "" {
			label = "text"
		}
		label, _ = host.ClipText(label, maxAttachmentLabel)
		return fmt.Sprintf("%q", label), strings.ToValidUTF8(*it.Text, "\uFFFD"), nil
	}
	path := uriToPath(it.URI)
	if path == "" {
		return "", "", fmt.Errorf("uri %q is not a file:// URI of an absolute path", it.URI)
	}
	if !within(workspace, path) || path == workspace {
		return "", "", fmt.Errorf("%s is not a file inside the session's workspace %s", path, workspace)
	}
	rel, _ := filepath.Rel(workspace, path)
	data, source, err := s.attachmentText(workspace, path, rel)
	if err != nil {
		return "", "", err
	}
	title = rel + source
	if it.Range != nil {
		enc := s.docs.encoding()
		start := offsetOf(data, it.Range.Start, enc)
		end := max(start, offsetOf(data, it.Range.End, enc))
		data = data[start:end]
		title = fmt.Sprintf("%s lines %d-%d%s", rel, it.Range.Start.Line+1, it.Range.End.Line+1, source)
	}
	return title, strings.ToValidUTF8(string(data), "\uFFFD"), nil
}

// attachmentText reads path: the open document from the overlay, else
// the file beneath the workspace with no-follow resolution.
func (s *Server) attachmentText(workspace, path, rel string) ([]byte, string, error) {
	if ov := s.docs.forWorkspace(workspace); ov != nil {
		if doc, ok := ov.Document(path); ok && !doc.Untracked {
			return doc.Text, " (editor buffer, unsaved changes included)", nil
		}
	}
	root, err := fsroot.Open(workspace)
	if err != nil {
		return nil, "", err
	}
	defer root.Close()
	data, _, err := root.ReadFile(rel, fsroot.MaxFileBytes)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", rel, err)
	}
	return data, "", nil
}

// encoding is the negotiated position encoding.
func (d *documents) encoding() positionEncoding {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.enc
}
