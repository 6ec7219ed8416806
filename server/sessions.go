package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Session lifecycle (protocol v1.1): octet/session/rename, fork, delete
// and transcript, the automatic title, and session_state on resume.

// Title bounds.
const (
	// maxTitleRunes bounds a title set with octet/session/rename.
	maxTitleRunes = 200
	// autoTitleRunes bounds the title taken from a session's first prompt.
	autoTitleRunes = 80
)

// lifecycleSession is what the lifecycle methods need from a session
// handle beyond sessionHandle; runtimeSession implements it.
type lifecycleSession interface {
	// Rename durably sets the session's title.
	Rename(title string) error
	// Entries is the active branch, root to head.
	Entries() []session.Entry
}

// lifecycleBackend is what fork and delete need from the backend;
// runtimeBackend implements it.
type lifecycleBackend interface {
	// Fork creates a session holding entries (a chain from a root) whose
	// header names src and entryID as its origin, with its agent.
	Fork(ctx context.Context, src sessionHandle, entryID string, entries []session.Entry, approver approverFunc) (sessionHandle, error)
	// Delete removes the session's file and listing cache; errNoSession
	// when there is none.
	Delete(ctx context.Context, id string) error
}

var (
	_ lifecycleSession = (*runtimeSession)(nil)
	_ lifecycleBackend = runtimeBackend{}
)

// Rename implements lifecycleSession.
func (s *runtimeSession) Rename(title string) error { return s.sess.SetTitle(title) }

// Entries implements lifecycleSession.
func (s *runtimeSession) Entries() []session.Entry { return s.sess.Branch() }

// Fork implements lifecycleBackend. The fork has the source's current
// effect policy: a fork of a session that asks before acting asks too.
func (b runtimeBackend) Fork(ctx context.Context, src sessionHandle, entryID string, entries []session.Entry, approver approverFunc) (sessionHandle, error) {
	return b.ForkFrom(ctx, session.Header{ID: src.ID(), Cwd: src.Cwd(), Title: src.Title()}, entryID, entries, approver, currentPolicy(src))
}

// currentPolicy is h's current effect policy, or nil for a handle that has
// none.
func currentPolicy(h sessionHandle) *tools.Policy {
	rs, ok := h.(*runtimeSession)
	if !ok {
		return nil
	}
	p := rs.built.Agent.Broker().Policy()
	return &p
}

// ForkFrom implements childForker: a fork of the session whose header is
// src, with effect policy policy (nil: the launch policy), recorded in
// the fork's ledger before it is returned.
func (b runtimeBackend) ForkFrom(ctx context.Context, src session.Header, entryID string, entries []session.Entry, approver approverFunc, policy *tools.Policy) (sessionHandle, error) {
	sess, err := session.CreateFrom(b.rt.SessionsDir, session.Header{
		Cwd: src.Cwd, Title: src.Title, ForkOf: src.ID, ForkEntry: entryID,
	}, entries)
	if err != nil {
		return nil, err
	}
	h, err := b.attach(ctx, sess, "", "", approver, policy)
	if err == nil && policy != nil {
		if _, err = h.SetEffectPolicy(*policy); err != nil {
			_ = h.Close()
		}
	}
	if err != nil {
		_ = sess.Close()
		_ = session.Remove(sess.Path())
		return nil, err
	}
	return h, nil
}

// RecordedPolicy implements childForker: the effect policy session id
// last recorded, read without opening it for writing (nil: none).
func (b runtimeBackend) RecordedPolicy(id string) *tools.Policy {
	if !validSessionID(id) {
		return nil
	}
	sess, err := session.Inspect(filepath.Join(b.rt.SessionsDir, id+".jsonl"))
	if err != nil {
		return nil
	}
	defer sess.Close()
	return newRuleBook(sess, slog.Default()).recordedPolicy()
}

// branchReader is implemented by backends that read a session's active
// branch from disk without opening it.
type branchReader interface {
	ReadBranch(id string) ([]session.Entry, error)
}

