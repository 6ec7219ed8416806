package agent

import (
	"fmt"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/session"
)

// Native compaction (FeatureNativeCompaction, granted by both the model
// and the endpoint, on the Responses route). A compaction — autonomous
// (the estimate crossed the window) or asked for (Agent.Compact) — sends
// the context it replaces to the provider's compact endpoint
// (provider.Request.Compact: POST …/responses/compact, over HTTP even on
// a WebSocket route) through the same auxiliary path as a local summary:
// the recovery policy's classification and budgets, retry hooks, the
// outage deadline bounding only the opening (credentials, connect,
// headers) while a healthy body runs on the transport's body deadlines,
// the dispatch log, usage and the pin's rebase in the compaction's batch.
// The provider answers the user messages it kept and one opaque
// compaction item; octet records them in the compaction entry
// (Compaction.Items, session item types user_text and compaction) and
// replays them in place of a summary. Any other item fails closed. A
// native compaction that fails short of ending the run (a refusal, an
// item octet cannot replay) falls back to the local summary. A context
// compacted natively can be sent only where native compaction is still
// granted: on another route or model the run fails, saying so, rather
// than drop the compacted history.

// CompactSender is implemented by transports that can send a native
// compaction (provider.Request.Compact): the HTTP Responses route, and a
// FallbackTransport whose HTTP side is one.
type CompactSender interface {
	SendsCompactions() bool
}

// SendsCompactions reports whether the HTTP side sends native compactions.
func (t *FallbackTransport) SendsCompactions() bool { return sendsCompactions(t.http) }

func sendsCompactions(tr provider.Transport) bool {
	cs, ok := tr.(CompactSender)
	return ok && cs.SendsCompactions()
}

// nativeCompaction reports whether the run compacts model's context
// natively.
func (r *Run) nativeCompaction(model provider.Model) bool {
	return sendsCompactions(r.a.cfg.Transport) && r.a.granted(model).Has(provider.FeatureNativeCompaction)
}

// nativeSummary sends v.entries[:k] (after the previous compaction) to
// the provider's compact endpoint and returns the compaction it made.
func (r *Run) nativeSummary(v view, k int) (*session.Compaction, *attemptResult, error) {
	model := r.pin.model
	input := v.head()
	for i := 0; i < k; i++ {
		input = appendEntryItems(input, &v.entries[i], describeImages)
	}
	req := &provider.Request{Model: model.Name, Instructions: r.a.Instructions(), Input: input, Compact: true}
	if r.a.granted(model).Has(provider.FeaturePromptCacheKey) {
		req.PromptCacheKey = r.a.sess.Header().ID
	}
	ar, err := r.auxRequest(OperationCompaction, req)
	if err != nil {
		return nil, nil, err
	}
	items, bad := nativeItems(ar.resp.Output)
	if bad != "" {
		return nil, nil, r.settleUnused(OperationCompaction, ar, fmt.Errorf("native compaction returned %s", bad))
	}
	return &session.Compaction{Items: items}, ar, nil
}

// nativeItems converts a native compaction's output: user messages and
// exactly one compaction item; bad describes anything else.
func nativeItems(out []provider.Item) (items []session.Item, bad string) {
	compactions := 0
	for _, it := range out {
		switch {
		case it.Type == provider.ItemMessage && it.Role == "user":
			items = append(items, session.Item{Type: session.ItemUserText, Text: it.Text})
		case it.Type == provider.ItemCompaction && it.EncryptedContent != "":
			compactions++
			items = append(items, session.Item{Type: session.ItemCompaction, ID: it.ID, EncryptedContent: it.EncryptedContent})
		default:
			return nil, fmt.Sprintf("an item octet cannot replay (%s)", it.Type)
		}
	}
	if compactions != 1 {
		return nil, fmt.Sprintf("%d compaction items, not one", compactions)
	}
	return items, ""
}

// summaryItems are the provider items that stand for the context a
// compaction c replaced (none without one): the provider's items of a
// native compaction, else the summary as a user message.
func summaryItems(c *session.Compaction) []provider.Item {
	if c == nil {
		return nil
	}
	if len(c.Items) == 0 {
		return []provider.Item{userMessage(summaryPrefix + c.Summary)}
	}
	out := make([]provider.Item, 0, len(c.Items))
	for _, it := range c.Items {
		switch it.Type {
		case session.ItemUserText:
			out = append(out, userMessage(it.Text))
		case session.ItemCompaction:
			out = append(out, provider.Item{Type: provider.ItemCompaction, EncryptedContent: it.EncryptedContent})
		}
	}
	return out
}

// errNativeContext: the context was compacted natively, and the route or
// model of this request cannot read the provider's compaction.
type errNativeContext struct{ model string }

func (e errNativeContext) Error() string {
	return fmt.Sprintf("the context was compacted by the provider (an opaque compaction only a Responses route granting native compaction can read), "+
		"and model %s on this route does not: select a model and route with native_compaction, or start a new session", e.model)
}

// checkContext refuses to send a natively compacted context where native
// compaction is not granted.
func (r *Run) checkContext(v view) error {
	if v.summary != nil && len(v.summary.Items) > 0 && !r.nativeCompaction(r.pin.model) {
		return errNativeContext{model: r.pin.model.Name}
	}
	return nil
}
