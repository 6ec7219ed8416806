package acp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/internal/fsroot"
	"github.com/octet-agent/octet/tools"
)

// clientReadTimeout bounds one fs/read_text_file.
const clientReadTimeout = 10 * time.Second

// clientFiles is the ACP form of buffer coherence: tools.Documents over
// the client's fs/read_text_file (what the editor has, unsaved text
// included) and fs/write_text_file (an approved change applied by the
// editor). Only files inside the session's workspace go through it; when
// the client cannot give a file (an error), or the file is not on disk,
// the tools use the disk as always.
type clientFiles struct {
	s           *acpSession
	root        string
	read, write bool
}

var _ tools.Documents = (*clientFiles)(nil)

// inside reports whether path is in the workspace.
func (f *clientFiles) inside(path string) bool {
	rel, err := filepath.Rel(f.root, path)
	return err == nil && filepath.IsLocal(rel)
}

// fetch reads path through the client; a cancel of the session's prompt
// ends the read (the tool's Document has no context of its own).
func (f *clientFiles) fetch(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, clientReadTimeout)
	defer cancel()
	defer f.s.calls.track(cancel)()
	if t := f.s.current(); t != nil && t.cancelled.Load() {
		return nil, errPromptCancelled
	}
	var resp struct {
		Content *string `json:"content"`
	}
	if err := f.s.srv.c.call(ctx, "fs/read_text_file", map[string]any{"sessionId": f.s.ID(), "path": path}, &resp); err != nil {
		return nil, err
	}
	if resp.Content == nil {
		return nil, errors.New("fs/read_text_file answered without content")
	}
	return []byte(*resp.Content), nil
}

// version stands for the editor version ACP does not have: a checksum of
// the text, so an approval's digest binds the text it was computed on.
func version(text []byte) int32 { return int32(crc32.ChecksumIEEE(text) & 0x7fffffff) }

// Document implements tools.Documents: the client's text of path. A
// file that is not on disk is not asked for (octet is creating it; a
// client may answer "" for a file it does not have, which is not an empty
// file). A client text that is the disk's as a buffer read renders it
// (its lines joined with "\n", as avante's read does: without the final
// newline, a CRLF file's line endings as LF) is the disk's text: neither
// is a change, and a change computed on the disk's text keeps them.
func (f *clientFiles) Document(path string) (tools.Document, bool) {
	if !f.read || !f.inside(path) {
		return tools.Document{}, false
	}
	disk, exists := f.disk(path)
	if !exists {
		f.s.srv.log.Debug("not on disk: not asked of the client", "path", path)
		return tools.Document{}, false
	}
	text, err := f.fetch(context.Background(), path)
	if err != nil {
		f.s.srv.log.Debug("fs/read_text_file: using the disk", "path", path, "error", err)
		return tools.Document{}, false
	}
	if disk != nil && bufferOf(text, disk) {
		text = disk
	}
	return tools.Document{Text: text, Version: version(text)}, true
}

// disk reads path from the disk without following links: exists is
// false when there is no such file, data nil when it cannot be read as a
// regular file of at most tools.MaxFileBytes.
func (f *clientFiles) disk(path string) (data []byte, exists bool) {
	rel, err := filepath.Rel(f.root, path)
	if err != nil {
		return nil, true
	}
	root, err := fsroot.Open(f.root)
	if err != nil {
		return nil, true
	}
	defer root.Close()
	data, _, err = root.ReadFile(filepath.ToSlash(rel), tools.MaxFileBytes)
	switch {
	case fsroot.IsNotExist(err):
		return nil, false
	case err != nil:
		return nil, true
	}
	return data, true
}

// bufferOf reports whether text is full as an editor's buffer read
// renders it: full, or its lines joined with "\n" (a CRLF file's lines
// read as LF, as Neovim's buffer lines and Zed's buffers have them), with
// or without its final line ending.
func bufferOf(text, full []byte) bool {
	if bytes.Equal(text, full) {
		return true
	}
	forms := [][]byte{full}
	if bytes.Contains(full, []byte("\r\n")) {
		forms = append(forms, bytes.ReplaceAll(full, []byte("\r\n"), []byte("\n")))
	}
	for _, f := range forms {
		rest, ok := bytes.CutPrefix(f, text)
		if ok && (len(rest) == 0 || string(rest) == "\n" || string(rest) == "\r\n") {
			return true
		}
	}
	return false
}

// sameText reports whether the client's text a is b, up to how a buffer
// read renders a file (bufferOf): its final newline, which a save may
// also add, and CRLF line endings read as LF.
func sameText(a, b []byte) bool {
	return bufferOf(a, b) || bufferOf(b, a)
}

// AppliesEdits implements tools.Documents.
func (f *clientFiles) AppliesEdits() bool { return f.write && f.read }

// Apply implements tools.Documents: the change is written through
// fs/write_text_file once the client's text is still base's.
func (f *clientFiles) Apply(ctx context.Context, path string, base tools.Document, updated []byte) error {
	if !f.inside(path) {
		return fmt.Errorf("%s is outside the workspace", path)
	}
	if !utf8.Valid(updated) {
		return errors.New("the new text is not UTF-8, which the editor's fs/write_text_file cannot take")
	}
	now, err := f.fetch(ctx, path)
	if err != nil {
		return fmt.Errorf("cannot read %s from the editor before writing it: %w", path, err)
	}
	if !sameText(now, base.Text) {
		return fmt.Errorf("%s changed in the editor since octet read it: read it again", path)
	}
	err = f.s.srv.c.call(ctx, "fs/write_text_file", map[string]any{"sessionId": f.s.ID(), "path": path, "content": string(updated)}, nil)
	if err != nil {
		return fmt.Errorf("the editor did not write %s: %w", path, err)
	}
	return nil
}

// clientCalls are a session's requests to the client for its tools (fs
// reads) still waiting: a cancel of the session's prompt ends them.
type clientCalls struct {
	mu      sync.Mutex
	next    int
	cancels map[int]context.CancelFunc
}

// track adds a call ended by cancel; done removes it.
func (c *clientCalls) track(cancel context.CancelFunc) (done func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancels == nil {
		c.cancels = map[int]context.CancelFunc{}
	}
	c.next++
	id := c.next
	c.cancels[id] = cancel
	return func() {
		c.mu.Lock()
		delete(c.cancels, id)
		c.mu.Unlock()
	}
}

// cancelAll ends every call waiting.
func (c *clientCalls) cancelAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.cancels {
		cancel()
	}
}
