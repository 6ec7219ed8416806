package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/octet-agent/octet/tools"
)

const (
	// maxDescription bounds a tool's model-visible description.
	maxDescription = 8 << 10
	// maxName bounds a tool's name (mcp__<server>__<tool> too).
	maxName = 64
	// maxSchema bounds a tool's input schema.
	maxSchema = 64 << 10
	// maxResultText bounds the text octet assembles from one result
	// before the broker's own model-visible bound (50 KiB).
	maxResultText = 1 << 20
)

// definition is one tool as the server presents it.
type definition struct {
	name        string
	description string
	schema      json.RawMessage
	// digest is the hex SHA-256 of the canonical JSON of name,
	// description, inputSchema and annotations: what is pinned.
	digest string
	// invalid says why the tool cannot be offered ("" when it can).
	invalid string
}

func newDefinition(t *sdk.Tool) *definition {
	d := &definition{name: t.Name, description: t.Description}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || len(schema) > maxSchema {
		d.invalid = "its input schema is missing or larger than 64 KiB"
		schema = []byte(`{"type":"object"}`)
	}
	d.schema = schema
	var ann json.RawMessage = []byte("null")
	if t.Annotations != nil {
		if b, err := json.Marshal(t.Annotations); err == nil {
			ann = b
		}
	}
	pinned, _ := json.Marshal(struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Annotations json.RawMessage `json:"annotations"`
	}{t.Name, t.Description, schema, ann})
	if canon, err := tools.CanonicalArguments(pinned); err == nil {
		pinned = canon
	}
	sum := sha256.Sum256(pinned)
	d.digest = "sha256:" + hex.EncodeToString(sum[:])
	if d.invalid == "" {
		switch {
		case t.Name == "" || !validToolName(t.Name):
			d.invalid = "its name is not made of A-Z a-z 0-9 _ -"
		case len(t.Name) > maxName:
			d.invalid = "its name is longer than 64 characters"
		}
	}
	if d.invalid != "" {
		// Never called, only listed: shown bounded and visible.
		d.name = clip(tools.NeutralizeText(clip(d.name, maxName)), maxName)
	}
	return d
}

func validToolName(n string) bool {
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Tool is one MCP server tool in a tools.Host. It is classified Extension
// whatever its arguments or annotations, Sequential and ReplayUnsafe.
type Tool struct {
	srv  *server
	def  *definition
	name string
}

var _ tools.Tool = (*Tool)(nil)

// Name implements tools.Tool: mcp__<server>__<tool>.
func (t *Tool) Name() string { return t.name }

// Description implements tools.Tool: the server's description, bounded
// and neutralized like tool output, naming the server.
func (t *Tool) Description() string {
	desc := tools.NeutralizeText(clip(t.def.description, maxDescription))
	return fmt.Sprintf("[MCP server %s] %s", t.srv.spec.Name, desc)
}

// Schema implements tools.Tool: the server's input schema, which the host
// validates every call's arguments against before admission.
func (t *Tool) Schema() json.RawMessage { return t.def.schema }

// Concurrency implements tools.Tool: extension calls never overlap.
func (t *Tool) Concurrency() tools.Concurrency { return tools.Sequential }

// ReplaySafety implements tools.Tool: an unresolved call found after a
// crash becomes an indeterminate error, never a second call.
func (t *Tool) ReplaySafety() tools.ReplaySafety { return tools.ReplayUnsafe }

// Classify implements tools.Tool. The effect is always Extension: the
// server's readOnlyHint (or any annotation) is its own claim and never
// lowers admission.
func (t *Tool) Classify(args json.RawMessage) (tools.Effect, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return tools.Unknown, fmt.Errorf("arguments are not a JSON object: %w", err)
	}
	return tools.Extension, nil
}

// Effects implements tools.EffectStater: only a session whose policy
// admits executable extensions is offered the tool.
func (t *Tool) Effects() []tools.Effect { return []tools.Effect{tools.Extension} }

