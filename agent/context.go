package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
	"github.com/octet-agent/octet/tools"
)

// summaryPrefix introduces a compaction summary in the rebuilt context.
const summaryPrefix = "Summary of the earlier conversation (it replaces the messages before it; continue from here):\n\n"

// planPrefix introduces the plan restated after a compaction.
const planPrefix = "Your plan as you last set it with update_plan before the summary (it stands until you update it):\n"

// view is the part of the active branch that forms the provider context:
// an optional compaction summary followed by the entries replayed verbatim.
type view struct {
	summary    *session.Compaction // the latest compaction on the branch, if any
	entries    []session.Entry     // replayed entries, oldest first
	compaction int                 // index in the branch of the latest compaction entry, -1 if none
	// plan is the plan update_plan set in the part of the branch the
	// summary replaced (nil: none): still the session's plan, which the
	// model would otherwise know only if the summary said it.
	plan *tools.Plan
}

// contextView selects the replayed entries of branch: everything when there
// is no compaction; otherwise the entries from the latest compaction's
// FirstKept up to that compaction entry, then everything after it.
func contextView(branch []session.Entry) view {
	v := view{compaction: -1}
	for i := len(branch) - 1; i >= 0; i-- {
		if branch[i].Type == session.EntryCompaction && branch[i].Compaction != nil {
			v.compaction = i
			break
		}
	}
	if v.compaction < 0 {
		v.entries = branch
		return v
	}
	c := branch[v.compaction]
	v.summary = c.Compaction
	start := v.compaction // keep nothing before the compaction by default
	if c.Compaction.FirstKept != "" {
		for i := 0; i < v.compaction; i++ {
			if branch[i].ID == c.Compaction.FirstKept {
				start = i
				break
			}
		}
	}
	v.plan = PlanOf(branch[:start])
	v.entries = make([]session.Entry, 0, len(branch)-start)
	v.entries = append(v.entries, branch[start:v.compaction]...)
	v.entries = append(v.entries, branch[v.compaction+1:]...)
	return v
}

// head returns the items that stand for the part of the branch the
// latest compaction replaced: its summary, then the plan set there.
func (v view) head() []provider.Item {
	return append(summaryItems(v.summary), planItems(v.plan)...)
}

// planItems restates plan p for the model after a compaction (none for
// nil): the update_plan call that set it was summarized away, and its
// result says only how many steps are done.
func planItems(p *tools.Plan) []provider.Item {
	if p == nil {
		return nil
	}
	var b strings.Builder
	b.WriteString(planPrefix)
	if p.Explanation != "" {
		b.WriteString(p.Explanation + "\n")
	}
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "%d. [%s] %s\n", i+1, s.Status, s.Step)
	}
	return []provider.Item{userMessage(strings.TrimRight(b.String(), "\n"))}
}

// PlanOf is the plan of a branch: what its last successful update_plan
// call set (nil when none did). The plan is durable as that call's
// result, so a resumed session has it again, and a branch moved before
// the call has the plan from before it.
func PlanOf(branch []session.Entry) *tools.Plan {
	for i := len(branch) - 1; i >= 0; i-- {
		r := branch[i].Result
		if branch[i].Type != session.EntryToolResult || r == nil || r.IsError || r.Tool != (tools.UpdatePlanTool{}).Name() {
			continue
		}
		if p, ok := tools.PlanOf(r.Details); ok {
			return &p
		}
	}
	return nil
}

// itemCache keeps the provider items of committed entries, by entry id,
// with their request encoding (provider.Item.Encoded): a committed entry
// never changes, so each request of a run encodes only the entries added
// since the last one and copies the rest. It holds the entries of the
// latest view (and at most as many more, dropped when it grows past
// that), and nothing while the agent is idle (drop): the encoding is a
// copy of the whole context, and an open session waiting for its next
// prompt would hold it twice. The next run's first request encodes the
// context again (about 10 ms for 2 MB), once per prompt, not per turn.
type itemCache struct {
	mu   sync.Mutex
	byID map[string][]provider.Item
	// mode names how images were resolved (imageMode): the cached items
	// hold them so, and another mode starts the cache again.
	mode string
}

// items converts the view into provider input items, from the cache
// where it can; imgs resolves the entries' images, as mode names.
func (c *itemCache) items(v view, mode string, imgs imageRefs) []provider.Item {
	out := make([]provider.Item, 0, len(v.entries)*2+1)
	out = append(out, v.head()...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil || len(c.byID) > 2*len(v.entries)+64 || c.mode != mode {
		c.byID = make(map[string][]provider.Item, len(v.entries))
		c.mode = mode
	}
	for i := range v.entries {
		e := &v.entries[i]
		if its, ok := c.byID[e.ID]; ok && e.ID != "" {
			out = append(out, its...)
			continue
		}
		start := len(out)
		out = appendEntryItems(out, e, imgs)
		if e.ID == "" {
			continue
		}
		for j := start; j < len(out); j++ {
			// An item that cannot be encoded stays unencoded: the
			// request encoder reports it.
			if enc, err := provider.EncodeItem(&out[j]); err == nil {
				out[j].Encoded = enc
			}
		}
		c.byID[e.ID] = slices.Clone(out[start:]) // the request may be changed
	}
	return out
}

// drop forgets every cached item (the agent is idle).
func (c *itemCache) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID, c.mode = nil, ""
}

// userMessage returns a user-role message item.
func userMessage(text string) provider.Item {
	return provider.Item{Type: provider.ItemMessage, Role: "user", Text: text}
}

