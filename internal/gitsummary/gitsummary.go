// Package gitsummary summarizes the git work tree a workspace is in, for
// the model's environment context: the branch, and how many files have
// unstaged changes or are untracked. It never runs git: a repository's
// own configuration can make git run programs (hooks, clean filters,
// core.fsmonitor), and octet must not run anything nobody admitted. It
// reads HEAD and the index (index.go) and walks the work tree without
// following symbolic links, within fixed bounds; past a
// bound the counts are lower bounds (Summary.Partial).
package gitsummary

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// Bounds of one summary.
const (
	// maxEntries bounds the work-tree entries visited.
	maxEntries = 20_000
	// maxHashed and maxHashBytes bound the files whose content is
	// hashed (those whose size matches the index but whose time does not).
	maxHashed    = 256
	maxHashBytes = 16 << 20
	// maxIndexBytes bounds the index file read.
	maxIndexBytes = 64 << 20
	// maxSmallFile bounds HEAD, .git files and ignore files.
	maxSmallFile = 64 << 10
	// maxUp bounds how many directories above the workspace are searched
	// for the repository.
	maxUp = 64
)

// Summary is a bounded summary of a work tree.
type Summary struct {
	// Branch is the checked-out branch; "" when HEAD is detached.
	Branch string
	// Detached is HEAD's abbreviated commit when it is detached.
	Detached string
	// Counted is false when the index could not be read: Modified and
	// Untracked are then unknown.
	Counted bool
	// Modified counts tracked files whose work-tree file differs from the
	// index (changed, deleted, or a different kind or executable bit),
	// and Untracked files that are neither tracked nor ignored, both
	// within the workspace.
	Modified, Untracked int
	// Partial reports that a bound stopped the count: the numbers are
	// lower bounds.
	Partial bool
}

// Read returns the summary of the work tree workspace (an absolute path)
// is in, or nil when it is in no repository (or the repository cannot be
// read at all).
func Read(workspace string) *Summary {
	top, gitdir, ok := findRepo(workspace)
	if !ok {
		return nil
	}
	s := &Summary{}
	head, err := readSmall(filepath.Join(gitdir, "HEAD"))
	if err != nil {
		return nil
	}
	h := strings.TrimSpace(string(head))
	if ref, ok := strings.CutPrefix(h, "ref: refs/heads/"); ok {
		s.Branch = ref
	} else if len(h) >= 12 && isHex(h) {
		s.Detached = h[:12]
	}
	prefix, err := filepath.Rel(top, workspace)
	if err != nil {
		return s
	}
	entries, err := readIndex(filepath.Join(gitdir, "index"))
	if err != nil && !os.IsNotExist(err) { // a new repository has no index yet
		return s
	}
	w := walker{top: top, s: s, tracked: make(map[string]*entry, len(entries))}
	for i := range entries {
		w.tracked[entries[i].name] = &entries[i]
	}
	w.ignores = w.excludes(commonDir(gitdir), filepath.ToSlash(prefix))
	w.walk(filepath.ToSlash(prefix))
	w.statTracked()
	w.compare(filepath.ToSlash(prefix))
	s.Counted = true
	return s
}

// findRepo finds the work tree top above (or at) dir: the first directory
// with a .git directory, or a .git file naming the git directory (a
// linked work tree or a submodule). A .git that is a link is not
// followed.
func findRepo(dir string) (top, gitdir string, ok bool) {
	for range maxUp {
		dot := filepath.Join(dir, ".git")
		fi, err := os.Lstat(dot)
		switch {
		case err == nil && fi.IsDir():
			return dir, dot, true
		case err == nil && fi.Mode().IsRegular():
			b, err := readSmall(dot)
			target, found := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
			if err != nil || !found {
				return "", "", false
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(dir, target)
			}
			return dir, filepath.Clean(target), true
		case err == nil:
			return "", "", false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", "", false
}

// commonDir is the repository's common directory: a linked work tree's
// git directory names it in its commondir file.
func commonDir(gitdir string) string {
	b, err := readSmall(filepath.Join(gitdir, "commondir"))
	if err != nil {
		return gitdir
	}
	c := strings.TrimSpace(string(b))
	if !filepath.IsAbs(c) {
		c = filepath.Join(gitdir, c)
	}
	return filepath.Clean(c)
}

// readSmall reads a small regular file without following a final link.
func readSmall(p string) ([]byte, error) {
	f, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSmallFile+1))
	if err == nil && len(b) > maxSmallFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, maxSmallFile)
	}
	return b, err
}

