package tools

import (
	"fmt"
	"strings"
)

// This file parses and applies the patch format of apply_patch, the
// file-oriented diff Codex-family models are trained on:
//
//	*** Begin Patch
//	*** Add File: path        then the new file's lines, each prefixed "+"
//	*** Delete File: path
//	*** Update File: path
//	*** Move to: new/path     (optional, right after Update File)
//	@@ optional context line  then " " context, "-" removed, "+" added lines
//	*** End of File           (optional: the hunk's lines end the file)
//	*** End Patch
//
// Line numbers are not used: each hunk is located by its context and
// removed lines, searched forward from the previous hunk. Parsing and
// applying are pure (no file access), so every error names the patch
// line or the hunk and what to do.

// Bounds of one patch.
const (
	// MaxPatchFiles bounds the file sections of one patch: a larger
	// change is several calls (and several approvals).
	MaxPatchFiles = 64
	// maxPatchBytes bounds the patch text (the write limit: a patch that
	// adds one file whole must fit).
	maxPatchBytes = MaxFileBytes
)

// Patch markers.
const (
	patchBegin     = "*** Begin Patch"
	patchEnd       = "*** End Patch"
	patchAdd       = "*** Add File:"
	patchDelete    = "*** Delete File:"
	patchUpdate    = "*** Update File:"
	patchMove      = "*** Move to:"
	patchEndOfFile = "*** End of File"
)

// patchOp is what one file section of a patch does.
type patchOp int

const (
	opAdd patchOp = iota
	opDelete
	opUpdate
)

func (op patchOp) String() string {
	switch op {
	case opAdd:
		return "add"
	case opDelete:
		return "delete"
	}
	return "update"
}

// patchFile is one file section of a patch.
type patchFile struct {
	op   patchOp
	path string
	// moveTo is the new path of an update that moves the file ("": none).
	moveTo string
	// content is an added file's text.
	content string
	// hunks are an update's changes, in file order.
	hunks []patchHunk
	// line is the 1-based line of the section's header in the patch.
	line int
}

// patchHunk is one change of an update: the lines it replaces, located
// after its context lines (the "@@ …" lines, each searched in turn), and
// the lines that replace them.
type patchHunk struct {
	context  []string
	old, new []string
	// eof says the old lines end the file.
	eof  bool
	line int
}

// PatchError is a patch the tool cannot parse or apply; it says where
// (a patch line, or a file's hunk) and why.
type PatchError struct {
	// Line is the 1-based patch line, 0 when the error is not about one.
	Line int
	Msg  string
}