// Execute implements tools.Tool: it calls the tool on the server's live
// session within tool_timeout_secs. A server that is down, a timeout and
// a protocol failure are tool errors the model sees.
func (t *Tool) Execute(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	sp := t.srv.spec
	details := map[string]any{"mcp_server": sp.Name, "mcp_tool": t.def.name}
	cs, why := t.srv.await(ctx)
	if cs == nil {
		return tools.Result{IsError: true, Details: details, Text: fmt.Sprintf(
			"MCP server %q is not running (%s). octet restarts it automatically; try the call again later, or continue without it.",
			sp.Name, clip(why, maxErrorText))}, nil
	}
	live, stop := t.srv.callContext(ctx, cs)
	defer stop()
	cctx, cancel := context.WithTimeout(live, sp.ToolTimeout)
	defer cancel()
	res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: t.def.name, Arguments: json.RawMessage(inv.Arguments)})
	if err != nil {
		msg := t.callFailure(ctx, live, cctx, cs, err)
		return tools.Result{IsError: true, Details: details, Text: tools.NeutralizeText(msg)}, nil
	}
	return tools.Result{Text: tools.NeutralizeText(renderResult(res)), IsError: res.IsError, Details: details}, nil
}

// callFailure says why a call on cs failed with err, and what to do:
// ctx is the call's, live the same ended when the connection closed,
// cctx that bounded by tool_timeout_secs. A call that timed out recycles
// the server.
func (t *Tool) callFailure(ctx, live, cctx context.Context, cs *sdk.ClientSession, err error) string {
	sp := t.srv.spec
	if cause := context.Cause(live); live.Err() != nil && !errors.Is(cause, errStopped) {
		err = cause // the connection ended before the call's own error: say why
	}
	switch {
	case ctx.Err() != nil:
		return "The call was cancelled. Whether it took effect on the MCP server is unknown: check before repeating it."
	case live.Err() != nil && errors.Is(context.Cause(live), errStopped):
		return fmt.Sprintf("MCP server %q was stopped during the call of %s (its session's policy changed or octet is closing). Whether the call took effect is unknown: check before repeating it.", sp.Name, t.name)
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		t.srv.recycle(cs, fmt.Sprintf("a call of %s did not answer within tool_timeout_secs (%d s)", t.def.name, int(sp.ToolTimeout.Seconds())))
		return fmt.Sprintf("MCP tool %s did not answer within tool_timeout_secs (%d s); octet is restarting MCP server %q, so a next call reaches a fresh server. Whether this call took effect is unknown: check before repeating it.", t.name, int(sp.ToolTimeout.Seconds()), sp.Name)
	case transportFailure(err):
		// The server exited, closed the connection, or broke the
		// protocol (a line that is not JSON, a result that does not
		// decode): it may have acted all the same.
		return fmt.Sprintf("MCP server %q gave no valid answer to the call of %s (%s): it exited, closed the connection or broke the protocol. Whether the call took effect is unknown: check before repeating it. octet restarts a server whose connection ended; what it wrote to stderr is in octet's log.",
			sp.Name, t.name, clip(err.Error(), maxErrorText))
	}
	return fmt.Sprintf("MCP server %q failed the call: %s", sp.Name, clip(err.Error(), maxErrorText))
}

// renderResult turns a result's content into model-visible text: text
// as is, other content described (never its bytes), and structured
// content as JSON when there is no text.
func renderResult(res *sdk.CallToolResult) string {
	var b strings.Builder
	add := func(s string) {
		if b.Len() >= maxResultText {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(clip(s, maxResultText-b.Len()))
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			add(c.Text)
		case *sdk.ImageContent:
			add(fmt.Sprintf("[image %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			add(fmt.Sprintf("[audio %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			add(fmt.Sprintf("[resource link %s %s]", c.Name, c.URI))
		case *sdk.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
			case r.Text != "":
				add(fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
			default:
				add(fmt.Sprintf("[resource %s, %s, %d bytes, not shown]", r.URI, r.MIMEType, len(r.Blob)))
			}
		default:
			add("[content of an unsupported type, not shown]")
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		if j, err := json.Marshal(res.StructuredContent); err == nil {
			add(string(j))
		}
	}
	return b.String()
}
