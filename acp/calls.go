package acp

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/octet-agent/octet/internal/fsroot"
)

// maxDiffSide bounds the old text of a write's diff read from disk; a
// larger file's diff shows the new text only.
const maxDiffSide = 1 << 20

// callView is how a tool call is shown in ACP: title, kind, the files it
// touches (locations, for follow-along) and content (diffs of edit and
// write).
type callView struct {
	title     string
	kind      string
	locations []map[string]any
	content   []map[string]any
}

// callArgs are the arguments of octet's built-in tools that name what a
// call touches.
type callArgs struct {
	Path    *string `json:"path"`
	Offset  *int    `json:"offset"`
	OldText *string `json:"old_text"`
	NewText *string `json:"new_text"`
	Content *string `json:"content"`
	Command *string `json:"command"`
	Pattern *string `json:"pattern"`
}

// toolKinds maps octet's tools to ACP tool kinds.
var toolKinds = map[string]string{
	"read": "read", "search": "search", "edit": "edit", "write": "edit", "bash": "execute",
}

// describeCall returns the view of a call of tool with args (the
// model's, possibly invalid: every field is optional); old, when not nil,
// gives a file's current text for the old side of a write's diff.
func describeCall(cwd, tool string, args []byte, old func(abs string) (string, bool)) callView {
	v := callView{title: tool, kind: "other"}
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
	abs := ""
	if path != "" {
		abs = path
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(cwd, abs)
		}
		abs = filepath.Clean(abs)
		loc := map[string]any{"path": abs}
		if a.Offset != nil && *a.Offset > 0 {
			loc["line"] = *a.Offset
		}
		v.locations = append(v.locations, loc)
	}
	switch tool {
	case "read", "edit", "write":
		if path != "" {
			v.title = tool + " " + truncate(path, 200)
		}
	case "search":
		v.title = "search " + truncate(firstLine(str(a.Pattern)), 120)
		if path != "" {
			v.title += " in " + truncate(path, 200)
		}
	case "bash":
		if c := str(a.Command); c != "" {
			v.title = "bash: " + truncate(firstLine(c), 200)
		}
	}
	switch {
	case tool == "edit" && abs != "" && a.OldText != nil && a.NewText != nil:
		v.content = append(v.content, map[string]any{"type": "diff", "path": abs, "oldText": *a.OldText, "newText": *a.NewText})
	case tool == "write" && abs != "" && a.Content != nil:
		d := map[string]any{"type": "diff", "path": abs, "newText": *a.Content, "oldText": nil}
		if old != nil {
			if text, ok := old(abs); ok {
				d["oldText"] = text
			}
		}
		v.content = append(v.content, d)
	}
	return v
}

// readOld returns the current text of the workspace file abs, for the old
// side of a write's diff: inside cwd only, without following links,
// bounded, UTF-8.
func readOld(cwd, abs string) (string, bool) {
	rel, err := filepath.Rel(cwd, abs)
	if err != nil || !filepath.IsLocal(rel) {
		return "", false
	}
	root, err := fsroot.Open(cwd)
	if err != nil {
		return "", false
	}
	defer root.Close()
	data, _, err := root.ReadFile(filepath.ToSlash(rel), maxDiffSide)
	if err != nil || !utf8.Valid(data) {
		return "", false
	}
	return string(data), true
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

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n" + b
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
