package host

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Title bounds.
const (
	// MaxTitleRunes bounds a title a person sets.
	MaxTitleRunes = 200
	// AutoTitleRunes bounds the title taken from a session's first prompt.
	AutoTitleRunes = 80
)

// CheckTitle returns title cleaned (CleanTitle), or an *InputError when
// nothing is left of it or it is longer than MaxTitleRunes.
func CheckTitle(title string) (string, error) {
	title = CleanTitle(title)
	switch n := utf8.RuneCountInString(title); {
	case title == "":
		return "", inputErrorf("title is required (and must not be only blanks or control characters)")
	case n > MaxTitleRunes:
		return "", inputErrorf("title is %d characters long; at most %d are allowed", n, MaxTitleRunes)
	}
	return title, nil
}

// CleanTitle neutralizes what a title must not carry into a list or a
// terminal: every control, format (bidirectional overrides, zero-width)
// and separator character other than a plain space becomes a space;
// runs of spaces collapse and the ends are trimmed.
func CleanTitle(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if r != ' ' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) ||
			unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)) {
			r = ' '
		}
		if r == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

// AutoTitle is the title a session without one takes from a prompt: its
// first non-blank line, cleaned and bounded (cut at a word boundary when
// one is near, with an ellipsis).
func AutoTitle(text string) string {
	for line := range strings.Lines(text) {
		t := CleanTitle(line)
		if t == "" {
			continue
		}
		if utf8.RuneCountInString(t) <= AutoTitleRunes {
			return t
		}
		r := []rune(t)[:AutoTitleRunes-1]
		if i := strings.LastIndexByte(string(r), ' '); i > len(string(r))/2 {
			return strings.TrimSpace(string(r)[:i]) + "…"
		}
		return strings.TrimSpace(string(r)) + "…"
	}
	return ""
}

// Rename durably sets the session's title (checked with CheckTitle by
// the caller).
func (s *Session) Rename(title string) error { return s.sess.SetTitle(title) }

// TitleFromPrompt gives a session without a title the automatic title of
// text (AutoTitle); it does nothing to a session that has one.
func (s *Session) TitleFromPrompt(text string) error {
	if s.Title() != "" {
		return nil
	}
	title := AutoTitle(text)
	if title == "" {
		return nil
	}
	return s.Rename(title)
}

// Fork creates a new session whose tree is src's active branch from its
// root up to entryID (inclusive), with its agent; src is only read. The
// fork has src's current effect policy: a fork of a session that asks
// before acting asks too.
func (h *Host) Fork(ctx context.Context, src *Session, entryID string, b Binding) (*Session, error) {
	branch, err := src.sess.LoadBranch()
	if err != nil {
		return nil, err
	}
	prefix, err := ForkPrefix(src.ID(), branch, entryID)
	if err != nil {
		return nil, err
	}
	p := src.Broker().Policy()
	return h.ForkFrom(ctx, session.Header{ID: src.ID(), Cwd: src.Cwd(), Title: src.Title()}, entryID, prefix, b, &p)
}

// ForkFrom creates a fork of the session whose header is src, holding
// entries (a chain from a root, ending at entryID), with effect policy
// policy (nil: the launch policy) recorded in the fork's ledger before
// it is returned.
func (h *Host) ForkFrom(ctx context.Context, src session.Header, entryID string, entries []session.Entry, b Binding, policy *tools.Policy) (*Session, error) {
	sess, err := session.CreateFrom(h.rt.SessionsDir, session.Header{
		Cwd: src.Cwd, Title: src.Title, ForkOf: src.ID, ForkEntry: entryID,
	}, entries)
	if err != nil {
		return nil, err
	}
	s, err := h.attach(ctx, sess, "", "", b, policy, true)
	if err != nil {
		_ = sess.Close()
		_ = session.Remove(sess.Path())
		return nil, err
	}
	return s, nil
}

// ForkPrefix returns the active branch up to entryID. The entry must be on
// the active branch, and the prefix must not end with function calls
// whose results it does not hold: the fork's next prompt would otherwise
// meet them as calls interrupted by a crash.
func ForkPrefix(sessionID string, branch []session.Entry, entryID string) ([]session.Entry, error) {
	k := -1
	for i := len(branch) - 1; i >= 0; i-- {
		if branch[i].ID == entryID {
			k = i
			break
		}
	}
	if k < 0 {
		return nil, inputErrorf("no entry %q on the active branch of session %s: use an entry id from octet/session/transcript (octet/session/branch moves the active branch)", entryID, sessionID)
	}
	prefix := branch[:k+1]
	if open := unpairedCalls(prefix); len(open) > 0 {
		return nil, inputErrorf("entry %s leaves tool calls without their results (%s): fork at the entry before that assistant message, or at its last tool result", entryID, strings.Join(open, ", "))
	}
	return prefix, nil
}

// unpairedCalls returns the call ids of function calls in entries that no
// tool result in entries answers, in order.
func unpairedCalls(entries []session.Entry) []string {
	answered := map[string]bool{}
	for _, e := range entries {
		if e.Result != nil {
			answered[e.Result.CallID] = true
		}
	}
	var open []string
	for _, e := range entries {
		for _, it := range e.Items {
			if it.Type == session.ItemFunctionCall && !answered[it.CallID] {
				open = append(open, it.CallID)
			}
		}
	}
	return open
}
