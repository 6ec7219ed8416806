package tools

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	unix "github.com/octet-agent/octet/internal/unixfd"

	"github.com/octet-agent/octet/internal/fsroot"
)

//go:embed search.md
var searchDescription string

var searchSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "Go RE2 regular expression (or plain text with literal)."},
    "path": {"type": "string", "description": "File or directory to search, relative to the workspace root."},
    "glob": {"type": "string", "description": "Only search files matching this glob (*.go, src/**/*.ts)."},
    "literal": {"type": "boolean", "description": "Treat pattern as plain text."},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Maximum matching lines (default 100)."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`)

// SearchTool is the built-in search tool: a parallel, gitignore-aware,
// no-follow line search over the workspace.
type SearchTool struct {
	cfg Config
}

var _ Tool = (*SearchTool)(nil)

// NewSearch constructs the search tool.
func NewSearch(cfg Config) (*SearchTool, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	return &SearchTool{cfg: cfg}, nil
}

type searchArgs struct {
	Pattern    *string `json:"pattern"`
	Path       *string `json:"path"`
	Glob       *string `json:"glob"`
	Literal    bool    `json:"literal"`
	MaxResults *int    `json:"max_results"`
}

// searchQuery is a parsed, compiled search.
type searchQuery struct {
	path       string
	matcher    *lineMatcher
	glob       *regexp.Regexp
	globOnBase bool
	maxResults int
}

func (t *SearchTool) parse(raw json.RawMessage) (searchQuery, error) {
	var a searchArgs
	if err := decodeBuiltinArgs(raw, &a); err != nil {
		return searchQuery{}, err
	}
	q := searchQuery{path: ".", maxResults: DefaultSearchResults}
	if a.Pattern == nil {
		return q, errors.New("missing required argument pattern")
	}
	if a.Path != nil && *a.Path != "" {
		if err := t.cfg.pathArg(*a.Path); err != nil {
			return q, err
		}
		q.path = *a.Path
	}
	if a.MaxResults != nil {
		if *a.MaxResults < 1 || *a.MaxResults > MaxSearchResults {
			return q, fmt.Errorf("max_results must be between 1 and %d", MaxSearchResults)
		}
		q.maxResults = *a.MaxResults
	}
	m, err := newLineMatcher(*a.Pattern, a.Literal)
	if err != nil {
		return q, err
	}
	q.matcher = m
	if a.Glob != nil && *a.Glob != "" {
		re, err := globRegexp(*a.Glob)
		if err != nil {
			return q, err
		}
		q.glob, q.globOnBase = re, !strings.Contains(strings.TrimPrefix(*a.Glob, "/"), "/")
	}
	return q, nil
}

// Name returns "search".
func (t *SearchTool) Name() string { return "search" }

// Description returns the embedded search.md.
func (t *SearchTool) Description() string { return searchDescription }

// Schema returns the search argument schema.
func (t *SearchTool) Schema() json.RawMessage { return searchSchema }

// Concurrency reports Parallel: searches only read.
func (t *SearchTool) Concurrency() Concurrency { return Parallel }

// ReplaySafety reports ReplaySafe: searching again is harmless.
func (t *SearchTool) ReplaySafety() ReplaySafety { return ReplaySafe }

// Classify returns WorkspaceRead, or HostRead for every call when external
// paths are allowed. An invalid pattern or glob is an argument error.
func (t *SearchTool) Classify(args json.RawMessage) (Effect, error) {
	if _, err := t.parse(args); err != nil {
		return Unknown, err
	}
	return t.cfg.readEffect(), nil
}

// Execute runs the search.
func (t *SearchTool) Execute(ctx context.Context, inv Invocation) (Result, error) {
	q, err := t.parse(inv.Arguments)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	hits, stats, err := t.search(ctx, q)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return errorResult(fileErrorText(q.path, err)), nil
	}
	return t.format(q, hits, stats), nil
}

// searchStats counts what a search did.
type searchStats struct {
	files, binary, large int64
	total                int64 // matching lines, shown or not
	limited              bool
	editor               []string // files searched from open editor documents
}

