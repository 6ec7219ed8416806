package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/octet-agent/octet/session"
)

// Transcript page bounds.
const (
	// DefaultTranscriptLimit and MaxTranscriptLimit bound the entries of
	// one transcript page.
	DefaultTranscriptLimit = 50
	MaxTranscriptLimit     = 500
	// MaxTranscriptPageBytes bounds the encoded entries of one page; a
	// page always holds at least one entry.
	MaxTranscriptPageBytes = 1 << 20
	// MaxTranscriptEntryBytes bounds one encoded entry: longer texts are
	// cut (marked truncated), so no page is ever unbounded.
	MaxTranscriptEntryBytes = 256 << 10
)

// TranscriptEntry is one session entry as a transcript shows it: opaque
// reasoning content is left out.
type TranscriptEntry struct {
	ID         string           `json:"id"`
	Parent     string           `json:"parent,omitempty"`
	Time       time.Time        `json:"time"`
	Type       string           `json:"type"`
	RunID      string           `json:"runId,omitempty"`
	Text       string           `json:"text,omitempty"`
	Images     []ImageView      `json:"images,omitempty"`
	Items      []TranscriptItem `json:"items,omitempty"`
	StopReason string           `json:"stopReason,omitempty"`
	Result     *TranscriptTool  `json:"result,omitempty"`
	Summary    string           `json:"summary,omitempty"`
}

