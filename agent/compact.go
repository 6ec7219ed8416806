package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// Compaction parameters.
const (
	// keepFraction bounds the verbatim tail to 1/5 of the window (and to
	// half of the space left after the output reserve).
	keepFraction = 5
	// summaryMaxTokens bounds the summary response.
	summaryMaxTokens = 8192
	// minItemChars is the smallest per-item budget when shrinking the
	// summarized part to fit the summary request into the window.
	minItemChars = 256
)

// errPersist marks a failure to persist a record; a run never continues
// past one.
var errPersist = errors.New("persist")

// compactionInstructions is the system prompt of a summary request.
const compactionInstructions = "You are compacting a coding-agent conversation so it can continue in a smaller context. " +
	"Write a structured summary that preserves: the user's goals and constraints, decisions made, " +
	"files read and modified with the relevant facts, commands run and their outcomes, errors still open, " +
	"and the exact next steps. Be specific and concise; do not invent anything."

// compactionRequestText closes the summarized conversation.
const compactionRequestText = "Summarize the conversation above as instructed. Output only the summary."

// compact replaces the context before a kept tail with a summary produced
// by an auxiliary provider request. It reports whether a compaction entry
// was persisted. Cancellation persists neither usage nor summary and
// returns errCancelled. A terminal failure of the recovery envelope
// (exhausted budget, outage limit, permanent code, hard ceiling) or of
// persistence ends the run with that failure: the summary shares the main
// request's budgets and outage, so the main request could not do better.
// Any other failure (a refused or empty summary) leaves the session
// unchanged, the turn continues uncompacted and is not compacted again
// before its main response completes.
func (r *Run) compact(v view, est int) (bool, error) {
	model := r.pin.model
	budget := min(model.ContextWindow/keepFraction, (model.ContextWindow-r.a.cfg.OutputReserve)/2)
	k := keepBoundary(v.entries, budget)
	if k == 0 {
		return false, nil // nothing to summarize: the tail alone is the context
	}
	err := r.compactTo(v, k, est)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errCancelled):
		return false, errCancelled
	case IsRecoveryTerminal(err) || errors.Is(err, errPersist):
		return false, fmt.Errorf("compact the context: %w", err)
	}
	r.a.log.Warn("agent: compaction failed; continuing uncompacted", "run", r.id, "err", err)
	r.compactionFailed = true
	return false, nil
}

// compactTo summarizes v.entries[:k] in place, with its events.
func (r *Run) compactTo(v view, k, est int) error {
	r.emit(&CompactionStarted{TokensBefore: est})
	t0 := time.Now()
	entryID, summary, err := r.summarize(v, k, est)
	info := CompactionInfo{RunID: r.id, TokensBefore: est, SummaryBytes: len(summary), OK: err == nil, Duration: time.Since(t0)}
	r.a.obs.CompactionFinished(info)
	if err != nil {
		if errors.Is(err, errCancelled) {
			r.emit(&CompactionFinished{Error: "cancelled"})
			return errCancelled
		}
		r.emit(&CompactionFinished{Error: boundedError(err)})
		return err
	}
	r.a.setCalibration(calibration{})
	r.emit(&CompactionFinished{EntryID: entryID})
	return nil
}

// compactNow is the loop of a Compact run: the whole conversation
// summarized, nothing kept verbatim.
func (r *Run) compactNow() (Outcome, error) {
	if err := r.repin(session.BaselineRunStart); err != nil {
		return OutcomeFailed, err
	}
	_, v, est := r.buildRequest()
	if len(v.entries) == 0 {
		return OutcomeCompleted, nil
	}
	if err := r.checkContext(v); err != nil {
		return OutcomeFailed, err
	}
	if err := r.compactTo(v, len(v.entries), est); err != nil {
		return OutcomeFailed, fmt.Errorf("compact the conversation: %w", err)
	}
	return OutcomeCompleted, nil
}

// keepBoundary returns the index of the first entry of the verbatim tail:
// the smallest k whose tail fits budget tokens and starts at a message
// boundary (never at a tool result). It returns len(entries) when no such
// tail exists (everything is summarized).
func keepBoundary(entries []session.Entry, budget int) int {
	tail := 0
	best := len(entries)
	for k := len(entries) - 1; k >= 0; k-- {
		tail += estimateItems(appendEntryItems(nil, &entries[k], countImages))
		if tail > budget {
			break
		}
		switch entries[k].Type {
		case session.EntryUser, session.EntrySteering, session.EntryFollowUp, session.EntryContext, session.EntryAssistant:
			best = k
		}
	}
	return best
}

