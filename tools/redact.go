package tools

import (
	"bytes"
	"slices"
	"sort"
	"strings"

	"github.com/octet-agent/octet/changes"
)

// RedactedSecret replaces every occurrence of a known secret value.
const RedactedSecret = "[REDACTED]"

// minSecretBytes is the shortest value a Redactor accepts: shorter values
// would match ordinary text.
const minSecretBytes = 8

// Redactor replaces the exact values of secrets the host knows (the
// provider API key) in text that would otherwise reach the model, the
// editor or a session file. It is defence in depth behind keeping secrets
// out of tool processes: a tool that reads the value from somewhere octet
// cannot close (a parent's environment, a file) still cannot hand it on
// verbatim. It matches exact bytes only; an encoded copy (base64, split
// across lines) is not recognised.
//
// A nil *Redactor redacts nothing. A Redactor is immutable and safe for
// concurrent use.
type Redactor struct {
	secrets [][]byte // longest first, so a secret containing another wins
	maxLen  int
}

// NewRedactor returns a Redactor for the given secret values. Empty
// values and values shorter than 8 bytes are ignored; it returns nil when
// nothing is left.
func NewRedactor(secrets ...string) *Redactor {
	var r Redactor
	for _, s := range secrets {
		if len(s) < minSecretBytes {
			continue
		}
		r.secrets = append(r.secrets, []byte(s))
		r.maxLen = max(r.maxLen, len(s))
	}
	if len(r.secrets) == 0 {
		return nil
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return &r
}

// String returns s with every secret value replaced by RedactedSecret.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, sec := range r.secrets {
		if strings.Contains(s, string(sec)) {
			s = strings.ReplaceAll(s, string(sec), RedactedSecret)
		}
	}
	return s
}

// Bytes returns b with every secret value replaced; b itself is returned
// when it holds none.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil {
		return b
	}
	for _, sec := range r.secrets {
		if bytes.Contains(b, sec) {
			b = bytes.ReplaceAll(b, sec, []byte(RedactedSecret))
		}
	}
	return b
}

// union returns a Redactor of the secrets of r and o, and whether o
// knows one r does not.
func (r *Redactor) union(o *Redactor) (*Redactor, bool) {
	if o == nil {
		return r, false
	}
	var all []string
	grew := false
	if r != nil {
		for _, sec := range r.secrets {
			all = append(all, string(sec))
		}
	}
	for _, sec := range o.secrets {
		if !slices.Contains(all, string(sec)) {
			all, grew = append(all, string(sec)), true
		}
	}
	if !grew {
		return r, false
	}
	return NewRedactor(all...), true
}

// Contains reports whether b holds a secret value.
func (r *Redactor) Contains(b []byte) bool {
	if r == nil {
		return false
	}
	for _, sec := range r.secrets {
		if bytes.Contains(b, sec) {
			return true
		}
	}
	return false
}

// Value returns v with secrets replaced in every string it holds: v
// itself or the elements of the maps and slices JSON decoding produces
// (map[string]any, []any, []string). Other values are returned as they
// are.
func (r *Redactor) Value(v any) any {
	if r == nil {
		return v
	}
	switch v := v.(type) {
	case string:
		return r.String(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[r.String(k)] = r.Value(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = r.Value(e)
		}
		return out
	case []string:
		out := make([]string, len(v))
		for i, e := range v {
			out[i] = r.String(e)
		}
		return out
	}
	return v
}

// Result returns res with secrets replaced in its text and details.
func (r *Redactor) Result(res Result) Result {
	if r == nil {
		return res
	}
	res.Text = r.String(res.Text)
	if res.Details != nil {
		res.Details = r.Value(res.Details).(map[string]any)
	}
	if res.Changes != nil {
		recs := make([]changes.Record, len(res.Changes))
		for i, c := range res.Changes {
			c.Path, c.Diff, c.Note = r.String(c.Path), r.String(c.Diff), r.String(c.Note)
			recs[i] = c
		}
		res.Changes = recs
	}
	if res.CannotUndo != nil {
		res.CannotUndo = slices.Clone(res.CannotUndo)
		for i, s := range res.CannotUndo {
			res.CannotUndo[i] = r.String(s)
		}
	}
	return res
}

// Stream returns a streaming redactor that writes redacted data to emit.
// Because a secret may straddle two writes, it holds back a suffix that
// could begin a secret (at most the longest secret less one byte) until
// more data or Flush arrives. emit must not keep the slice it is given.
func (r *Redactor) Stream(emit func([]byte)) *RedactStream {
	return &RedactStream{r: r, emit: emit}
}

// RedactStream redacts a byte stream written in arbitrary pieces. It is
// not safe for concurrent use: one stream has one writer.
type RedactStream struct {
	r    *Redactor
	emit func([]byte)
	held []byte
	buf  []byte // reused for held+p when something was held back
}

// Write redacts p together with the bytes held back from earlier writes
// and emits everything that can no longer be the start of a secret. It
// never fails.
func (s *RedactStream) Write(p []byte) (int, error) {
	if s.r == nil {
		if len(p) > 0 {
			s.emit(p)
		}
		return len(p), nil
	}
	// Usually nothing is held back: redact p where it is, without a copy.
	buf := p
	if len(s.held) > 0 {
		s.buf = append(append(s.buf[:0], s.held...), p...)
		buf = s.buf
	}
	buf = s.r.Bytes(buf) // buf itself unless a secret was replaced
	// Hold back only a suffix that is a prefix of some secret; anything
	// before it is final.
	keep := s.partialSuffix(buf, min(len(buf), s.r.maxLen-1))
	if out := buf[:len(buf)-keep]; len(out) > 0 {
		s.emit(out)
	}
	s.held = append(s.held[:0], buf[len(buf)-keep:]...)
	return len(p), nil
}

// partialSuffix returns the length of the longest suffix of buf, at most
// limit bytes, that is a proper prefix of a secret.
func (s *RedactStream) partialSuffix(buf []byte, limit int) int {
	for n := limit; n > 0; n-- {
		tail := buf[len(buf)-n:]
		for _, sec := range s.r.secrets {
			if len(sec) > n && bytes.HasPrefix(sec, tail) {
				return n
			}
		}
	}
	return 0
}

// Flush emits the held-back bytes (the stream ended).
func (s *RedactStream) Flush() {
	if len(s.held) > 0 {
		s.emit(s.held)
		s.held = nil
	}
}
