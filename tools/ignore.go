package tools

import (
	"path/filepath"
	"slices"
	"strings"
)

// This file is search's .gitignore matcher. Its semantics are those of
// go-git's plumbing/format/gitignore (which the tests keep as the oracle):
// the last matching pattern wins, "!" re-includes, a pattern without a
// slash matches any path component below its file's directory, a pattern
// with a slash matches path components from that directory on (a match of
// a leading part of the path counts), "**" spans components and a
// trailing slash restricts the last component to directories.
//
// go-git tries every pattern on every path with filepath.Match. Here each
// .gitignore file is compiled once, as ripgrep's globset does: literal
// names and extensions go into hash sets, literal prefixes and suffixes
// into short lists, and only the remaining globs run filepath.Match; a
// rule is tried only when it could beat the best match found so far.

// ignoreMatcher is the .gitignore rules in force in one directory: the
// compiled files of it and its ancestors, in increasing priority. It is
// immutable and shared by the directory's subdirectories.
type ignoreMatcher struct {
	files []*ignoreFile
}

// with returns m extended by the .gitignore file data of the directory
// domain (path components from the search root's fsroot).
func (m *ignoreMatcher) with(data []byte, domain []string) *ignoreMatcher {
	f := compileIgnore(data, domain)
	if len(f.rules) == 0 {
		return m
	}
	var files []*ignoreFile
	if m != nil {
		files = slices.Clip(m.files)
	}
	return &ignoreMatcher{files: append(files, f)}
}

// Match reports whether path (its components) is ignored.
func (m *ignoreMatcher) Match(path []string, isDir bool) bool {
	if m == nil || len(path) == 0 {
		return false
	}
	d := m.root()
	for i, name := range path[:len(path)-1] {
		d = d.child(path[:i+1], name)
	}
	return d.Match(path, isDir)
}

// ignoreDir is an ignoreMatcher positioned in one directory: for each
// file, the best rule without a slash that matched one of the
// directories between the file's and this one (they match any component,
// so this is shared by every entry), or -1.
type ignoreDir struct {
	m   *ignoreMatcher
	anc []int32
}

// root positions m with no matched directories yet: at the search
// root's fsroot, or at the directory of m's only file.
func (m *ignoreMatcher) root() *ignoreDir {
	if m == nil {
		return nil
	}
	d := &ignoreDir{m: m, anc: make([]int32, len(m.files))}
	for i := range d.anc {
		d.anc[i] = -1
	}
	return d
}

// with returns d with the .gitignore file data of its own directory,
// domain, added.
func (d *ignoreDir) with(data []byte, domain []string) *ignoreDir {
	var m *ignoreMatcher
	if d != nil {
		m = d.m
	}
	m2 := m.with(data, domain)
	if m2 == m {
		return d
	}
	if d == nil {
		return m2.root()
	}
	return &ignoreDir{m: m2, anc: append(slices.Clip(d.anc), -1)}
}

// child returns d moved into its subdirectory name, whose path (all
// components) is dir.
func (d *ignoreDir) child(dir []string, name string) *ignoreDir {
	if d == nil {
		return nil
	}
	c := &ignoreDir{m: d.m, anc: make([]int32, len(d.anc))}
	for i, f := range d.m.files {
		c.anc[i] = d.anc[i]
		if len(dir) > len(f.domain) {
			c.anc[i] = f.nameBest(name, true, d.anc[i])
		}
	}
	return c
}

// Match reports whether path, an entry of d's directory, is ignored.
func (d *ignoreDir) Match(path []string, isDir bool) bool {
	if d == nil {
		return false
	}
	for i := len(d.m.files) - 1; i >= 0; i-- {
		f := d.m.files[i]
		if len(path) <= len(f.domain) || !slices.Equal(path[:len(f.domain)], f.domain) {
			continue
		}
		if k := f.match(path[len(f.domain):], isDir, d.anc[i]); k >= 0 {
			return !f.rules[k].include
		}
	}
	return false
}

// ignoreLines calls fn with each pattern line of a .gitignore file:
// blank lines and comments are skipped, a CR before the LF is dropped.
func ignoreLines(data []byte, fn func(string)) {
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fn(line)
	}
}

// ignoreRule is one parsed pattern.
type ignoreRule struct {
	include bool // "!": a match re-includes
	dirOnly bool // trailing "/"
	// A pattern without a slash matches one component: pat, or lit when
	// the pattern is a literal, "*"+lit or lit+"*".
	pat string
	lit string
	// A pattern with a slash matches components one by one.
	comps []ignoreComp
}

// ignoreComp is one slash-separated component of a pattern.
type ignoreComp struct {
	pat  string
	need string // for a glob, text every match contains
	kind compKind
}