// searchHit is one matching line.
type searchHit struct {
	path string
	line int
	text string
}

// search resolves q.path and walks it.
func (t *SearchTool) search(ctx context.Context, q searchQuery) ([]searchHit, searchStats, error) {
	var root *fsroot.Root
	var start, prefix string
	var err error
	if filepath.IsAbs(q.path) && !strings.HasPrefix(filepath.Clean(q.path)+"/", t.cfg.Root+"/") {
		// External directory or file (only reachable when allowed).
		abs := filepath.Clean(q.path)
		if root, err = fsroot.Open(abs); err == nil {
			start, prefix = ".", abs
		} else if errors.Is(err, unix.ENOTDIR) {
			root, err = fsroot.Open(filepath.Dir(abs))
			start, prefix = filepath.Base(abs), filepath.Dir(abs)
		}
		if err != nil {
			return nil, searchStats{}, err
		}
	} else {
		rel := q.path
		if filepath.IsAbs(rel) {
			rel = strings.TrimPrefix(strings.TrimPrefix(filepath.Clean(rel), t.cfg.Root), "/")
			if rel == "" {
				rel = "."
			}
		}
		if start, err = fsroot.CleanRel(rel); err != nil {
			return nil, searchStats{}, err
		}
		if root, err = fsroot.Open(t.cfg.Root); err != nil {
			return nil, searchStats{}, err
		}
	}
	defer root.Close()
	w := newWalker(q, root, prefix)
	w.docs, w.base = t.cfg.Documents, t.cfg.Root
	if prefix != "" {
		w.base = prefix
	}
	return w.run(ctx, start)
}

// format renders hits as path:line:text within the output limit.
func (t *SearchTool) format(q searchQuery, hits []searchHit, st searchStats) Result {
	details := map[string]any{"matches": len(hits), "total_matches": st.total, "files_searched": st.files}
	if st.binary > 0 {
		details["skipped_binary"] = st.binary
	}
	if st.large > 0 {
		details["skipped_large"] = st.large
	}
	if len(st.editor) > 0 {
		details["source"], details["editor_files"] = editorSource, st.editor
	}
	if len(hits) == 0 {
		details["truncated"] = false
		return Result{Text: fmt.Sprintf("No matches (%d files searched).", st.files), Details: details}
	}
	var b strings.Builder
	const noteRoom = 200
	shown := 0
	for _, h := range hits {
		line := fmt.Sprintf("%s:%d:%s\n", h.path, h.line, h.text)
		if b.Len()+len(line) > t.cfg.MaxOutputBytes-noteRoom {
			break
		}
		b.WriteString(line)
		shown++
	}
	truncated := st.limited || shown < len(hits)
	if st.limited {
		fmt.Fprintf(&b, "[%d matching lines in total; showing the first %d by path and line; narrow the search with path or glob, or raise max_results]\n", st.total, min(len(hits), q.maxResults))
	}
	if shown < len(hits) {
		fmt.Fprintf(&b, "[output truncated: %d of %d matching lines shown]\n", shown, len(hits))
	}
	details["truncated"] = truncated
	text, _ := clipUTF8(b.String(), t.cfg.MaxOutputBytes)
	return Result{Text: text, Details: details}
}

// lineMatcher finds matching lines in a file's content. A regexp is
// confirmed line by line, and only on candidate lines when a prefilter
// exists: a literal every match contains (found with bytes.Index), or an
// ASCII byte class every match contains a run of (found with a table scan).
// Go's regexp runs short inputs on its backtracker, so matching single lines
// beats one whole-buffer scan (the NFA) by an order of magnitude.
type lineMatcher struct {
	literal []byte         // literal search, or the regexp's required literal
	set     *[256]bool     // required byte class (when no good literal)
	run     int            // required run length of set bytes
	also    [][]byte       // other required literals, checked before re
	re      *regexp.Regexp // nil for literal search
	dfa     *lineDFA       // re's automaton (nil: re alone)
}

