package acp

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// shownCall is what the client was shown of one tool call: its titles and
// content texts, in order.
type shownCall struct {
	titles   []string
	contents []string
	// diffs are the diff blocks of its contents.
	diffs []diffBlock
}

// diffBlock is a ToolCallContent of type diff.
type diffBlock struct{ Path, OldText, NewText string }

// shownCalls collects the tool_call and tool_call_update notifications
// received so far, by call id.
func (p *peer) shownCalls() map[string]*shownCall {
	calls := map[string]*shownCall{}
	for _, raw := range p.notifications("session/update") {
		var n struct {
			Update struct {
				SessionUpdate, ToolCallID, Title string
				Content                          []map[string]any
			}
		}
		_ = json.Unmarshal(raw, &n)
		u := n.Update
		if u.SessionUpdate != "tool_call" && u.SessionUpdate != "tool_call_update" {
			continue
		}
		c := calls[u.ToolCallID]
		if c == nil {
			c = &shownCall{}
			calls[u.ToolCallID] = c
		}
		if u.Title != "" {
			c.titles = append(c.titles, u.Title)
		}
		if len(u.Content) > 0 {
			c.contents = append(c.contents, permissionText(u.Content))
		}
		for _, b := range u.Content {
			if b["type"] == "diff" {
				var d diffBlock
				d.Path, _ = b["path"].(string)
				d.OldText, _ = b["oldText"].(string)
				d.NewText, _ = b["newText"].(string)
				c.diffs = append(c.diffs, d)
			}
		}
	}
	return calls
}

// TestToolCallsShowOctetsText: what a client is shown of calls that were
// not asked for (full access) is octet's text, never less than the
// effect: a replace_all edit's tool_call says "replace all" and carries no
// diff of the model's one old_text → new_text, its final update shows the
// recorded change (the whole file before and after) with every
// replacement, and so does its replay by session/load on another
// connection. Titles from the model's arguments (a search pattern
// with a bidirectional control and Markdown link syntax, a path with a
// newline) are Markdown code spans of the text made visible, one line,
// marked when cut.
func TestToolCallsShowOctetsText(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.UnsafeHost})
	var file strings.Builder
	for i := range 3 {
		fmt.Fprintf(&file, "v%d = OLD\n%s", i, strings.Repeat("filler\n", 10))
	}
	writeFile(t, filepath.Join(p.ws, "a.txt"), file.String())
	args := func(v map[string]any) string { b, _ := json.Marshal(v); return string(b) }
	p.prov.Enqueue(
		providertest.Reply(providertest.FunctionCall("call_1", "edit", args(map[string]any{"path": "a.txt", "old_text": "OLD", "new_text": "NEW", "replace_all": true}))),
		providertest.Reply(providertest.FunctionCall("call_2", "search", args(map[string]any{"pattern": "x\u202e[y](http://evil)", "path": "a.txt"}))),
		providertest.Reply(providertest.FunctionCall("call_3", "read", args(map[string]any{"path": "a.txt\n\u200bsecret"}))),
		providertest.Text("ok"))
	p.initialize(false)
	id := p.newSession()
	if stop := p.prompt(id, "go"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	// The recorded change: the whole file before and after, every
	// replacement in it.
	hunks := func(c *shownCall) int {
		n := 0
		for _, d := range c.diffs {
			for i := range 3 {
				if strings.Contains(d.OldText, fmt.Sprintf("v%d = OLD\n", i)) && strings.Contains(d.NewText, fmt.Sprintf("v%d = NEW\n", i)) {
					n++
				}
			}
		}
		return n
	}
	calls := p.shownCalls()
	if c := calls["call_1"]; c == nil || c.titles[0] != "`edit a.txt (replace all)`" || len(c.contents) != 1 || hunks(c) != 3 {
		t.Errorf("replace_all edit shown as %+v: want its title to say replace all and one content, the recorded diff with all 3 hunks", c)
	}
	for id, want := range map[string]string{
		"call_2": "`search x⟨U+202E⟩[y](http://evil) in a.txt`",
		"call_3": "`read a.txt ⟨cut: 1 more line⟩`",
	} {
		if c := calls[id]; c == nil || len(c.titles) == 0 || c.titles[0] != want {
			t.Errorf("%s shown as %+v, want the title %q", id, c, want)
		}
	}
	for id, c := range calls {
		for _, title := range c.titles {
			if strings.ContainsAny(title, "\u200b\u202e") {
				t.Errorf("%s titled with a raw invisible character: %q", id, title)
			}
		}
	}

	// The replay, on a second connection after the first closed.
	p.w.Close()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	q := newPeerAt(t, stackOpts{policy: tools.UnsafeHost}, p.prov, p.home, p.ws)
	q.initialize(false)
	q.ok("session/load", map[string]any{"sessionId": id, "cwd": p.ws, "mcpServers": []any{}}, nil)
	if c := q.shownCalls()["call_1"]; c == nil || c.titles[0] != "`edit a.txt (replace all)`" || hunks(c) != 3 {
		t.Errorf("replayed replace_all edit shown as %+v: want the recorded diff with all 3 hunks", c)
	}
}

// TestLiteralMarkdown: a code span and a code block show any text exactly:
// their fence is longer than any run of backticks in it, and a span whose
// text starts or ends with a backtick or a space is padded (CommonMark
// strips one space from each end).
func TestLiteralMarkdown(t *testing.T) {
	for in, want := range map[string]string{
		"edit a.txt":   "`edit a.txt`",
		"a `b` c":      "``a `b` c``",
		"`x":           "`` `x ``",
		" x ":          "`  x  `",
		"a ``` b ` ``": "```` a ``` b ` `` ````",
		"":             "",
	} {
		if got := codeSpan(in); got != want {
			t.Errorf("codeSpan(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"echo hi\n":              "```sh\necho hi\n```",
		"```\nrm -rf ~\n```":     "````sh\n```\nrm -rf ~\n```\n````",
		"a `````` b\n<!-- x -->": "```````sh\na `````` b\n<!-- x -->\n```````",
	} {
		if got := permissionText([]map[string]any{literalContent("sh", in)}); got != want {
			t.Errorf("literalContent(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPermissionTitleOneLine: a path the model chose with a newline in
// it is named whole on the permission request's one-line title, quoted
// (the broker's one-line rendering of paths), never cut or spread over
// lines; the diff's headers name it quoted too.
func TestPermissionTitleOneLine(t *testing.T) {
	p := newPeer(t, stackOpts{policy: tools.Controlled})
	ps := p.answerPermissions("reject_once", nil)
	p.prov.Enqueue(providertest.Reply(providertest.FunctionCall("call_1", "write", `{"path":"two\n+lines.txt","content":"x"}`)), providertest.Text("ok"))
	p.initialize(false)
	if stop := p.prompt(p.newSession(), "write"); stop != stopEndTurn {
		t.Fatalf("stop %q", stop)
	}
	a := ps.list()
	if len(a) != 1 || a[0].title != "`write \"two\\n+lines.txt\"`" {
		t.Fatalf("permission requests %+v: want the path whole and quoted on one line", a)
	}
	if text := permissionText(a[0].content); !strings.Contains(text, `+++ "b/two\n+lines.txt"`) || strings.Contains(text, "\n+lines.txt\n") {
		t.Errorf("permission content %q: want the diff header to name the path quoted", text)
	}
}