// readIndex reads and parses the index file, bounded.
func readIndex(p string) ([]entry, error) {
	f, err := openRegular(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("read index: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIndexBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxIndexBytes {
		return nil, fmt.Errorf("index %s is too large to summarize", p)
	}
	return parseIndex(b)
}

// walker counts a work tree.
type walker struct {
	top     string
	s       *Summary
	tracked map[string]*entry
	ignores []gitignore.Pattern
	// seen are the tracked work-tree files found, by slash path from
	// top; pending, the directories whose tracked files are still to be
	// looked at (statTracked).
	seen    map[string]fs.FileInfo
	pending []statJob
	entries int
	hashed  int
	bytes   int64
}

// excludes returns the ignore patterns in force at prefix: the
// repository's info/exclude, then every .gitignore from the top down to
// prefix's parent.
func (w *walker) excludes(common, prefix string) []gitignore.Pattern {
	ps := parseIgnore(filepath.Join(common, "info", "exclude"), nil)
	if prefix == "." {
		return ps
	}
	var domain []string
	for _, part := range strings.Split(prefix, "/") {
		ps = append(ps, parseIgnore(filepath.Join(w.top, filepath.FromSlash(path.Join(domain...)), ".gitignore"), domain)...)
		domain = append(domain, part)
	}
	return ps
}

func parseIgnore(p string, domain []string) []gitignore.Pattern {
	b, err := readSmall(p)
	if err != nil {
		return nil
	}
	var ps []gitignore.Pattern
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSuffix(l, "\r")
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(l, domain))
	}
	return ps
}

// walk visits the work tree from dir (a slash path from top), counting
// untracked files and recording the others for compare.
func (w *walker) walk(dir string) {
	w.seen = map[string]fs.FileInfo{}
	w.walkDir(dir, w.ignores)
}

func (w *walker) walkDir(dir string, ignores []gitignore.Pattern) {
	rel := func(name string) string {
		if dir == "." {
			return name
		}
		return dir + "/" + name
	}
	domain := splitPath(dir)
	job := -1 // dir's tracked files: w.pending[job]
	ignores = append(ignores[:len(ignores):len(ignores)], parseIgnore(filepath.Join(w.top, filepath.FromSlash(dir), ".gitignore"), domain)...)
	m := gitignore.NewMatcher(ignores)
	des, err := os.ReadDir(filepath.Join(w.top, filepath.FromSlash(dir)))
	if err != nil {
		return
	}
	for _, de := range des {
		if w.entries++; w.entries > maxEntries {
			w.s.Partial = true
			return
		}
		name := de.Name()
		p := rel(name)
		if name == ".git" {
			continue
		}
		isDir := de.IsDir()
		if _, ok := w.tracked[p]; !ok && m.Match(splitPath(p), isDir) {
			continue
		}
		if isDir {
			if e, ok := w.tracked[p]; ok && e.mode == modeGitlink {
				continue
			}
			if _, err := os.Lstat(filepath.Join(w.top, filepath.FromSlash(p), ".git")); err == nil {
				w.s.Untracked++ // a nested repository, as git shows it: once
				continue
			}
			w.walkDir(p, ignores)
			if w.s.Partial {
				return
			}
			continue
		}
		if _, ok := w.tracked[p]; ok {
			if job < 0 {
				job = len(w.pending)
				w.pending = append(w.pending, statJob{dir: dir})
			}
			w.pending[job].names = append(w.pending[job].names, name)
		} else if t := de.Type(); t.IsRegular() || t&fs.ModeSymlink != 0 {
			w.s.Untracked++ // the entry's type is enough (getdents')
		}
	}
}