type compKind uint8

const (
	compEmpty    compKind = iota // "": ends a "**" span
	compAnyDirs                  // "**"
	compBadStars                 // contains "**" among other text: never matches
	compLiteral                  // no glob syntax: compared with ==
	compGlob                     // filepath.Match
)

// ignoreFile is one .gitignore file compiled. Rule indices are priorities
// (later lines win); every index list is ascending.
type ignoreFile struct {
	domain []string
	rules  []ignoreRule

	// Patterns without a slash, by the test that decides them.
	names    map[string][]int32 // literal name
	exts     map[string][]int32 // "*.ext", ext without "."
	suffixes []int32            // "*lit"
	prefixes []int32            // "lit*"
	globs    []int32            // anything else: filepath.Match

	// Patterns with a slash, by the component they must contain.
	anchored map[string][]int32 // first component is a literal: path[0]
	deep     map[string][]int32 // "**/lit...": some component is lit
	paths    []int32            // anything else
}

// hasGlobSyntax reports whether s uses filepath.Match syntax.
func hasGlobSyntax(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// compileIgnore parses and indexes a .gitignore file for directory domain.
func compileIgnore(data []byte, domain []string) *ignoreFile {
	f := &ignoreFile{
		domain:   slices.Clone(domain),
		names:    map[string][]int32{},
		exts:     map[string][]int32{},
		anchored: map[string][]int32{},
		deep:     map[string][]int32{},
	}
	ignoreLines(data, func(line string) {
		f.add(parseIgnoreRule(line))
	})
	return f
}

// parseIgnoreRule parses one pattern line as go-git's ParsePattern does.
func parseIgnoreRule(p string) ignoreRule {
	var r ignoreRule
	if strings.HasPrefix(p, "!") {
		r.include, p = true, p[1:]
	}
	if !strings.HasSuffix(p, `\ `) {
		p = strings.TrimRight(p, " ")
	}
	if strings.HasSuffix(p, "/") {
		r.dirOnly, p = true, p[:len(p)-1]
	}
	if !strings.Contains(p, "/") {
		r.pat = p
		return r
	}
	for c := range strings.SplitSeq(p, "/") {
		comp := ignoreComp{pat: c}
		switch {
		case c == "":
			comp.kind = compEmpty
		case c == "**":
			comp.kind = compAnyDirs
		case strings.Contains(c, "**"):
			comp.kind = compBadStars
		case hasGlobSyntax(c):
			comp.kind, comp.need = compGlob, requiredLiteral(c)
		default:
			comp.kind = compLiteral
		}
		r.comps = append(r.comps, comp)
	}
	return r
}

// add indexes r as the next rule.
func (f *ignoreFile) add(r ignoreRule) {
	k := int32(len(f.rules))
	if r.comps != nil {
		f.rules = append(f.rules, r)
		f.indexSlashRule(k, r.comps)
		return
	}
	p := r.pat
	switch {
	case !hasGlobSyntax(p):
		r.lit = p
		f.names[p] = append(f.names[p], k)
	case strings.HasPrefix(p, "*") && !hasGlobSyntax(p[1:]):
		r.lit = p[1:]
		if ext, ok := strings.CutPrefix(r.lit, "."); ok && ext != "" && !strings.Contains(ext, ".") {
			f.exts[ext] = append(f.exts[ext], k)
		} else {
			f.suffixes = append(f.suffixes, k)
		}
	case strings.HasSuffix(p, "*") && !hasGlobSyntax(p[:len(p)-1]):
		r.lit = p[:len(p)-1]
		f.prefixes = append(f.prefixes, k)
	default:
		r.lit = requiredLiteral(p)
		f.globs = append(f.globs, k)
	}
	f.rules = append(f.rules, r)
}

// indexSlashRule files a slash pattern under the component it requires.
func (f *ignoreFile) indexSlashRule(k int32, comps []ignoreComp) {
	i := 0
	for i < len(comps) && comps[i].kind == compEmpty {
		i++
	}
	switch {
	case i < len(comps) && comps[i].kind == compLiteral:
		// Reached with no "**" span open: must equal the first component.
		f.anchored[comps[i].pat] = append(f.anchored[comps[i].pat], k)
	case i+1 < len(comps) && comps[i].kind == compAnyDirs && comps[i+1].kind == compLiteral:
		f.deep[comps[i+1].pat] = append(f.deep[comps[i+1].pat], k)
	default:
		f.paths = append(f.paths, k)
	}
}

// match returns the index of the last rule matching path (components
// below the file's directory), or -1; anc is the best rule without a
// slash matching one of path's leading components.
func (f *ignoreFile) match(path []string, isDir bool, anc int32) int {
	best := f.nameBest(path[len(path)-1], isDir, anc)
	slash := func(r *ignoreRule) bool { return r.matchComps(path, isDir) }
	best = f.bestOf(f.anchored[path[0]], best, true, slash)
	if len(f.deep) > 0 {
		for _, name := range path {
			best = f.bestOf(f.deep[name], best, true, slash)
		}
	}
	best = f.bestOf(f.paths, best, true, slash)
	return int(best)
}

// nameBest returns the best rule without a slash above best that
// matches the path component name (a directory unless !dirOK), or best.
func (f *ignoreFile) nameBest(name string, dirOK bool, best int32) int32 {
	best = f.bestOf(f.names[name], best, dirOK, nil)
	if j := strings.LastIndexByte(name, '.'); j >= 0 {
		best = f.bestOf(f.exts[name[j+1:]], best, dirOK, nil)
	}
	best = f.bestOf(f.suffixes, best, dirOK, func(r *ignoreRule) bool { return strings.HasSuffix(name, r.lit) })
	best = f.bestOf(f.prefixes, best, dirOK, func(r *ignoreRule) bool { return strings.HasPrefix(name, r.lit) })
	return f.bestOf(f.globs, best, dirOK, func(r *ignoreRule) bool {
		if !strings.Contains(name, r.lit) {
			return false
		}
		ok, err := filepath.Match(r.pat, name)
		return err == nil && ok
	})
}

// bestOf returns the highest rule of ks above best that matches (by test,
// or unconditionally when test is nil), or best. Directory-only rules
// are skipped unless dirOK.
func (f *ignoreFile) bestOf(ks []int32, best int32, dirOK bool, test func(*ignoreRule) bool) int32 {
	for i := len(ks) - 1; i >= 0 && ks[i] > best; i-- {
		r := &f.rules[ks[i]]
		if r.comps == nil && r.dirOnly && !dirOK {
			continue
		}
		if test == nil || test(r) {
			return ks[i]
		}
	}
	return best
}

// matchComps is go-git's globMatch over compiled components: a greedy,
// non-backtracking walk in which "**" skips to the first component the
// next pattern component matches and a matched leading part of the path
// is a match.
func (r *ignoreRule) matchComps(path []string, isDir bool) bool {
	matched, traverse := false, false
	for i, c := range r.comps {
		switch c.kind {
		case compEmpty:
			traverse = false
			continue
		case compAnyDirs:
			if i == len(r.comps)-1 {
				return matched && !(r.dirOnly && !isDir && len(path) == 0)
			}
			traverse = true
			continue
		case compBadStars:
			return false
		}
		if len(path) == 0 {
			return false
		}
		if traverse {
			traverse = false
			for len(path) > 0 {
				e := path[0]
				path = path[1:]
				ok, bad := c.match(e)
				if bad {
					return false
				}
				if ok {
					matched = true
					break
				}
				if len(path) == 0 {
					matched = false
				}
			}
			continue
		}
		if ok, bad := c.match(path[0]); bad || !ok {
			return false
		}
		matched, path = true, path[1:]
	}
	return matched && !(r.dirOnly && !isDir && len(path) == 0)
}

// match matches one path component; bad reports a malformed pattern.
func (c *ignoreComp) match(name string) (ok, bad bool) {
	if c.kind == compLiteral {
		return c.pat == name, false
	}
	if !strings.Contains(name, c.need) {
		return false, false
	}
	ok, err := filepath.Match(c.pat, name)
	return ok, err != nil
}

// requiredLiteral returns the longest run of plain text in the
// filepath.Match pattern p (outside classes, escapes and stars), which
// every name p matches contains, or "". A malformed pattern never
// matches, so what it returns for one does not matter.
func requiredLiteral(p string) string {
	best, start := "", 0
	flush := func(end int) {
		if end-start > len(best) {
			best = p[start:end]
		}
	}
	for i := 0; i < len(p); {
		switch p[i] {
		case '*', '?', '\\', '[':
			flush(i)
			i = skipGlobToken(p, i)
			start = i
		default:
			i++
		}
	}
	flush(len(p))
	return best
}

// skipGlobToken returns the index after the special token at p[i]: a
// star, "?", an escape or a whole class. An unterminated class runs to
// the end (such a pattern never matches).
func skipGlobToken(p string, i int) int {
	switch p[i] {
	case '\\':
		return min(i+2, len(p))
	case '[':
		j := i + 1
		if j < len(p) && p[j] == '^' {
			j++
		}
		for n := 0; j < len(p); n++ {
			switch {
			case p[j] == ']' && n > 0:
				return j + 1
			case p[j] == '\\':
				j += 2
			default:
				j++
			}
		}
		return len(p)
	}
	return i + 1
}