func newLineMatcher(pattern string, literal bool) (*lineMatcher, error) {
	if pattern == "" {
		return nil, errors.New("pattern must not be empty")
	}
	if literal {
		if strings.ContainsAny(pattern, "\n\r") {
			return nil, errors.New("a literal pattern must not contain a line break (search matches single lines)")
		}
		return &lineMatcher{literal: []byte(pattern)}, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression: %w", err)
	}
	m := &lineMatcher{re: re}
	if parsed, err := syntax.Parse(pattern, syntax.Perl); err == nil {
		m.choosePrefilter(parsed)
		m.dfa = newLineDFA(parsed)
	}
	return m, nil
}

// prefilter is one thing every match must contain.
type prefilter struct {
	lit  string
	set  *[256]bool
	run  int
	freq float64 // estimated share of positions where it occurs
}

// maxPrefilterFreq is the estimated frequency above which a byte-class
// prefilter would confirm most lines anyway and is not worth it.
const maxPrefilterFreq = 0.02

// choosePrefilter picks the most selective required piece of re.
func (m *lineMatcher) choosePrefilter(re *syntax.Regexp) {
	var cands []prefilter
	requiredPieces(re, &cands)
	best := prefilter{freq: 1}
	for _, c := range cands {
		if len(c.lit) >= 2 {
			// Long literals: bytes.Index is the fastest scan there is.
			if best.lit == "" || len(best.lit) < 2 || len(c.lit) > len(best.lit) {
				best = c
			}
			continue
		}
		if len(best.lit) < 2 && c.freq < best.freq {
			best = c
		}
	}
	for _, c := range cands {
		if c.lit != "" && c.lit != best.lit && len(m.also) < 4 {
			m.also = append(m.also, []byte(c.lit))
		}
	}
	switch {
	case len(best.lit) >= 2:
		m.literal = []byte(best.lit)
	case best.freq > maxPrefilterFreq:
		// Nothing selective: match every line.
	case best.lit != "":
		m.literal = []byte(best.lit)
	case best.set != nil:
		m.set, m.run = best.set, best.run
	}
}

// requiredPieces appends the literals and byte-class runs that every match
// of re contains. Case-folded and non-ASCII pieces are left out.
func requiredPieces(re *syntax.Regexp, out *[]prefilter) {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase == 0 {
			s := string(re.Rune)
			*out = append(*out, prefilter{lit: s, freq: literalFreq(s)})
		}
	case syntax.OpCharClass:
		if set, f, ok := asciiClass(re); ok {
			*out = append(*out, prefilter{set: set, run: 1, freq: f})
		}
	case syntax.OpCapture:
		requiredPieces(re.Sub[0], out)
	case syntax.OpPlus:
		requiredPieces(re.Sub[0], out)
	case syntax.OpRepeat:
		if re.Min < 1 {
			return
		}
		sub := re.Sub[0]
		if sub.Op == syntax.OpCharClass && re.Min >= 2 {
			if set, f, ok := asciiClass(sub); ok {
				*out = append(*out, prefilter{set: set, run: re.Min, freq: math.Pow(f, float64(re.Min))})
				return
			}
		}
		requiredPieces(sub, out)
	case syntax.OpConcat:
		run := ""
		flush := func() {
			if run != "" {
				*out = append(*out, prefilter{lit: run, freq: literalFreq(run)})
				run = ""
			}
		}
		for _, sub := range re.Sub {
			if sub.Op == syntax.OpLiteral && sub.Flags&syntax.FoldCase == 0 {
				run += string(sub.Rune)
				continue
			}
			flush()
			requiredPieces(sub, out)
		}
		flush()
	}
}

// asciiClass turns an ASCII-only character class without a line break into
// a byte table and its estimated frequency.
func asciiClass(re *syntax.Regexp) (*[256]bool, float64, bool) {
	var set [256]bool
	f := 0.0
	for i := 0; i+1 < len(re.Rune); i += 2 {
		lo, hi := re.Rune[i], re.Rune[i+1]
		if hi > 0x7e || lo <= '\n' && hi >= '\n' {
			return nil, 0, false
		}
		for r := lo; r <= hi; r++ {
			set[r] = true
			f += byteFreq(byte(r))
		}
	}
	return &set, f, true
}