func (e *PatchError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("patch line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

func patchErrorf(line int, format string, args ...any) error {
	return &PatchError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// unifiedRange matches what follows "@@ " in a unified diff's hunk header
// ("-12,3 +12,4 @@"): models used to unified diffs write it, and it names
// no line of the file, so the hunk is treated as having no context line.
var unifiedRange = lazyRegexp(`^-\d+(,\d+)? \+\d+(,\d+)? @@`)

// parsePatch parses the text of an apply_patch call. A patch wrapped in a
// shell here-document (<<'EOF' … EOF), as models that call apply_patch
// through a shell write it, is accepted.
func parsePatch(text string) ([]patchFile, error) {
	if len(text) > maxPatchBytes {
		return nil, patchErrorf(0, "the patch is larger than the %d MiB limit: split it into several calls", maxPatchBytes>>20)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	first := 1 // patch line number of lines[0]
	if len(lines) >= 4 && isHeredocStart(lines[0]) && strings.TrimSpace(lines[len(lines)-1]) == "EOF" {
		lines, first = lines[1:len(lines)-1], 2
	}
	if strings.TrimSpace(lines[0]) != patchBegin {
		return nil, patchErrorf(first, "the first line must be %q", patchBegin)
	}
	if len(lines) < 2 || strings.TrimSpace(lines[len(lines)-1]) != patchEnd {
		return nil, patchErrorf(first+len(lines)-1, "the last line must be %q", patchEnd)
	}
	p := patchParser{lines: lines[1 : len(lines)-1], base: first + 1}
	files, err := p.files()
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, patchErrorf(first, "the patch changes no file: add a *** Add File, *** Update File or *** Delete File section")
	}
	return files, checkDistinct(files)
}

func isHeredocStart(l string) bool {
	switch strings.TrimSpace(l) {
	case "<<EOF", "<<'EOF'", `<<"EOF"`:
		return true
	}
	return false
}

// checkDistinct refuses a patch that names one path twice (two sections,
// or a move onto a path another section names): each file is planned
// from its state before the patch, so the sections must not overlap.
func checkDistinct(files []patchFile) error {
	seen := map[string]int{}
	for _, f := range files {
		for _, p := range []string{f.path, f.moveTo} {
			if p == "" {
				continue
			}
			if prev, ok := seen[p]; ok {
				return patchErrorf(f.line, "%s is already changed by the section at line %d: change each file in one section", shownPath(p), prev)
			}
			seen[p] = f.line
		}
	}
	if len(files) > MaxPatchFiles {
		return patchErrorf(0, "the patch changes %d files, more than the %d one call may change: split it into several calls", len(files), MaxPatchFiles)
	}
	return nil
}

// patchParser walks the lines between Begin Patch and End Patch.
type patchParser struct {
	lines []string
	base  int // patch line number of lines[0]
	i     int
}

func (p *patchParser) lineNo() int { return p.base + p.i }

func (p *patchParser) files() ([]patchFile, error) {
	var files []patchFile
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if strings.TrimSpace(l) == "" {
			p.i++
			continue
		}
		f, err := p.section(strings.TrimSpace(l))
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// section parses the file section whose header is h (trimmed).
func (p *patchParser) section(h string) (patchFile, error) {
	f := patchFile{line: p.lineNo()}
	var path string
	switch {
	case strings.HasPrefix(h, patchAdd):
		f.op, path = opAdd, h[len(patchAdd):]
	case strings.HasPrefix(h, patchDelete):
		f.op, path = opDelete, h[len(patchDelete):]
	case strings.HasPrefix(h, patchUpdate):
		f.op, path = opUpdate, h[len(patchUpdate):]
	default:
		return f, patchErrorf(f.line, "%s is not a section header: a section starts with %q, %q or %q",
			quoteLine(h), patchAdd+" <path>", patchUpdate+" <path>", patchDelete+" <path>")
	}
	if f.path = strings.TrimSpace(path); f.path == "" {
		return f, patchErrorf(f.line, "%s names no path", quoteLine(h))
	}
	p.i++
	switch f.op {
	case opAdd:
		return f, p.addBody(&f)
	case opUpdate:
		return f, p.updateBody(&f)
	}
	return f, nil
}

// addBody reads an added file's "+" lines.
func (p *patchParser) addBody(f *patchFile) error {
	var b strings.Builder
	for ; p.i < len(p.lines); p.i++ {
		l := p.lines[p.i]
		if strings.HasPrefix(l, "***") {
			break
		}
		rest, ok := strings.CutPrefix(l, "+")
		if !ok {
			return patchErrorf(p.lineNo(), "every line of an added file starts with \"+\" (%s does not)", quoteLine(l))
		}
		b.WriteString(rest)
		b.WriteByte('\n')
	}
	f.content = b.String()
	return nil
}

// updateBody reads an update's optional Move to line and its hunks.
func (p *patchParser) updateBody(f *patchFile) error {
	if p.i < len(p.lines) {
		if to, ok := strings.CutPrefix(strings.TrimSpace(p.lines[p.i]), patchMove); ok {
			if f.moveTo = strings.TrimSpace(to); f.moveTo == "" {
				return patchErrorf(p.lineNo(), "*** Move to: names no path")
			}
			p.i++
		}
	}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if strings.TrimSpace(l) == "" {
			p.i++ // blank lines between hunks
			continue
		}
		if strings.HasPrefix(l, "***") && strings.TrimSpace(l) != patchEndOfFile {
			break // the next section
		}
		h, err := p.hunk(len(f.hunks) == 0)
		if err != nil {
			return err
		}
		f.hunks = append(f.hunks, h)
	}
	if len(f.hunks) == 0 && f.moveTo == "" {
		return patchErrorf(f.line, "the update of %s has no hunk: add \"@@\" and the lines to change, or drop the section", shownPath(f.path))
	}
	return nil
}

// hunk reads one hunk: its "@@" lines (the first hunk of a file may have
// none), then its body lines up to the next "@@", section or End of File.
func (p *patchParser) hunk(first bool) (patchHunk, error) {
	h := patchHunk{line: p.lineNo()}
	start := p.i
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l == "@@" {
			p.i++
			continue
		}
		ctx, ok := strings.CutPrefix(l, "@@ ")
		if !ok {
			break
		}
		if !unifiedRange().MatchString(strings.TrimSpace(ctx)) {
			h.context = append(h.context, ctx)
		}
		p.i++
	}
	if p.i == start && !first {
		return h, patchErrorf(h.line, "a hunk starts with \"@@\" (%s does not)", quoteLine(p.lines[p.i]))
	}
	body, blanks := 0, 0
loop:
	for ; p.i < len(p.lines); p.i++ {
		l := p.lines[p.i]
		switch {
		case strings.TrimSpace(l) == patchEndOfFile:
			if body == 0 {
				return h, patchErrorf(p.lineNo(), "*** End of File ends a hunk with no lines")
			}
			h.eof = true
			p.i++
			break loop
		case l == "":
			// An empty line is an empty context line.
			h.old, h.new = append(h.old, ""), append(h.new, "")
			blanks++
		case l[0] == ' ':
			h.old, h.new = append(h.old, l[1:]), append(h.new, l[1:])
			blanks = 0
		case l[0] == '-':
			h.old = append(h.old, l[1:])
			blanks = 0
		case l[0] == '+':
			h.new = append(h.new, l[1:])
			blanks = 0
		case body > 0 && (l == "@@" || strings.HasPrefix(l, "@@ ") || strings.HasPrefix(l, "***")):
			break loop // the next hunk or section
		default:
			return h, patchErrorf(p.lineNo(), "every line of a hunk starts with \" \" (context), \"-\" (removed) or \"+\" (added); %s does not", quoteLine(l))
		}
		body++
	}
	if body == 0 {
		return h, patchErrorf(h.line, "the hunk has no lines")
	}
	// Empty lines that end a hunk (not before End of File) are most
	// likely blank lines before the next section, not context.
	if blanks > 0 && blanks < body && !h.eof {
		h.old, h.new = h.old[:len(h.old)-blanks], h.new[:len(h.new)-blanks]
	}
	return h, nil
}

// quoteLine is a patch line as an error names it: quoted, at most 80
// bytes.
func quoteLine(l string) string {
	if len(l) > 80 {
		l = l[:80] + "…"
	}
	return fmt.Sprintf("%q", l)
}

// applyHunks applies an update's hunks to content and returns the new
// content. The file's line ending is kept: in a CRLF file (its first line
// ends with CR LF) the lines a hunk adds end with CR LF too, and lines the
// patch does not touch are never rewritten. Each hunk's old lines are
// searched forward from the previous hunk: exactly, then ignoring
// trailing whitespace, then ignoring surrounding whitespace, then also
// ignoring typographic punctuation, so the diff the approval shows is
// what a person judges. An error names the hunk and why.
func applyHunks(display, content string, hunks []patchHunk) (string, error) {
	lines := strings.Split(content, "\n")
	finalNewline := strings.HasSuffix(content, "\n")
	if finalNewline || content == "" {
		lines = lines[:len(lines)-1]
	}
	crlf := len(lines) > 0 && strings.HasSuffix(lines[0], "\r") && strings.Contains(content, "\r\n")
	type replacement struct {
		at, n int
		with  []string
	}
	var reps []replacement
	at := 0
	for k, h := range hunks {
		where := func() string {
			return fmt.Sprintf("hunk %d of %d for %s (patch line %d)", k+1, len(hunks), shownPath(display), h.line)
		}
		for _, c := range h.context {
			i := seekLines(lines, []string{c}, at, false)
			if i < 0 {
				return "", fmt.Errorf("%s: the context line %q was not found%s; read the file again and copy a line that is in it", where(), c, after(at))
			}
			at = i + 1
		}
		with := h.new
		if crlf {
			with = make([]string, len(h.new))
			for i, l := range h.new {
				with[i] = l + "\r"
			}
		}
		if len(h.old) == 0 {
			// Only added lines: after the context, or at the end.
			i := len(lines)
			if len(h.context) > 0 {
				i = at
			}
			reps = append(reps, replacement{at: i, with: with})
			at = i
			continue
		}
		old := h.old
		i := seekLines(lines, old, at, h.eof)
		if i < 0 && old[len(old)-1] == "" {
			// A trailing empty line is often the file's final newline.
			old = old[:len(old)-1]
			if len(with) > 0 && strings.TrimSuffix(with[len(with)-1], "\r") == "" {
				with = with[:len(with)-1]
			}
			if len(old) > 0 {
				i = seekLines(lines, old, at, h.eof)
			}
		}
		if i < 0 {
			return "", fmt.Errorf("%s: these lines were not found%s:\n%s\nread the file again and copy the lines exactly (without read's line-number prefixes)", where(), after(at), indentLines(h.old))
		}
		reps = append(reps, replacement{at: i, n: len(old), with: with})
		at = i + len(old)
	}
	var out []string
	prev := 0
	for _, r := range reps {
		out = append(out, lines[prev:r.at]...)
		out = append(out, r.with...)
		prev = r.at + r.n
	}
	out = append(out, lines[prev:]...)
	s := strings.Join(out, "\n")
	if len(out) > 0 && (finalNewline || content == "") {
		s += "\n"
	}
	return s, nil
}

func after(at int) string {
	if at == 0 {
		return ""
	}
	return fmt.Sprintf(" after line %d", at)
}

// indentLines shows lines as an error quotes them: each on its own line,
// indented, at most 20 of them.
func indentLines(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		if i == 20 {
			fmt.Fprintf(&b, "    … (%d more lines)\n", len(lines)-i)
			break
		}
		b.WriteString("    ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// seekLines returns the index of the first occurrence of pattern in lines
// at or after start (with eof: at the end of lines first), or -1. It
// tries exact lines (a file line's CR ignored), then ever more lenient
// comparisons (see applyHunks).
func seekLines(lines, pattern []string, start int, eof bool) int {
	if len(pattern) == 0 || len(pattern) > len(lines) || start > len(lines)-len(pattern) {
		return -1
	}
	for _, eq := range lineMatchers {
		if eof {
			if i := len(lines) - len(pattern); i >= start && matchAt(lines, pattern, i, eq) {
				return i
			}
		}
		for i := start; i <= len(lines)-len(pattern); i++ {
			if matchAt(lines, pattern, i, eq) {
				return i
			}
		}
	}
	return -1
}

func matchAt(lines, pattern []string, i int, eq func(a, b string) bool) bool {
	for j, p := range pattern {
		if !eq(strings.TrimSuffix(lines[i+j], "\r"), p) {
			return false
		}
	}
	return true
}

// lineMatchers are the comparisons seekLines tries, strictest first.
var lineMatchers = []func(a, b string) bool{
	func(a, b string) bool { return a == b },
	func(a, b string) bool { return strings.TrimRight(a, " \t") == strings.TrimRight(b, " \t") },
	func(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) },
	func(a, b string) bool { return plainPunct(a) == plainPunct(b) },
}

// punct maps typographic dashes, quotes and spaces to their ASCII forms.
var punct = strings.NewReplacer(
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
	"\u2018", "'", "\u2019", "'", "\u201a", "'", "\u201b", "'",
	"\u201c", `"`, "\u201d", `"`, "\u201e", `"`, "\u201f", `"`,
	"\u00a0", " ", "\u2002", " ", "\u2003", " ", "\u2004", " ", "\u2005", " ", "\u2006", " ",
	"\u2007", " ", "\u2008", " ", "\u2009", " ", "\u200a", " ", "\u202f", " ", "\u205f", " ", "\u3000", " ",
)

func plainPunct(s string) string { return strings.TrimSpace(punct.Replace(s)) }

// PatchPaths returns the paths an apply_patch input names (sections and
// move destinations, in order), or nil when it does not parse: for a
// surface that shows which files a call touches before it runs.
func PatchPaths(input string) []string {
	files, err := parsePatch(input)
	if err != nil {
		return nil
	}
	var out []string
	for _, f := range files {
		out = append(out, f.path)
		if f.moveTo != "" {
			out = append(out, f.moveTo)
		}
	}
	return out
}
