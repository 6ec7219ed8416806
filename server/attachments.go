package server

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/fsroot"
)

// maxAttachmentLabel bounds a labelled attachment's label.
const maxAttachmentLabel = 200

// attachment is one octet/prompt context item: a file or a range of one
// ({uri, range?}), or labelled text ({label, text}).
type attachment struct {
	URI   string    `json:"uri"`
	Range *lspRange `json:"range"`
	Label string    `json:"label"`
	Text  *string   `json:"text"`
}

// withAttachments returns the user's message for the model: text, then
// each attachment as host.WithAttachments shows it. Files are read
// through the session workspace's document overlay (unsaved text of open
// documents), else from disk without following links, inside the
// workspace only.
func (s *Server) withAttachments(workspace, text string, items []attachment) (string, error) {
	if len(items) > host.MaxAttachments {
		return "", invalidParams("context has %d attachments; at most %d are allowed", len(items), host.MaxAttachments)
	}
	atts := make([]host.Attachment, 0, len(items))
	for i, it := range items {
		title, body, err := s.readAttachment(workspace, it)
		if err != nil {
			return "", invalidParams("context[%d]: %v", i, err)
		}
		atts = append(atts, host.Attachment{Title: title, Body: body})
	}
	return host.WithAttachments(text, atts), nil
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
