package session

import (
	"fmt"
	"log/slog"
)

// KindTitle is a title record: {"kind":"title","title":"…"}. It renames
// the session without rewriting its header (the ledger is append-only);
// the last title record wins over the header's title.
const KindTitle = "title"

// TitleRecord returns a record renaming the session to title.
func TitleRecord(title string) Record { return Record{Kind: KindTitle, Title: title} }

// SetTitle durably renames the session (a title record). The header is
// left as it was: [Session.Title] and [List] report the new title.
func (s *Session) SetTitle(title string) error {
	if err := s.Append(TitleRecord(title)); err != nil {
		return fmt.Errorf("rename session %s: %w", s.hdr.ID, err)
	}
	return nil
}

// Title returns the session's current title: that of its last title
// record, or the header's.
func (s *Session) Title() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ix.titled {
		return s.ix.title
	}
	return s.hdr.Title
}

// decodeTitle decodes the title of a title record line.
func decodeTitle(line []byte) (string, error) {
	title := ""
	d := decoder{b: line}
	d.obj(func(key []byte) {
		if string(key) == "title" {
			title = string(d.strBytes())
			return
		}
		d.skip(0)
	})
	d.end()
	if d.err != nil {
		return "", d.err
	}
	return title, nil
}

// setTitle records the title record at loc (folded or written).
func (ix *index) setTitle(title string, loc recLoc) {
	ix.title, ix.titled, ix.titleLoc = title, true, loc
}

// readTitleAt reads the title record line at off in the session file at
// path (as the listing cache locates it); ok is false when the line there
// is not a complete title record, so the caller reads the file instead.
func readTitleAt(path string, f interface {
	ReadAt([]byte, int64) (int, error)
}, off int64) (title string, ok bool) {
	buf := make([]byte, 4096)
	for {
		n, err := f.ReadAt(buf, off)
		for i := range n {
			if buf[i] == '\n' {
				var m meta
				line := buf[:i]
				if scanMeta(line, &m, true) != nil || string(m.kind) != KindTitle {
					return "", false
				}
				t, err := decodeTitle(line)
				if err != nil {
					slog.Debug("session: listing cache names an unreadable title", "path", path, "offset", off)
					return "", false
				}
				return t, true
			}
		}
		if err != nil || len(buf) >= maxListHeader {
			return "", false
		}
		buf = make([]byte, 2*len(buf))
	}
}