// appendEntryItems appends the canonical provider items of one entry,
// its images as imgs resolves them. Entry types the agent does not replay
// (and compaction entries, which the view handles) contribute nothing.
func appendEntryItems(out []provider.Item, e *session.Entry, imgs imageRefs) []provider.Item {
	switch e.Type {
	case session.EntryUser, session.EntrySteering, session.EntryFollowUp, session.EntryContext:
		it := userMessage(e.Text)
		withImages(&it, &it.Text, e.PromptImages(), imgs)
		out = append(out, it)
	case session.EntryAssistant:
		for _, it := range e.Items {
			switch it.Type {
			case session.ItemText:
				out = append(out, provider.Item{Type: provider.ItemMessage, Role: "assistant", Text: it.Text, Phase: it.Phase})
			case session.ItemReasoning:
				if it.EncryptedContent == "" {
					continue // nothing replayable without the opaque state
				}
				var summary []string
				if it.Text != "" {
					summary = []string{it.Text}
				}
				out = append(out, provider.Item{Type: provider.ItemReasoning, Summary: summary, EncryptedContent: it.EncryptedContent})
			case session.ItemFunctionCall:
				out = append(out, provider.Item{Type: provider.ItemFunctionCall, CallID: it.CallID, Name: it.Name, Arguments: it.Arguments, Async: it.Async})
			}
		}
	case session.EntryToolResult:
		if e.Result != nil {
			it := provider.Item{Type: provider.ItemFunctionCallOutput, CallID: e.Result.CallID, Output: e.Result.Text}
			withImages(&it, &it.Output, e.Result.ResultImages(), imgs)
			out = append(out, it)
		}
	}
	return out
}

// withImages gives item it the images refs name, as imgs resolves them,
// with the note it adds to text.
func withImages(it *provider.Item, text *string, refs []session.Image, imgs imageRefs) {
	if len(refs) == 0 {
		return
	}
	var note string
	it.Images, note = imgs(refs)
	if note != "" {
		*text += "\n\n" + note
	}
}

// sessionItems converts a provider response's output into session items.
// Items octet cannot replay fail closed and bad describes the first one:
// provider-hosted tools and custom tool calls, and function calls without a
// call id or name or with a call id used twice (they could never be paired
// with exactly one result, and every later request would be rejected).
func sessionItems(out []provider.Item) (items []session.Item, bad string) {
	items = make([]session.Item, 0, len(out))
	seen := make(map[string]bool)
	for _, it := range out {
		if it.Type == provider.ItemFunctionCall {
			if it.CallID == "" || it.Name == "" {
				return nil, "function_call without call_id or name"
			}
			if seen[it.CallID] {
				return nil, "function_call with a duplicate call_id"
			}
			seen[it.CallID] = true
		}
		switch it.Type {
		case provider.ItemMessage:
			text := it.Text
			if text == "" && it.Refusal != "" {
				text = it.Refusal
			}
			items = append(items, session.Item{Type: session.ItemText, ID: it.ID, Text: text, Phase: it.Phase})
		case provider.ItemReasoning:
			items = append(items, session.Item{Type: session.ItemReasoning, ID: it.ID, Text: strings.Join(it.Summary, "\n\n"), EncryptedContent: it.EncryptedContent})
		case provider.ItemFunctionCall:
			items = append(items, session.Item{Type: session.ItemFunctionCall, ID: it.ID, CallID: it.CallID, Name: it.Name, Arguments: it.Arguments, Async: it.Async})
		default:
			return nil, "type " + strconv.Quote(string(it.Type))
		}
	}
	return items, ""
}

// Token estimation. The estimate is deliberately simple and conservative:
// four bytes of text per token plus a small per-item overhead. When the
// provider reported usage for a response still on the branch (and no
// compaction happened since), that exact figure replaces the estimate of
// everything up to and including that response.
const (
	bytesPerToken   = 4
	perItemOverhead = 8
	// imageTokens is what one image is estimated at: above what OpenAI
	// (a high-detail 1024×1024 image) and Anthropic (a 1.15 megapixel
	// image) count.
	imageTokens = 1600
)

// estimateText estimates the tokens of s.
func estimateText(s string) int { return (len(s) + bytesPerToken - 1) / bytesPerToken }

// estimateItems estimates the tokens of provider items.
func estimateItems(items []provider.Item) int {
	n := 0
	for i := range items {
		it := &items[i]
		n += perItemOverhead + estimateText(it.Text) + estimateText(it.Arguments) + estimateText(it.Output) + estimateText(it.Name)
		n += len(it.Images) * imageTokens
		for _, s := range it.Summary {
			n += estimateText(s)
		}
		// Encrypted reasoning is base64 of roughly the reasoning tokens.
		n += len(it.EncryptedContent) / 8
	}
	return n
}

// estimateFixed estimates the instructions and tool schemas of req.
func estimateFixed(req *provider.Request) int {
	n := estimateText(req.Instructions)
	for _, t := range req.Tools {
		n += perItemOverhead + estimateText(t.Name) + estimateText(t.Description) + estimateText(string(t.Parameters))
	}
	return n
}

// calibration remembers the provider-reported size of the context as of
// one committed assistant entry.
type calibration struct {
	entryID string
	tokens  int // input + output tokens of that response
}

// estimate returns the estimated tokens of req, built from v. When cal's
// entry is among v's entries, the provider-reported size replaces the
// heuristic for everything up to that entry (the agent resets cal on
// compaction, which changes that prefix).
func estimate(req *provider.Request, v view, cal calibration) int {
	if cal.entryID != "" {
		for i := len(v.entries) - 1; i >= 0; i-- {
			if v.entries[i].ID == cal.entryID {
				var tail []provider.Item
				for j := i + 1; j < len(v.entries); j++ {
					tail = appendEntryItems(tail, &v.entries[j], countImages)
				}
				return cal.tokens + estimateItems(tail)
			}
		}
	}
	return estimateFixed(req) + estimateItems(req.Input)
}