// statJob is a directory's tracked files, to be looked at.
type statJob struct {
	dir   string // slash path from top
	names []string
}

// statWorkers is how many goroutines look at tracked files: as git's
// preloaded index, the lstat calls of a large tree run side by side.
const statWorkers = 4

// statTracked looks at the tracked files found (w.pending) without
// following links, a directory at a time relative to the directory
// (os.Root: one path component resolved per file), several directories
// at once, and records them in w.seen.
func (w *walker) statTracked() {
	jobs := make(chan *statJob)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(statWorkers, len(w.pending)) {
		wg.Go(func() {
			for j := range jobs {
				found := statDir(filepath.Join(w.top, filepath.FromSlash(j.dir)), j.names)
				mu.Lock()
				for name, fi := range found {
					w.seen[path.Join(j.dir, name)] = fi
				}
				mu.Unlock()
			}
		})
	}
	for i := range w.pending {
		jobs <- &w.pending[i]
	}
	close(jobs)
	wg.Wait()
	w.pending = nil
}

// statDir returns what names, entries of directory dir, are (lstat);
// a name that cannot be looked at is left out, as a file not found.
func statDir(dir string, names []string) map[string]fs.FileInfo {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	out := make(map[string]fs.FileInfo, len(names))
	for _, name := range names {
		if fi, err := root.Lstat(name); err == nil {
			out[name] = fi
		}
	}
	return out
}

// compare counts the tracked files within prefix whose work-tree state
// differs from their index entry.
func (w *walker) compare(prefix string) {
	counted := map[string]bool{}
	for name, e := range w.tracked {
		if prefix != "." && !strings.HasPrefix(name, prefix+"/") {
			continue
		}
		if e.skipWorktree || e.mode == modeGitlink || counted[name] {
			continue
		}
		fi, ok := w.seen[name]
		if !ok {
			if !w.s.Partial {
				w.s.Modified++ // deleted (or a directory now)
				counted[name] = true
			}
			continue
		}
		if w.differs(name, e, fi) {
			w.s.Modified++
			counted[name] = true
		}
	}
}

// differs reports whether the file at name, found as fi, differs from e.
func (w *walker) differs(name string, e *entry, fi fs.FileInfo) bool {
	switch {
	case e.intentToAdd || e.stage != 0:
		return true
	case e.mode == modeSymlink:
		return fi.Mode()&fs.ModeSymlink == 0 || fi.Size() != int64(e.size)
	case !fi.Mode().IsRegular():
		return true
	case (e.mode == modeExecutable) != (fi.Mode().Perm()&0o111 != 0):
		return true
	case fi.Size()&0xffffffff != int64(e.size):
		return true
	case fi.ModTime().Equal(e.mtime):
		return false
	}
	if w.hashed >= maxHashed || w.bytes+fi.Size() > maxHashBytes {
		w.s.Partial = true
		return false
	}
	w.hashed++
	w.bytes += fi.Size()
	sum, err := blobHash(filepath.Join(w.top, filepath.FromSlash(name)), fi.Size())
	return err != nil || !bytes.Equal(sum, e.sum[:])
}

// blobHash is git's SHA-1 object name of the file's content as a blob.
func blobHash(p string, size int64) ([]byte, error) {
	f, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", size)
	n, err := io.Copy(h, io.LimitReader(f, size+1))
	if err != nil {
		return nil, err
	}
	if n != size {
		return nil, fmt.Errorf("%s changed size while it was read", p)
	}
	return h.Sum(nil), nil
}

func splitPath(p string) []string {
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}