// summarize compacts v.entries[:k] (after the previous compaction) and
// persists the compaction entry with the request's usage: natively where
// the model and the endpoint grant it, falling back to a local summary
// when the provider's compaction fails short of ending the run.
func (r *Run) summarize(v view, k int, est int) (string, string, error) {
	var c *session.Compaction
	var ar *attemptResult
	var err error
	if r.nativeCompaction(r.pin.model) {
		c, ar, err = r.nativeSummary(v, k)
		if err != nil && !errors.Is(err, errCancelled) && !IsRecoveryTerminal(err) && !errors.Is(err, errPersist) {
			r.a.log.Warn("agent: native compaction failed; compacting locally", "run", r.id, "err", err)
			c, ar, err = r.localSummary(v, k)
		}
	} else {
		c, ar, err = r.localSummary(v, k)
	}
	if err != nil {
		return "", "", err
	}
	c.TokensBefore = int64(est)
	if k < len(v.entries) {
		c.FirstKept = v.entries[k].ID
	}
	c.ReadFiles, c.ModifiedFiles = fileSets(v, k)
	id, err := r.commitCompaction(v, k, c, ar)
	return id, c.Summary, err
}

// localSummary asks the model for a summary of v.entries[:k] (after the
// previous compaction) in an auxiliary request.
func (r *Run) localSummary(v view, k int) (*session.Compaction, *attemptResult, error) {
	model := r.pin.model
	input := v.head()
	for i := 0; i < k; i++ {
		input = appendEntryItems(input, &v.entries[i], describeImages)
	}
	maxOut := summaryMaxTokens
	if model.MaxOutputTokens > 0 && model.MaxOutputTokens < maxOut {
		maxOut = model.MaxOutputTokens
	}
	if w := model.ContextWindow; w > 0 {
		budget := w - maxOut - estimateText(compactionInstructions) - 2*perItemOverhead - estimateText(compactionRequestText)
		input = shrinkItems(input, budget)
	}
	input = append(input, userMessage(compactionRequestText))
	req := &provider.Request{Model: model.Name, Instructions: compactionInstructions, Input: input, ToolChoice: "none", MaxOutputTokens: maxOut}
	ar, err := r.auxRequest(OperationCompaction, req)
	if err != nil {
		return nil, nil, err
	}
	summary := strings.TrimSpace(responseText(ar))
	if summary == "" {
		return nil, nil, r.settleUnused(OperationCompaction, ar, errors.New("compaction response had no summary text"))
	}
	return &session.Compaction{Summary: summary}, ar, nil
}

// commitCompaction persists the compaction c of v.entries[:k] that ar
// produced, with its usage, in one batch that also rebases the pin.
func (r *Run) commitCompaction(v view, k int, c *session.Compaction, ar *attemptResult) (string, error) {
	model := r.pin.model
	recs := []session.Record{session.EntryRecord(session.Entry{Type: session.EntryCompaction, RunID: r.id, Compaction: c})}
	var cost int64
	var priced bool
	if ar.resp.Usage != nil {
		var rec session.Record
		rec, cost, priced = r.usageRecord(OperationCompaction, model.Name, ar)
		recs = append(recs, rec)
	}
	if r.ctx.Err() != nil { // cancellation wins: nothing is persisted
		return "", r.settleFailed(errCancelled)
	}
	settle, uncertain := r.completedSettlement(OperationCompaction, ar.resp.Usage)
	recs = append(recs, settle...)
	// The compaction rebases the retained prefix: the request baseline is
	// pinned anew in the same batch (a failed compaction leaves it).
	rebase, pin := r.rebase()
	if err := r.a.sess.Append(append(recs, rebase...)...); err != nil {
		return "", fmt.Errorf("%w compaction: %w", errPersist, err)
	}
	r.settled()
	if uncertain {
		r.noteUncertain(OperationCompaction, reasonUsageNotReported)
	}
	r.pin = *pin
	// The context now holds the summary and the kept tail.
	plan := PlanOf(v.entries[:k])
	if plan == nil {
		plan = v.plan
	}
	after := estimateItems(append(summaryItems(c), planItems(plan)...))
	for i := k; i < len(v.entries); i++ {
		after += estimateItems(appendEntryItems(nil, &v.entries[i], countImages))
	}
	r.contextTokens = int64(after)
	if u := ar.resp.Usage; u != nil {
		r.addUsage(u, cost, priced)
	}
	return r.a.sess.Head(), nil
}

