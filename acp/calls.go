package acp

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/octet-agent/octet/tools"
)

// callView is how a tool call is shown in ACP before octet has looked at
// it: title, kind and the files it touches (locations, for follow-along),
// from the model's arguments. What a call changes is shown from octet's
// own text only: the approval preview in a permission request, the
// recorded diffs when it finished.
type callView struct {
	title     string
	kind      string
	locations []map[string]any
}

// callArgs are the arguments of octet's built-in tools that name what a
// call touches.
type callArgs struct {
	Path       *string `json:"path"`
	Offset     *int    `json:"offset"`
	Command    *string `json:"command"`
	Pattern    *string `json:"pattern"`
	ReplaceAll bool    `json:"replace_all"`
	Input      *string `json:"input"`
}

// toolKinds maps octet's tools to ACP tool kinds.
var toolKinds = map[string]string{
	"read": "read", "search": "search", "edit": "edit", "write": "edit", "apply_patch": "edit", "bash": "execute",
}

// describeCall returns the view of a call of tool with args (the
// model's, possibly invalid: every field is optional). Its title is a
// code span of the model's text made visible (see display.go).
func describeCall(cwd, tool string, args []byte) callView {
	v := callView{kind: "other"}
	if k, ok := toolKinds[tool]; ok {
		v.kind = k
	}
	var a callArgs
	_ = json.Unmarshal(args, &a) // what does not decode is shown by name only
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	path := str(a.Path)
	if path != "" {
		loc := map[string]any{"path": location(cwd, path)}
		if a.Offset != nil && *a.Offset > 0 {
			loc["line"] = *a.Offset
		}
		v.locations = append(v.locations, loc)
	}
	var patched []string
	if tool == "apply_patch" {
		patched = tools.PatchPaths(str(a.Input))
		for _, p := range patched {
			v.locations = append(v.locations, map[string]any{"path": location(cwd, p)})
		}
	}
	title := titleText(tool)
	switch tool {
	case "read", "edit", "write":
		if path != "" {
			title += " " + titleText(path)
		}
		if tool == "edit" && a.ReplaceAll {
			title += " (replace all)"
		}
	case "search":
		title += " " + titleText(str(a.Pattern))
		if path != "" {
			title += " in " + titleText(path)
		}
	case "apply_patch":
		if len(patched) > 0 {
			title += " " + titleText(strings.Join(patched, ", "))
		}
	case "bash":
		if c := str(a.Command); c != "" {
			title += ": " + titleText(c)
		}
	}
	v.title = codeSpan(title)
	return v
}

// location is a path a call names, as an absolute location.
func location(cwd, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(cwd, p)
	}
	return filepath.Clean(p)
}

// textContent is ToolCallContent holding text.
func textContent(s string) map[string]any {
	return map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": s}}
}

// rawArgs is a call's arguments as rawInput: the JSON object when it
// decodes, else the text.
func rawArgs(args []byte) any {
	if json.Valid(args) {
		return json.RawMessage(args)
	}
	return string(args)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