// ReadBranch implements branchReader: the active branch of session id,
// read under a shared lock (session.Inspect), nothing written.
func (b runtimeBackend) ReadBranch(id string) ([]session.Entry, error) {
	if !validSessionID(id) {
		return nil, jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("unknown session %q", id))
	}
	sess, err := session.Inspect(filepath.Join(b.rt.SessionsDir, id+".jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("unknown session %q: create it with octet/session/new", id))
	}
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("read session %s: %v", id, err))
	}
	defer sess.Close()
	return sess.Branch(), nil
}

// Delete implements lifecycleBackend.
func (b runtimeBackend) Delete(_ context.Context, id string) error {
	if !validSessionID(id) {
		return fmt.Errorf("%w: invalid session id %q", errNoSession, id)
	}
	err := session.Remove(filepath.Join(b.rt.SessionsDir, id+".jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", errNoSession, id)
	}
	return err
}

// validSessionID reports whether id can name a file in the sessions
// directory (no path separators, no dot names).
func validSessionID(id string) bool {
	return id != "" && filepath.Base(id) == id && id != "." && id != ".." && !strings.HasPrefix(id, ".")
}

// lifecycleOf returns ss's lifecycle view, or an error for a backend
// without one.
func lifecycleOf(ss *sessionState) (lifecycleSession, error) {
	ls, ok := ss.handle.(lifecycleSession)
	if !ok {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("session %s does not support the v1.1 lifecycle methods", ss.id))
	}
	return ls, nil
}

// sessionRename handles octet/session/rename.
func (s *Server) sessionRename(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		Title     string `json:"title"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	title := cleanTitle(p.Title)
	switch n := utf8.RuneCountInString(title); {
	case title == "":
		return nil, invalidParams("title is required (and must not be only blanks or control characters)")
	case n > maxTitleRunes:
		return nil, invalidParams("title is %d characters long; at most %d are allowed", n, maxTitleRunes)
	}
	if p.SessionID == "" {
		return nil, invalidParams("sessionId is required")
	}
	if cs, ok, err := s.asChild(p.SessionID); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return s.renameChild(cs, title)
	}
	ss, err := s.openOrReuse(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	ls, err := lifecycleOf(ss)
	if err != nil {
		return nil, err
	}
	if err := ls.Rename(title); err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("rename session %s: %v", ss.id, err))
	}
	return json.RawMessage(`{}`), nil
}

// cleanTitle neutralizes what a title must not carry into a list or a
// terminal: every control, format (bidirectional overrides, zero-width)
// and separator character other than a plain space becomes a space;
// runs of spaces collapse and the ends are trimmed.
func cleanTitle(s string) string {
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

// autoTitle is the title a session without one takes from a prompt: its
// first non-blank line, cleaned and bounded (cut at a word boundary when
// one is near, with an ellipsis).
func autoTitle(text string) string {
	for line := range strings.Lines(text) {
		t := cleanTitle(line)
		if t == "" {
			continue
		}
		if utf8.RuneCountInString(t) <= autoTitleRunes {
			return t
		}
		r := []rune(t)[:autoTitleRunes-1]
		if i := strings.LastIndexByte(string(r), ' '); i > len(string(r))/2 {
			return strings.TrimSpace(string(r)[:i]) + "…"
		}
		return strings.TrimSpace(string(r)) + "…"
	}
	return ""
}

// titleFromPrompt gives a session without a title the automatic title of
// text. A failure is logged: the prompt does not depend on it.
func (s *Server) titleFromPrompt(ss *sessionState, text string) {
	ls, ok := ss.handle.(lifecycleSession)
	if !ok || ss.handle.Title() != "" {
		return
	}
	title := autoTitle(text)
	if title == "" {
		return
	}
	if err := ls.Rename(title); err != nil {
		s.log.Warn("could not set the session's automatic title", "session", ss.id, "error", err)
	}
}

// sessionFork handles octet/session/fork: a new session whose tree is the
// source's active branch from its root up to entryId (inclusive). The
// source is only read. What the fork does not take is in
// docs/protocol.md (octet/session/fork).
func (s *Server) sessionFork(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		EntryID   string `json:"entryId"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.SessionID == "" {
		return nil, invalidParams("sessionId is required")
	}
	if p.EntryID == "" {
		return nil, invalidParams("entryId is required")
	}
	lb, ok := s.opts.backend.(lifecycleBackend)
	if !ok {
		return nil, jsonrpc2.NewError(CodeBackend, "this server cannot fork sessions")
	}
	if cs, ok, err := s.asChild(p.SessionID); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return s.forkChild(ctx, cs, p.EntryID)
	}
	src, err := s.openOrReuse(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	ls, err := lifecycleOf(src)
	if err != nil {
		return nil, err
	}
	prefix, err := forkPrefix(src.id, ls.Entries(), p.EntryID)
	if err != nil {
		return nil, err
	}
	holder := &approverHolder{}
	h, err := lb.Fork(ctx, src.handle, p.EntryID, prefix, holder.confirm)
	if err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("fork session %s at %s: %v", src.id, p.EntryID, err))
	}
	ss := s.newSessionState(h, nil)
	holder.set(s.approverFor(ss))
	if _, err := s.register(ss); err != nil {
		_ = h.Close()
		return nil, err
	}
	s.log.Info("session forked", "session", ss.id, "from", src.id, "entry", p.EntryID)
	return rawResult(map[string]string{"sessionId": ss.id})
}