// byteRank orders printable ASCII from most to least frequent in source
// code (measured over the Go tree; a heuristic, as in ripgrep).
const byteRank = `et0rnaiso,xlcfdu1p./()2m:gh"=4bS3_6TAE{y}Rv8O\\CI5PD9M7kXLVFwNB-[]U*GH!W+Y&<;zK%|'Q>qj$Z` + "`" + `#J^?@~`

// byteFreq estimates how often b occurs in text.
func byteFreq(b byte) float64 {
	switch b {
	case ' ':
		return 0.15
	case '\t', '\n':
		return 0.035
	}
	if i := strings.IndexByte(byteRank, b); i >= 0 {
		return 0.05 * math.Exp(-float64(i)/14)
	}
	return 0.0005
}

// literalFreq estimates a literal's frequency by its rarest byte.
func literalFreq(s string) float64 {
	f := 1.0
	for i := 0; i < len(s); i++ {
		f = min(f, byteFreq(s[i]))
	}
	return f
}

// scan calls emit(lineNumber, line) for each matching line of data, in
// order, until emit returns false.
func (m *lineMatcher) scan(data []byte, emit func(int, []byte) bool) {
	switch {
	case m.literal != nil:
		lit := m.literal
		m.scanCandidates(data, emit, func(b []byte) int { return bytes.Index(b, lit) })
	case m.set != nil:
		set, run := m.set, m.run
		m.scanCandidates(data, emit, func(b []byte) int { return findRun(b, set, run) })
	default:
		m.scanLines(data, emit)
	}
}

// scanCandidates visits each line holding a candidate position (find
// returns the first one in b, or -1) and confirms it with the regexp.
func (m *lineMatcher) scanCandidates(data []byte, emit func(int, []byte) bool, find func([]byte) int) {
	lineNo, counted, pos := 1, 0, 0
	for pos < len(data) {
		i := find(data[pos:])
		if i < 0 {
			return
		}
		start := pos + i
		ls := bytes.LastIndexByte(data[pos:start], '\n') + 1 + pos
		le := len(data)
		if j := bytes.IndexByte(data[start:], '\n'); j >= 0 {
			le = start + j
		}
		line := data[ls:le]
		if m.re == nil || (m.hasAlso(line) && m.matchLine(line)) {
			lineNo += bytes.Count(data[counted:ls], []byte{'\n'})
			counted = ls
			if !emit(lineNo, line) {
				return
			}
		}
		pos = le + 1
	}
}

// hasAlso reports whether line holds every other required literal, a
// cheap test that spares most regexp runs on candidate lines.
func (m *lineMatcher) hasAlso(line []byte) bool {
	for _, lit := range m.also {
		if !bytes.Contains(line, lit) {
			return false
		}
	}
	return true
}

// matchLine reports whether the regexp matches in line: the automaton's
// answer, or the regexp package's when the automaton is full.
func (m *lineMatcher) matchLine(line []byte) bool {
	if m.dfa != nil {
		if found, ok := m.dfa.match(line); ok {
			return found
		}
	}
	return m.re.Match(line)
}

// findRun returns the index of the first run of at least n bytes of set
// in b, or -1. It looks at the last byte of each window of n first: when
// that byte is not in set, no run can cover the window and the scan skips
// past it, so a selective class costs about 1/n of a byte-by-byte scan.
func findRun(b []byte, set *[256]bool, n int) int {
	if n <= 1 {
		for i, c := range b {
			if set[c] {
				return i
			}
		}
		return -1
	}
	// No run starts before i (each skip passed a byte not in set).
	for i := 0; i+n <= len(b); {
		p := i + n - 1
		if !set[b[p]] {
			i = p + 1
			continue
		}
		j := p
		for j > i && set[b[j-1]] {
			j--
		}
		if j == i {
			return i
		}
		i = j
	}
	return -1
}