// TranscriptItem is one item of an assistant entry.
type TranscriptItem struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	CallID    string `json:"callId,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// TranscriptTool is a tool result.
type TranscriptTool struct {
	CallID  string         `json:"callId"`
	Tool    string         `json:"tool"`
	Text    string         `json:"text"`
	IsError bool           `json:"isError"`
	Details map[string]any `json:"details,omitempty"`
	Images  []ImageView    `json:"images,omitempty"`
}

// ImageView is an image of an entry as a transcript names it (its bytes
// are in octet's image store, not in the transcript).
type ImageView struct {
	MimeType string `json:"mimeType"`
	Bytes    int64  `json:"bytes"`
	SHA256   string `json:"sha256"`
}

func imageViews(imgs []session.Image) []ImageView {
	var out []ImageView
	for _, im := range imgs {
		out = append(out, ImageView{MimeType: im.MimeType, Bytes: im.Bytes, SHA256: im.SHA256})
	}
	return out
}

// ToTranscript converts an entry, leaving out opaque reasoning content.
func ToTranscript(e session.Entry) TranscriptEntry {
	t := TranscriptEntry{
		ID: e.ID, Parent: e.Parent, Time: e.Time.UTC(), Type: string(e.Type), RunID: e.RunID,
		Text: e.Text, StopReason: e.StopReason, Images: imageViews(e.PromptImages()),
	}
	for _, it := range e.Items {
		t.Items = append(t.Items, TranscriptItem{Type: it.Type, Text: it.Text, CallID: it.CallID, Name: it.Name, Arguments: it.Arguments})
	}
	if r := e.Result; r != nil {
		t.Result = &TranscriptTool{CallID: r.CallID, Tool: r.Tool, Text: r.Text, IsError: r.IsError, Details: r.Details, Images: imageViews(r.ResultImages())}
	}
	if c := e.Compaction; c != nil {
		t.Summary = c.Summary
	}
	return t
}

// PagedEntry is a transcript entry as a page carries it.
type PagedEntry struct {
	TranscriptEntry
	// Truncated reports that long texts of the entry were cut to fit the
	// page bounds (the session file holds them whole).
	Truncated bool `json:"truncated,omitempty"`
}

// TranscriptPage is one page of the active branch, newest first.
type TranscriptPage struct {
	Entries    []PagedEntry `json:"entries"`
	NextBefore string       `json:"nextBefore,omitempty"`
	// Runs are how the runs of the page's entries ended, for those that
	// did not complete (failed, cancelled, max_turns): what a resumed
	// view marks, as run_finished did live.
	Runs []RunEnd `json:"runs,omitempty"`
}

// RunEnd is how one run ended, as its checkpoint recorded it.
type RunEnd struct {
	RunID   string `json:"runId"`
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// withRunEnds sets page.Runs from the session's checkpoints: the last one
// of each run on the page that did not complete.
func withRunEnds(page TranscriptPage, checkpoints []session.Checkpoint) TranscriptPage {
	on := map[string]bool{}
	for _, e := range page.Entries {
		if e.RunID != "" {
			on[e.RunID] = true
		}
	}
	last := map[string]session.Checkpoint{}
	var order []string
	for _, c := range checkpoints {
		if !on[c.RunID] {
			continue
		}
		if _, seen := last[c.RunID]; !seen {
			order = append(order, c.RunID)
		}
		last[c.RunID] = c
	}
	for _, id := range order {
		if c := last[id]; c.Outcome != "completed" {
			page.Runs = append(page.Runs, RunEnd{RunID: id, Outcome: c.Outcome, Error: c.Error})
		}
	}
	return page
}

// OldestFirst returns the page's entries oldest first.
func (p TranscriptPage) OldestFirst() []PagedEntry {
	out := make([]PagedEntry, len(p.Entries))
	for i, e := range p.Entries {
		out[len(out)-1-i] = e
	}
	return out
}

// Transcript returns a page of the session's active branch: see
// PageTranscript. The page's place is found in the session's index, so a
// page costs the same wherever it is on the branch.
func (s *Session) Transcript(beforeID string, limit int) (TranscriptPage, error) {
	page, err := indexedPage(s.sess, s.ID(), beforeID, limit)
	if err != nil {
		return TranscriptPage{}, err
	}
	return withRunEnds(page, s.sess.Checkpoints()), nil
}

// indexedPage is the page of sess's active branch before beforeID, found
// through the session's index: only the page's entries are read (when
// the session released its branch) and converted.
func indexedPage(sess *session.Session, id, beforeID string, limit int) (TranscriptPage, error) {
	limit = pageLimit(limit)
	entries, older, ok, err := sess.BranchBefore(beforeID, limit)
	if err != nil {
		return TranscriptPage{}, fmt.Errorf("read the transcript of session %s: %w", id, err)
	}
	if !ok {
		return TranscriptPage{}, unknownBefore(id, beforeID)
	}
	return pageBefore(entries, older > 0, limit), nil
}

// ReadTranscript returns a page of session id's active branch read from
// its file under a shared lock (session.Inspect): no agent is attached,
// no torn tail repaired, nothing recorded, so another process's live run
// is untouched. [ErrNoSession] when there is no such session.
func (h *Host) ReadTranscript(id, beforeID string, limit int) (TranscriptPage, error) {
	if !ValidSessionID(id) {
		return TranscriptPage{}, fmt.Errorf("%w: invalid session id %q", ErrNoSession, id)
	}
	sess, err := session.Inspect(h.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return TranscriptPage{}, fmt.Errorf("%w: %s", ErrNoSession, id)
	}
	if err != nil {
		return TranscriptPage{}, fmt.Errorf("read session %s: %w", id, err)
	}
	defer sess.Close()
	page, err := indexedPage(sess, id, beforeID, limit)
	if err != nil {
		return TranscriptPage{}, err
	}
	return withRunEnds(page, sess.Checkpoints()), nil
}

// PageTranscript returns the entries of branch (session sessionID's)
// before beforeID (all of them when ""), newest first, at most limit
// (DefaultTranscriptLimit when 0, at most MaxTranscriptLimit) and about a
// mebibyte; NextBefore names the oldest entry returned when older ones
// remain. An unknown beforeID is an *InputError. (A session open in
// this process pages through its index: Session.Transcript.)
func PageTranscript(sessionID string, branch []session.Entry, beforeID string, limit int) (TranscriptPage, error) {
	end := len(branch)
	if beforeID != "" {
		end = -1
		for i := len(branch) - 1; i >= 0; i-- {
			if branch[i].ID == beforeID {
				end = i
				break
			}
		}
		if end < 0 {
			return TranscriptPage{}, unknownBefore(sessionID, beforeID)
		}
	}
	return pageBefore(branch[:end], false, limit), nil
}

// unknownBefore is the error for a beforeEntryId not on the branch.
func unknownBefore(sessionID, beforeID string) error {
	return inputErrorf("no entry %q on the active branch of session %s (the head may have moved): page again from the newest entry, without beforeEntryId", beforeID, sessionID)
}

// pageLimit is the number of entries a page asks for at most.
func pageLimit(limit int) int {
	if limit <= 0 {
		limit = DefaultTranscriptLimit
	}
	return min(limit, MaxTranscriptLimit)
}

// pageBefore returns the page of the newest of entries (the branch's
// entries before the page's place, oldest first); older reports that the
// branch has entries before them.
func pageBefore(entries []session.Entry, older bool, limit int) TranscriptPage {
	limit = pageLimit(limit)
	page := TranscriptPage{Entries: []PagedEntry{}}
	bytes := 0
	i := len(entries) - 1
	for ; i >= 0 && len(page.Entries) < limit; i-- {
		pe, n := boundedEntry(entries[i])
		if len(page.Entries) > 0 && bytes+n > MaxTranscriptPageBytes {
			break
		}
		bytes += n
		page.Entries = append(page.Entries, pe)
	}
	if (i >= 0 || older) && len(page.Entries) > 0 {
		page.NextBefore = page.Entries[len(page.Entries)-1].ID
	}
	return page
}

// boundedEntry converts e for a page, cutting its longest texts until it
// encodes within MaxTranscriptEntryBytes; it returns the encoded size.
func boundedEntry(e session.Entry) (PagedEntry, int) {
	pe := PagedEntry{TranscriptEntry: ToTranscript(e)}
	n := encodedLen(pe)
	for limit := MaxTranscriptEntryBytes / 2; n > MaxTranscriptEntryBytes && limit >= 64; limit /= 2 {
		pe.Truncated = true
		t := &pe.TranscriptEntry
		if t.Result != nil {
			r := *t.Result
			r.Details = nil
			r.Text = cutText(r.Text, limit)
			t.Result = &r
		}
		t.Text = cutText(t.Text, limit)
		t.Summary = cutText(t.Summary, limit)
		items := make([]TranscriptItem, len(t.Items))
		per := max(limit/max(len(t.Items), 1), 64)
		for i, it := range t.Items {
			it.Text = cutText(it.Text, per)
			it.Arguments = cutText(it.Arguments, per)
			items[i] = it
		}
		t.Items = items
		n = encodedLen(pe)
	}
	return pe, n
}

// cutText returns s cut to at most n bytes at a rune boundary, with a
// note of how much was left out.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[… %d more bytes in the session file]", len(s)-cut)
}

func encodedLen(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// FinalAnswer is the text of the last assistant message with text that
// run runID committed to sess's branch ("" when it committed none): what
// a client that shows no events (octet exec's -o, an LSP client's
// octet.prompt) gets as the run's answer. The branch is read newest
// first, a page at a time: a session whose run just ended has released
// its branch, and the answer is at its end.
func FinalAnswer(sess *session.Session, runID string) string {
	before := ""
	for {
		page, older, ok, err := sess.BranchBefore(before, finalAnswerPage)
		if err != nil || !ok {
			return ""
		}
		for i := len(page) - 1; i >= 0; i-- {
			if text := answerText(page[i], runID); text != "" {
				return text
			}
		}
		if older == 0 || len(page) == 0 {
			return ""
		}
		before = page[0].ID
	}
}

// FinalStopReason is the stop reason of the last assistant entry run
// runID committed to sess's branch ("completed", "max_output_tokens",
// "refusal", …; "" when it committed none), read like [FinalAnswer].
func FinalStopReason(sess *session.Session, runID string) string {
	page, _, ok, err := sess.BranchBefore("", finalAnswerPage)
	if err != nil || !ok {
		return ""
	}
	for i := len(page) - 1; i >= 0; i-- {
		en := page[i]
		if en.RunID != runID {
			break
		}
		if en.Type == session.EntryAssistant {
			return en.StopReason
		}
	}
	return ""
}

// finalAnswerPage is how many entries FinalAnswer reads at a time.
const finalAnswerPage = 64

// answerText is the text of en when it is an assistant entry of run
// runID ("" otherwise, or when it has none).
func answerText(en session.Entry, runID string) string {
	if en.RunID != runID || en.Type != session.EntryAssistant {
		return ""
	}
	var b strings.Builder
	for _, it := range en.Items {
		if it.Type == session.ItemText {
			b.WriteString(it.Text)
		}
	}
	return b.String()
}