// forkPrefix returns the active branch up to entryID. The entry must be on
// the active branch, and the prefix must not end with function calls
// whose results it does not hold: the fork's next prompt would otherwise
// meet them as calls interrupted by a crash.
func forkPrefix(sessionID string, branch []session.Entry, entryID string) ([]session.Entry, error) {
	k := -1
	for i := len(branch) - 1; i >= 0; i-- {
		if branch[i].ID == entryID {
			k = i
			break
		}
	}
	if k < 0 {
		return nil, invalidParams("no entry %q on the active branch of session %s: use an entry id from octet/session/transcript (octet/session/branch moves the active branch)", entryID, sessionID)
	}
	prefix := branch[:k+1]
	if open := unpairedCalls(prefix); len(open) > 0 {
		return nil, invalidParams("entry %s leaves tool calls without their results (%s): fork at the entry before that assistant message, or at its last tool result", entryID, strings.Join(open, ", "))
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

// sessionDelete handles octet/session/delete: refused while the session
// has a run (or an approval waiting); otherwise the session is closed and
// its file and listing cache are removed. The handler keeps the reader
// (it never waits for a run), so no later request of this client can
// reopen the session between the close and the removal.
func (s *Server) sessionDelete(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	id, err := sessionIDParam(raw)
	if err != nil {
		return nil, err
	}
	lb, ok := s.opts.backend.(lifecycleBackend)
	if !ok {
		return nil, jsonrpc2.NewError(CodeBackend, "this server cannot delete sessions")
	}
	if cs, ok, err := s.asChild(id); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return s.deleteChild(cs)
	}
	// A parent goes with its children's sessions and provenance; none of
	// them may still be running.
	kids, err := s.parentDeletable(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	ss := s.sessions[id]
	s.mu.Unlock()
	if ss != nil {
		free := func(ss *sessionState) bool { return ss.active == nil && len(ss.pending) == 0 }
		if !s.closeIf(ss, "octet/session/delete", free) {
			select {
			case <-ss.closed: // closed meanwhile by someone else
			default:
				ss.mu.Lock()
				runID := "(approval pending)"
				if ss.active != nil {
					runID = ss.active.id
				}
				ss.mu.Unlock()
				return nil, deleteBusyError(ss.id, runID)
			}
		}
	}
	if err := lb.Delete(ctx, id); err != nil {
		if errors.Is(err, errNoSession) {
			return nil, jsonrpc2.NewError(CodeNoSession, fmt.Sprintf("unknown session %q: nothing to delete", id))
		}
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("delete session %s: %v", id, err))
	}
	if err := s.deleteTeams(kids); err != nil {
		return nil, jsonrpc2.NewError(CodeBackend, fmt.Sprintf("session %s was deleted, but not all of its child sessions: %v; remove them by hand", id, err))
	}
	s.mu.Lock()
	if s.defaultID == id {
		s.defaultID = "" // octet.prompt creates a new default session
	}
	s.mu.Unlock()
	s.log.Info("session deleted", "session", id)
	return json.RawMessage(`{}`), nil
}

// deleteBusyError is SessionBusy for octet/session/delete.
func deleteBusyError(sessionID, runID string) error {
	data, _ := json.Marshal(map[string]string{"sessionId": sessionID, "activeRunId": runID})
	return &jsonrpc2.Error{
		Code:    CodeSessionBusy,
		Message: fmt.Sprintf("session %s has an active run %s: cancel it with octet/cancel (and wait for its answer) before deleting the session", sessionID, runID),
		Data:    data,
	}
}

// Transcript page bounds.
const (
	// defaultTranscriptLimit and maxTranscriptLimit bound the entries of
	// one octet/session/transcript page (and of resume's transcript).
	defaultTranscriptLimit = 50
	maxTranscriptLimit     = 500
	// maxTranscriptPageBytes bounds the encoded entries of one page; a
	// page always holds at least one entry.
	maxTranscriptPageBytes = 1 << 20
	// maxTranscriptEntryBytes bounds one encoded entry: longer texts are
	// cut (marked truncated), so no page is ever unbounded.
	maxTranscriptEntryBytes = 256 << 10
)

// pagedEntry is a transcript entry as a page carries it.
type pagedEntry struct {
	transcriptEntry
	// Truncated reports that long texts of the entry were cut to fit the
	// page bounds (the session file holds them whole).
	Truncated bool `json:"truncated,omitempty"`
}

// transcriptPage is one page of the active branch, newest first.
type transcriptPage struct {
	Entries    []pagedEntry `json:"entries"`
	NextBefore string       `json:"nextBefore,omitempty"`
}

// pageTranscript returns the entries of branch before beforeID (all of
// them when ""), newest first, at most limit and about
// maxTranscriptPageBytes; NextBefore names the oldest entry returned when
// older ones remain.
func pageTranscript(sessionID string, branch []session.Entry, beforeID string, limit int) (transcriptPage, error) {
	if limit <= 0 {
		limit = defaultTranscriptLimit
	}
	limit = min(limit, maxTranscriptLimit)
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
			return transcriptPage{}, invalidParams("no entry %q on the active branch of session %s (the head may have moved): page again from the newest entry, without beforeEntryId", beforeID, sessionID)
		}
	}
	page := transcriptPage{Entries: []pagedEntry{}}
	bytes := 0
	i := end - 1
	for ; i >= 0 && len(page.Entries) < limit; i-- {
		pe, n := boundedEntry(branch[i])
		if len(page.Entries) > 0 && bytes+n > maxTranscriptPageBytes {
			break
		}
		bytes += n
		page.Entries = append(page.Entries, pe)
	}
	if i >= 0 && len(page.Entries) > 0 {
		page.NextBefore = page.Entries[len(page.Entries)-1].ID
	}
	return page, nil
}