// scanLines matches the regexp against every line on its own.
func (m *lineMatcher) scanLines(data []byte, emit func(int, []byte) bool) {
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if m.hasAlso(line) && m.matchLine(line) && !emit(lineNo, line) {
			return
		}
	}
}

// globRegexp compiles a glob: * and ? within a path component, ** across
// components, [...] classes and {a,b} alternatives.
func globRegexp(glob string) (*regexp.Regexp, error) {
	g := strings.TrimPrefix(glob, "/")
	var b strings.Builder
	b.WriteString("^")
	depth := 0
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch c {
		case '*':
			if i+1 < len(g) && g[i+1] == '*' {
				i++
				if i+1 < len(g) && g[i+1] == '/' {
					i++
					b.WriteString("(?:.*/)?")
				} else {
					b.WriteString(".*")
				}
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				return nil, fmt.Errorf("invalid glob %q: unterminated [", glob)
			}
			class := g[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		case '{':
			depth++
			b.WriteString("(?:")
		case '}':
			if depth == 0 {
				return nil, fmt.Errorf("invalid glob %q: unmatched }", glob)
			}
			depth--
			b.WriteString(")")
		case ',':
			if depth > 0 {
				b.WriteString("|")
			} else {
				b.WriteString(",")
			}
		case '\\':
			if i+1 < len(g) {
				i++
				b.WriteString(regexp.QuoteMeta(string(g[i])))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("invalid glob %q: unmatched {", glob)
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("invalid glob %q: %w", glob, err)
	}
	return re, nil
}

// dirRef is a shared, reference-counted directory descriptor: each queued
// child directory holds a reference until it has been opened from it.
type dirRef struct {
	fd   int
	refs atomic.Int32
}

func (d *dirRef) release() {
	if d.refs.Add(-1) == 0 {
		unix.Close(d.fd)
	}
}

// dirJob is a directory waiting to be searched: name opened relative to
// parent with O_NOFOLLOW, so no job can leave the tree.
//
// A job with files set is instead a batch of regular files of the
// directory parent, so one large directory is searched by every worker.
type dirJob struct {
	parent *dirRef
	name   string
	rel    string   // path relative to the search root's fsroot
	parts  []string // rel split, for gitignore matching
	ignore *ignoreDir
	files  []fileEntry
}

// fileEntry is one file of a batch job.
type fileEntry struct{ name, rel string }

// fileBatch is how many files of one directory a worker searches before
// the rest are offered to other workers.
const fileBatch = 8

// walker is one search: a bounded pool of workers taking directories from
// a LIFO stack (depth-first keeps few descriptors open).
type walker struct {
	q      searchQuery
	root   *fsroot.Root
	prefix string // display prefix for external roots
	// docs, when set, supplies open editor documents, which are searched
	// instead of their files; base is the absolute path of the root.
	docs Documents
	base string

	mu      sync.Mutex
	cond    *sync.Cond
	stack   []dirJob
	pending int // queued or in-progress jobs

	stop    atomic.Bool // cancellation
	matches atomic.Int64
	stats   struct{ files, binary, large atomic.Int64 }

	resMu sync.Mutex
	hits  []searchHit
	err   error

	edMu   sync.Mutex
	editor []string // display paths searched from the editor (bounded)
}

// maxEditorPathsShown bounds the editor-document paths a search result
// names in its details.
const maxEditorPathsShown = 100

// editorText returns the open editor document at rel, when there is one,
// and records that the search saw it.
func (w *walker) editorText(rel string) ([]byte, bool) {
	if w.docs == nil {
		return nil, false
	}
	doc, ok := w.docs.Document(filepath.Join(w.base, rel))
	if !ok || doc.Untracked {
		return nil, false
	}
	w.edMu.Lock()
	if len(w.editor) < maxEditorPathsShown {
		w.editor = append(w.editor, w.display(rel))
	}
	w.edMu.Unlock()
	return doc.Text, true
}

// display is how results name rel.
func (w *walker) display(rel string) string {
	if w.prefix != "" {
		return filepath.Join(w.prefix, rel)
	}
	return rel
}

func newWalker(q searchQuery, root *fsroot.Root, prefix string) *walker {
	w := &walker{q: q, root: root, prefix: prefix}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// run searches start (a directory or a file beneath the root).
func (w *walker) run(ctx context.Context, start string) ([]searchHit, searchStats, error) {
	dir, err := w.root.OpenDir(start)
	if err != nil {
		if !errors.Is(err, unix.ENOTDIR) {
			return nil, searchStats{}, err
		}
		if err := w.searchOneFile(start); err != nil {
			return nil, searchStats{}, err
		}
		return w.finish()
	}
	// The start directory is opened; hand its descriptor to a ref.
	fd, err := unix.Dup(int(dir.Fd()))
	dir.Close()
	if err != nil {
		return nil, searchStats{}, err
	}
	ref := &dirRef{fd: fd}
	ref.refs.Store(1)
	parts := splitParts(start)
	w.stack = append(w.stack, dirJob{parent: ref, name: ".", rel: start, parts: parts, ignore: w.ancestorIgnores(parts)})
	w.pending = 1

	stopWatch := context.AfterFunc(ctx, func() {
		w.stop.Store(true)
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer stopWatch()
	var wg sync.WaitGroup
	for range max(2, runtime.GOMAXPROCS(0)) {
		wg.Go(w.work)
	}
	wg.Wait()
	for _, j := range w.stack { // jobs abandoned after a stop
		j.parent.release()
	}
	w.stack = nil
	if err := ctx.Err(); err != nil {
		return nil, searchStats{}, err
	}
	return w.finish()
}

func (w *walker) finish() ([]searchHit, searchStats, error) {
	slices.SortFunc(w.hits, func(a, b searchHit) int {
		return cmp.Or(strings.Compare(a.path, b.path), cmp.Compare(a.line, b.line))
	})
	st := searchStats{files: w.stats.files.Load(), binary: w.stats.binary.Load(), large: w.stats.large.Load(), total: w.matches.Load()}
	st.editor = slices.Sorted(slices.Values(w.editor))
	if len(w.hits) > w.q.maxResults {
		w.hits = w.hits[:w.q.maxResults]
	}
	st.limited = st.total > int64(len(w.hits))
	return w.hits, st, w.err
}

func splitParts(rel string) []string {
	if rel == "." || rel == "" {
		return nil
	}
	return strings.Split(rel, "/")
}

// ancestorIgnores loads the .gitignore files of the directories above
// the search start (the start's own is loaded when it is searched).
func (w *walker) ancestorIgnores(parts []string) *ignoreDir {
	var d *ignoreDir
	for i := range parts {
		dir := path.Join(append([]string{"."}, parts[:i]...)...)
		data, _, err := w.root.ReadFile(path.Join(dir, ".gitignore"), 1<<20)
		if err == nil {
			d = d.with(data, parts[:i])
		}
		d = d.child(parts[:i+1], parts[i])
	}
	return d
}

func (w *walker) work() {
	buf := make([]byte, 0, 256<<10)
	local := &hitSet{max: w.q.maxResults}
	for {
		w.mu.Lock()
		for len(w.stack) == 0 && w.pending > 0 && !w.stop.Load() {
			w.cond.Wait()
		}
		if len(w.stack) == 0 || w.stop.Load() {
			w.mu.Unlock()
			break
		}
		job := w.stack[len(w.stack)-1]
		w.stack = w.stack[:len(w.stack)-1]
		w.mu.Unlock()

		if job.files != nil {
			for _, f := range job.files {
				if w.stop.Load() {
					break
				}
				local, buf = w.searchFile(job.parent.fd, f.name, f.rel, local, buf)
			}
			job.parent.release()
		} else {
			local, buf = w.searchDir(job, local, buf)
		}

		w.mu.Lock()
		w.pending--
		if w.pending == 0 {
			w.cond.Broadcast()
		}
		w.mu.Unlock()
	}
	w.resMu.Lock()
	w.hits = append(w.hits, local.hits...)
	w.resMu.Unlock()
}

// searchDir opens job's directory from its parent descriptor, queues its
// subdirectories and searches its files.
func (w *walker) searchDir(job dirJob, local *hitSet, buf []byte) (*hitSet, []byte) {
	fd, err := unix.Openat(job.parent.fd, job.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	job.parent.release()
	if err != nil {
		return local, buf // vanished or replaced by a link: skip
	}
	ref := &dirRef{fd: fd}
	ref.refs.Store(1)
	defer ref.release()

	dup, err := unix.Dup(fd)
	if err != nil {
		return local, buf
	}
	// The name matters only where the filesystem reports no entry types
	// and ReadDir falls back to lstat by path.
	f := os.NewFile(uintptr(dup), filepath.Join(w.root.Dir(), job.rel))
	ents, _ := f.ReadDir(-1)
	f.Close()

	matcher := job.ignore
	for _, e := range ents {
		if e.Name() == ".gitignore" && e.Type().IsRegular() {
			if data, _, err := readAt(fd, ".gitignore", buf[:0], 1<<20); err == nil {
				matcher = matcher.with(data, job.parts)
			}
			break
		}
	}
	var children []dirJob
	var files []fileEntry
	for _, e := range ents {
		if w.stop.Load() {
			break
		}
		name := e.Name()
		typ := e.Type()
		isDir := typ.IsDir()
		if isDir && name == ".git" {
			continue
		}
		if !isDir && !typ.IsRegular() {
			continue // links, FIFOs, devices, sockets: never followed or read
		}
		var parts []string
		if matcher != nil || isDir {
			parts = append(slices.Clip(job.parts), name)
			if matcher != nil && matcher.Match(parts, isDir) {
				continue
			}
		}
		rel := name
		if job.rel != "." {
			rel = job.rel + "/" + name
		}
		if isDir {
			ref.refs.Add(1)
			children = append(children, dirJob{parent: ref, name: name, rel: rel, parts: parts, ignore: matcher.child(parts, name)})
			continue
		}
		if w.q.glob != nil {
			subject := rel
			if w.q.globOnBase {
				subject = name
			}
			if !w.q.glob.MatchString(subject) {
				continue
			}
		}
		files = append(files, fileEntry{name: name, rel: rel})
	}
	// Offer all but the first batch of files to other workers.
	for len(files) > fileBatch {
		batch := files[len(files)-fileBatch:]
		files = files[:len(files)-fileBatch]
		ref.refs.Add(1)
		children = append(children, dirJob{parent: ref, files: batch})
	}
	if len(children) > 0 {
		w.mu.Lock()
		w.stack = append(w.stack, children...)
		w.pending += len(children)
		w.cond.Broadcast()
		w.mu.Unlock()
	}
	for _, f := range files {
		if w.stop.Load() {
			break
		}
		local, buf = w.searchFile(fd, f.name, f.rel, local, buf)
	}
	return local, buf
}

// searchOneFile searches a single explicitly named file.
func (w *walker) searchOneFile(rel string) error {
	// The walk meets only regular files; a path argument may name a link.
	var data []byte
	ok := false
	if overlayableAt(w.root, rel, false) {
		data, ok = w.editorText(rel)
	}
	if !ok {
		var err error
		if data, _, err = w.root.ReadFile(rel, MaxFileBytes); err != nil {
			return err
		}
	}
	w.stats.files.Add(1)
	if isBinary(data) {
		w.stats.binary.Add(1)
		return nil
	}
	w.hits = w.collect(data, rel, &hitSet{max: w.q.maxResults}).hits
	return nil
}

// searchFile opens name relative to the directory descriptor (no-follow,
// non-blocking), reads it into buf and collects matching lines.
func (w *walker) searchFile(dirfd int, name, rel string, local *hitSet, buf []byte) (*hitSet, []byte) {
	if data, ok := w.editorText(rel); ok {
		w.stats.files.Add(1)
		if isBinary(data) {
			w.stats.binary.Add(1)
			return local, buf
		}
		return w.collect(data, rel, local), buf
	}
	data, large, err := readAt(dirfd, name, buf[:0], MaxFileBytes)
	if cap(data) > cap(buf) && cap(data) <= 4<<20 {
		buf = data[:0] // keep a grown buffer, within reason
	}
	if err != nil {
		if large {
			w.stats.large.Add(1)
		}
		return local, buf
	}
	w.stats.files.Add(1)
	if isBinary(data) {
		w.stats.binary.Add(1)
		return local, buf
	}
	return w.collect(data, rel, local), buf
}

// collect adds data's matching lines to local and counts every match.
func (w *walker) collect(data []byte, rel string, local *hitSet) *hitSet {
	display := w.display(rel)
	w.q.matcher.scan(data, func(line int, text []byte) bool {
		w.matches.Add(1)
		if local.wants(display, line) {
			local.add(searchHit{path: display, line: line, text: displayLine(text)})
		}
		return !w.stop.Load()
	})
	return local
}

// hitSet keeps the first max hits in (path, line) order in a bounded
// max-heap, so a limited result is the same whatever order the workers
// visit files in, and memory stays bounded however many lines match.
type hitSet struct {
	max  int
	hits []searchHit // max-heap: hits[0] is the last in order
}

func hitOrder(path string, line int, h searchHit) int {
	return cmp.Or(strings.Compare(path, h.path), cmp.Compare(line, h.line))
}

// wants reports whether a hit at path:line would be kept.
func (s *hitSet) wants(path string, line int) bool {
	return len(s.hits) < s.max || hitOrder(path, line, s.hits[0]) < 0
}

// add keeps h, dropping the last hit when full. Call only when wants.
// Hits are appended until the set is full and heap-ordered only then, so
// an unlimited search pays nothing for the ordering.
func (s *hitSet) add(h searchHit) {
	if len(s.hits) < s.max {
		s.hits = append(s.hits, h)
		if len(s.hits) == s.max {
			for i := len(s.hits)/2 - 1; i >= 0; i-- {
				s.siftDown(i)
			}
		}
		return
	}
	s.hits[0] = h
	s.siftDown(0)
}

func (s *hitSet) siftDown(i int) {
	for {
		l, r, big := 2*i+1, 2*i+2, i
		if l < len(s.hits) && hitOrder(s.hits[l].path, s.hits[l].line, s.hits[big]) > 0 {
			big = l
		}
		if r < len(s.hits) && hitOrder(s.hits[r].path, s.hits[r].line, s.hits[big]) > 0 {
			big = r
		}
		if big == i {
			return
		}
		s.hits[i], s.hits[big] = s.hits[big], s.hits[i]
		i = big
	}
}

// displayLine bounds and neutralizes one matching line.
func displayLine(line []byte) string {
	cut := false
	if len(line) > MaxSearchLineBytes {
		line, cut = line[:MaxSearchLineBytes], true
		for len(line) > 0 && !utf8.RuneStart(line[len(line)-1]) {
			line = line[:len(line)-1]
		}
	}
	s := neutralizeControls(bytes.TrimSuffix(line, []byte{'\r'}))
	if cut {
		s += " …"
	}
	return s
}

// readAt reads the regular file name (relative to dirfd, no-follow,
// non-blocking) into buf, at most limit bytes. large reports a file over
// the limit.
func readAt(dirfd int, name string, buf []byte, limit int) (data []byte, large bool, err error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, false, errors.New("not a regular file")
	}
	if st.Size > int64(limit) {
		return nil, true, errors.New("file too large")
	}
	if need := int(st.Size) + 1; cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return nil, true, errors.New("file too large")
			}
			buf = slices.Grow(buf, len(buf))
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	if len(buf) > limit {
		return nil, true, errors.New("file too large")
	}
	return buf, false, nil
}
