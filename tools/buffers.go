package tools

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
)

// EditorBuffers is implemented by a Documents whose editor can tell its
// buffers from the files on disk. The file tools read and change the
// buffers; a command (bash) or an extension reads the disk. Before such a
// call the broker asks the editor to save what the agent changed there,
// so buffers and commands agree, and names what still differs in the
// call's approval and result.
type EditorBuffers interface {
	// SaveAgentEdits asks the editor to save the open documents octet
	// changed through it that are still unsaved, saying why (reason,
	// which the editor may show when it asks the user first). It
	// returns once the editor has answered, or could not be asked (no
	// such documents, an editor that cannot save, ctx ended).
	SaveAgentEdits(ctx context.Context, reason string)
	// Unsaved returns the absolute paths of the open documents whose
	// text in the editor differs from their file on disk, sorted.
	Unsaved() []string
}

// BufferGuard keeps commands and editor buffers in agreement for one
// session (see EditorBuffers). A nil *BufferGuard does nothing.
type BufferGuard struct {
	buffers EditorBuffers
	root    string
}

// NewBufferGuard returns the guard of a session working in root whose
// tools see docs, or nil when docs does not implement EditorBuffers.
func NewBufferGuard(docs Documents, root string) *BufferGuard {
	eb, ok := docs.(EditorBuffers)
	if !ok || eb == nil {
		return nil
	}
	return &BufferGuard{buffers: eb, root: filepath.Clean(root)}
}

// readsDisk reports whether a call of effect e reads the files on disk
// rather than the editor's buffers: a process (bash) or an extension.
func readsDisk(e Effect) bool { return e == HostProcess || e == Extension }

// maxUnsavedNames bounds the files an unsaved note names.
const maxUnsavedNames = 20

// before asks the editor to save the agent's edits before tool runs, and
// returns the files that still differ from the disk, as the session
// names them (workspace-relative within root).
func (g *BufferGuard) before(ctx context.Context, tool string) []string {
	if g == nil {
		return nil
	}
	g.buffers.SaveAgentEdits(ctx, fmt.Sprintf("octet is about to run %s, which reads the files on disk, not the editor's buffers", tool))
	return g.unsaved()
}

// unsaved is Unsaved as the session names the files.
func (g *BufferGuard) unsaved() []string {
	if g == nil {
		return nil
	}
	paths := g.buffers.Unsaved()
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if rel, err := filepath.Rel(g.root, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			p = rel
		}
		out = append(out, p)
	}
	return out
}

// unsavedNote is the sentence an approval and a result carry about the
// files whose editor text differs from the disk ("" for none).
func unsavedNote(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	names := paths[:min(len(paths), maxUnsavedNames)]
	list := strings.Join(names, ", ")
	if more := len(paths) - len(names); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("Not saved in the editor (this call reads the file on disk, not the editor's text): %s", list)
}

// withUnsaved adds the unsaved note to a result, in its text (first,
// so a long output cut to the result bound keeps it) and its details
// (editorUnsaved).
func withUnsaved(res Result, paths []string) Result {
	note := unsavedNote(paths)
	if note == "" {
		return res
	}
	res.Text = note + "\n\n" + res.Text
	details := make(map[string]any, len(res.Details)+1)
	maps.Copy(details, res.Details)
	details["editorUnsaved"] = paths
	res.Details = details
	return res
}