// boundedEntry converts e for a page, cutting its longest texts until it
// encodes within maxTranscriptEntryBytes; it returns the encoded size.
func boundedEntry(e session.Entry) (pagedEntry, int) {
	pe := pagedEntry{transcriptEntry: toTranscript(e)}
	n := encodedLen(pe)
	for limit := maxTranscriptEntryBytes / 2; n > maxTranscriptEntryBytes && limit >= 64; limit /= 2 {
		pe.Truncated = true
		t := &pe.transcriptEntry
		if t.Result != nil {
			r := *t.Result
			r.Details = nil
			r.Text = cutText(r.Text, limit)
			t.Result = &r
		}
		t.Text = cutText(t.Text, limit)
		t.Summary = cutText(t.Summary, limit)
		items := make([]transcriptItem, len(t.Items))
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

// sessionTranscript handles octet/session/transcript.
func (s *Server) sessionTranscript(ctx context.Context, _ *jsonrpc2.Request, raw jsonrpc2.RawMessage) (any, error) {
	var p struct {
		SessionID     string `json:"sessionId"`
		BeforeEntryID string `json:"beforeEntryId"`
		Limit         int    `json:"limit"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.SessionID == "" {
		return nil, invalidParams("sessionId is required")
	}
	if p.Limit < 0 {
		return nil, invalidParams("limit must not be negative")
	}
	if _, ok, err := s.asChild(p.SessionID); ok || err != nil {
		if err != nil {
			return nil, err
		}
		res, _, err := s.childTranscript(p.SessionID, p.BeforeEntryID, p.Limit)
		return res, err
	}
	if br, ok := s.opts.backend.(branchReader); ok && s.openHere(p.SessionID) == nil {
		// Not open here: read it from disk without opening it (no agent,
		// no repair, nothing recorded, another process's run untouched).
		entries, err := br.ReadBranch(p.SessionID)
		if err != nil {
			return nil, err
		}
		page, err := pageTranscript(p.SessionID, entries, p.BeforeEntryID, p.Limit)
		if err != nil {
			return nil, err
		}
		return rawResult(page)
	}
	ss, err := s.openOrReuse(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	ls, err := lifecycleOf(ss)
	if err != nil {
		return nil, err
	}
	page, err := pageTranscript(ss.id, ls.Entries(), p.BeforeEntryID, p.Limit)
	if err != nil {
		return nil, err
	}
	return rawResult(page)
}

// resumeTranscript fills resume's transcript: the newest page, oldest
// first as v1 put it, with transcriptNextBefore naming where
// octet/session/transcript continues when older entries remain.
func resumeTranscript(ss *sessionState, res map[string]any) error {
	ls, ok := ss.handle.(lifecycleSession)
	if !ok {
		t, err := ss.handle.Transcript()
		res["transcript"] = t
		return err
	}
	page, err := pageTranscript(ss.id, ls.Entries(), "", defaultTranscriptLimit)
	if err != nil {
		return err
	}
	oldestFirst := make([]pagedEntry, len(page.Entries))
	for i, e := range page.Entries {
		oldestFirst[len(oldestFirst)-1-i] = e
	}
	res["transcript"] = oldestFirst
	if page.NextBefore != "" {
		res["transcriptNextBefore"] = page.NextBefore
	}
	return nil
}

// Session states of session_state.
const (
	stateIdle               = "idle"
	stateRunning            = "running"
	stateWaitingForApproval = "waiting_for_approval"
)

// emitSessionStateLocked sends a resumed session its session_state event
// (the caller holds ss.mu, under which every emission of the session is
// serialized): resume calls it after reading the replay and lastSeq, in
// the same critical section, so the event is the first after the
// resume's cursor and reflects the state that cursor saw. It takes the
// next seq but is not buffered for replay: it is a snapshot, and every
// resume sends a fresh one.
func (s *Server) emitSessionStateLocked(ss *sessionState) {
	s.mu.Lock()
	send := s.caps.sendEvents
	s.mu.Unlock()
	ev := map[string]any{"kind": "session_state", "state": stateIdle}
	runID := ""
	if ss.active != nil {
		runID = ss.active.id
		ev["state"] = stateRunning
		ev["activeRunId"] = runID
	}
	if len(ss.pending) > 0 {
		ev["state"] = stateWaitingForApproval
	}
	body, _ := json.Marshal(ev)
	ss.seq++
	params := eventEnvelope(ss.id, runID, ss.epoch, ss.seq, body)
	if send {
		s.notify("octet/event", params)
	}
}