// settleUnused records the usage of a completed request of operation op
// ("" for the main request) whose output cannot be used (it was billed
// all the same) and returns err.
func (r *Run) settleUnused(op string, ar *attemptResult, err error) error {
	if cerr := r.commitAux(op, ar); cerr != nil {
		return errors.Join(err, cerr)
	}
	return err
}

// auxRequest performs an auxiliary request with the same retry seam as the
// main request; it emits no output deltas and delivers no controls (they
// stay queued for the next safe boundary).
func (r *Run) auxRequest(op string, req *provider.Request) (*attemptResult, error) {
	for attempt := 0; ; attempt++ {
		if r.ctx.Err() != nil {
			return nil, errCancelled
		}
		if err := r.gate(op, req); err != nil {
			return nil, err
		}
		ar := &attemptResult{estimate: estimateFixed(req) + estimateItems(req.Input), op: op, n: attempt}
		t0 := time.Now()
		err := r.attempt(req, ar)
		r.observeRequest(op, attempt, req, ar, t0, err)
		if err == nil && !ar.truncated {
			return ar, nil
		}
		if err == nil { // a truncated summary is not a summary
			err = &provider.Error{Phase: provider.Body, Class: provider.ResponsesIncomplete, Dispatched: true, IncompleteReason: "max_output_tokens"}
		}
		if err := r.handleFailure(op, ar, err, attempt); err != nil {
			return nil, err
		}
	}
}

// shrinkItems bounds the text of items so that their estimate fits budget
// tokens, cutting the longest texts first (keeping each text's head).
func shrinkItems(items []provider.Item, budget int) []provider.Item {
	if budget <= 0 || estimateItems(items) <= budget || len(items) == 0 {
		return items
	}
	per := max(budget*bytesPerToken/len(items), minItemChars)
	out := slices.Clone(items)
	for i := range out {
		out[i].Encoded = nil // the fields change below
		out[i].Text = cutText(out[i].Text, per)
		out[i].Output = cutText(out[i].Output, per)
		out[i].Arguments = cutText(out[i].Arguments, per)
		out[i].EncryptedContent = ""
		if out[i].Type == provider.ItemReasoning {
			out[i] = provider.Item{Type: provider.ItemMessage, Role: "assistant", Text: cutText(strings.Join(out[i].Summary, "\n"), per)}
		}
	}
	return out
}

// cutText keeps at most n bytes of s on a rune boundary, marking the cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "\n[… truncated for summarization]"
}

// fileSets returns the cumulative read and modified files: the previous
// compaction's sets plus the paths of read/search and edit/write calls in
// the summarized entries.
func fileSets(v view, k int) (read, modified []string) {
	seenR, seenM := map[string]bool{}, map[string]bool{}
	add := func(list *[]string, seen map[string]bool, p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			*list = append(*list, p)
		}
	}
	if v.summary != nil {
		for _, p := range v.summary.ReadFiles {
			add(&read, seenR, p)
		}
		for _, p := range v.summary.ModifiedFiles {
			add(&modified, seenM, p)
		}
	}
	for i := 0; i < k; i++ {
		e := &v.entries[i]
		if e.Type != session.EntryAssistant {
			continue
		}
		for _, it := range e.Items {
			if it.Type != session.ItemFunctionCall {
				continue
			}
			var args struct {
				Path  string `json:"path"`
				Input string `json:"input"`
			}
			if json.Unmarshal([]byte(it.Arguments), &args) != nil {
				continue
			}
			switch it.Name {
			case "read":
				add(&read, seenR, args.Path)
			case "edit", "write":
				add(&modified, seenM, args.Path)
			case "apply_patch":
				for _, p := range tools.PatchPaths(args.Input) {
					add(&modified, seenM, p)
				}
			}
		}
	}
	return read, modified
}
