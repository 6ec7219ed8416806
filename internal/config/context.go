package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fsnotify/fsnotify"

	"github.com/octet-agent/octet/internal/fsroot"
)

// ContextFileName is the context file octet loads into instructions.
const ContextFileName = "AGENTS.md"

// MaxContextFileBytes bounds each context file; longer files are cut at a
// UTF-8 boundary and marked truncated.
const MaxContextFileBytes = 64 << 10

// ContextFile is one loaded context file.
type ContextFile struct {
	Path      string
	Text      string
	Truncated bool
}

// ContextPath is one context file octet reads.
type ContextPath struct {
	// Path is the file's absolute path.
	Path string
	// Workspace, when set, is the directory of the workspace (or of a
	// repository above it) the file lies in directly. Such a file is read with the file tools' no-follow
	// resolution beneath the root: a symbolic link (even one pointing
	// inside) or a special file is skipped with a warning, so a
	// repository cannot make octet load another file into the model's
	// instructions or hang on a FIFO. Files without a workspace are the
	// user's own ($OCTET_HOME): links are followed, special files are
	// still refused without blocking.
	Workspace string
}

// ContextFilePaths returns the context files octet reads, global first:
// $OCTET_HOME/AGENTS.md, then the AGENTS.md of each of the workspace's
// ProjectDirs, from the repository root down to the workspace (deeper
// files later, so nearer guidance comes last). Each is read beneath its
// own directory without following links.
func ContextFilePaths(home, workspace string) []ContextPath {
	var paths []ContextPath
	if home != "" {
		paths = append(paths, ContextPath{Path: filepath.Join(home, ContextFileName)})
	}
	if workspace != "" {
		for _, dir := range ProjectDirs(workspace) {
			paths = append(paths, ContextPath{Path: filepath.Join(dir, ContextFileName), Workspace: dir})
		}
	}
	return paths
}

// WatchPaths returns the file paths of ps, for a Watcher.
func WatchPaths(ps []ContextPath) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Path
	}
	return out
}

// LoadContextFiles reads each existing path, bounded by MaxContextFileBytes.
// Missing files are skipped silently; a skipped link or special file and
// an unreadable file are reported in the joined error (callers log it as
// a warning) and the other files are still returned.
func LoadContextFiles(paths []ContextPath) ([]ContextFile, error) {
	var files []ContextFile
	var errs []error
	for _, p := range paths {
		f, err := loadContextFile(p)
		if fsroot.IsNotExist(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("context file %s: %w", p.Path, err))
			continue
		}
		files = append(files, f)
	}
	return files, errors.Join(errs...)
}

func loadContextFile(p ContextPath) (ContextFile, error) {
	data, truncated, err := readConfined(p.Path, p.Workspace, MaxContextFileBytes)
	if err != nil {
		return ContextFile{}, err
	}
	if !truncated {
		return ContextFile{Path: p.Path, Text: string(data)}, nil
	}
	return ContextFile{Path: p.Path, Text: string(data[:utf8Cut(data)]), Truncated: true}, nil
}

// utf8Cut returns the length of data without a trailing partial UTF-8
// sequence.
func utf8Cut(data []byte) int {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if utf8.FullRune(data[i:]) {
				return len(data)
			}
			return i
		}
	}
	return len(data)
}

// readConfined reads at most limit bytes of path. With a workspace it
// reads path relative to it through fsroot's no-follow, regular-file-only,
// non-blocking path and names a link or special file in its error;
// without one it reads the user's own file non-blocking.
func readConfined(path, workspace string, limit int64) ([]byte, bool, error) {
	if workspace == "" {
		return fsroot.ReadHostPrefix(path, limit)
	}
	rel, err := filepath.Rel(workspace, path)
	if err != nil {
		return nil, false, err
	}
	root, err := fsroot.Open(workspace)
	if err != nil {
		return nil, false, err
	}
	defer root.Close()
	data, truncated, err := root.ReadPrefix(rel, limit)
	return data, truncated, explainConfined(err)
}

// skippedError is a workspace file octet does not read: a symbolic link
// or a special file. It is a warning, not a configuration error.
type skippedError struct{ reason string }

func (e *skippedError) Error() string { return "skipped: " + e.reason }

// explainConfined turns the refusals of a workspace file into a
// *skippedError worded for a warning.
func explainConfined(err error) error {
	var nr *fsroot.NotRegularError
	switch {
	case errors.Is(err, fsroot.ErrSymlink):
		return &skippedError{"it (or a directory above it) is a symbolic link; octet reads workspace files only as regular files inside the workspace, so replace the link with the file"}
	case errors.As(err, &nr):
		return &skippedError{fmt.Sprintf("it is a %s, not a regular file", nr.Kind)}
	}
	return err
}

// Instructions renders context files as one instruction block for the
// model, each file under a heading naming it. A line of a file that
// would read as such a heading is escaped: a workspace's AGENTS.md
// cannot pass part of itself off as the user's global file.
func Instructions(files []ContextFile) string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "# Context from %s\n\n%s", f.Path, escapeHeadings(f.Text))
		if !strings.HasSuffix(f.Text, "\n") {
			b.WriteByte('\n')
		}
		if f.Truncated {
			fmt.Fprintf(&b, "\n[truncated at %d bytes]\n", MaxContextFileBytes)
		}
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// escapeHeadings escapes each line of text that Markdown would read as
// a "Context from" heading (any level, indented up to three spaces, in
// any case) with a backslash before its first '#'.
func escapeHeadings(text string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, line := range lines {
		indent := len(line) - len(strings.TrimLeft(line, " "))
		rest := line[indent:]
		if indent > 3 || !strings.HasPrefix(rest, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(rest, "#"))
		if strings.HasPrefix(strings.ToLower(title), "context from") {
			lines[i] = line[:indent] + "\\" + rest
		}
	}
	return strings.Join(lines, "")
}

// Watcher reports that watched files may have changed. The editor's
// workspace/didChangeWatchedFiles can drive the same interface.
type Watcher interface {
	// Changes delivers one value per (debounced) burst of changes.
	Changes() <-chan struct{}
	// Close stops watching and closes Changes.
	Close() error
}

// FSWatcher is a Watcher over fsnotify. It watches the parent directories
// (editors save by rename) and filters by file name, coalescing bursts
// within the debounce interval into one change.
type FSWatcher struct {
	w       *fsnotify.Watcher
	targets map[string]bool
	out     chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup
}

var _ Watcher = (*FSWatcher)(nil)

// NewFSWatcher watches paths (files that may not exist yet). Directories
// that do not exist are skipped.
func NewFSWatcher(paths []string, debounce time.Duration) (*FSWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("start file watcher: %w", err)
	}
	fw := &FSWatcher{w: w, targets: map[string]bool{}, out: make(chan struct{}, 1), done: make(chan struct{})}
	dirs := map[string]bool{}
	for _, p := range paths {
		fw.targets[filepath.Clean(p)] = true
		dirs[filepath.Dir(p)] = true
	}
	for d := range dirs {
		if err := w.Add(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			slog.Debug("context watcher: cannot watch directory", "dir", d, "err", err)
		}
	}
	fw.wg.Go(func() { fw.loop(debounce) })
	return fw, nil
}

// Changes implements Watcher.
func (fw *FSWatcher) Changes() <-chan struct{} { return fw.out }

// Close implements Watcher.
func (fw *FSWatcher) Close() error {
	select {
	case <-fw.done:
		return nil
	default:
	}
	close(fw.done)
	err := fw.w.Close()
	fw.wg.Wait()
	return err
}

func (fw *FSWatcher) loop(debounce time.Duration) {
	defer close(fw.out)
	timer := time.NewTimer(debounce)
	timer.Stop()
	for {
		select {
		case <-fw.done:
			timer.Stop()
			return
		case ev, ok := <-fw.w.Events:
			if !ok {
				return
			}
			if fw.targets[filepath.Clean(ev.Name)] {
				timer.Reset(debounce)
			}
		case err, ok := <-fw.w.Errors:
			if !ok {
				return
			}
			slog.Debug("context watcher error", "err", err)
		case <-timer.C:
			select {
			case fw.out <- struct{}{}:
			default: // a change is already pending
			}
		}
	}
}

// ContextSet holds the current context files and reloads them on change.
// It is safe for concurrent use.
type ContextSet struct {
	paths []ContextPath
	// reload serialises Reload, so subscribers see reloads in order.
	reload sync.Mutex
	mu     sync.Mutex
	files  []ContextFile
	gen    uint64
	subs   map[*subscriber]struct{}
}

type subscriber struct{ fn func(instructions string) }

// NewContextSet loads paths once. A load error is returned with whatever
// could be loaded; the set is still usable.
func NewContextSet(paths []ContextPath) (*ContextSet, error) {
	cs := &ContextSet{paths: paths}
	return cs, cs.Reload()
}

// Reload reads the files again and then hands every subscriber the new
// rendered instructions. Reloads are serialised, so subscribers see them
// in order.
func (cs *ContextSet) Reload() error {
	cs.reload.Lock()
	defer cs.reload.Unlock()
	files, err := LoadContextFiles(cs.paths)
	cs.mu.Lock()
	cs.files = files
	cs.gen++
	text := Instructions(files)
	subs := make([]*subscriber, 0, len(cs.subs))
	for s := range cs.subs {
		subs = append(subs, s)
	}
	cs.mu.Unlock()
	for _, s := range subs {
		s.fn(text)
	}
	return err
}

// Subscribe calls fn with the rendered instructions after every later
// Reload (on the reloading goroutine, outside the set's lock, so fn may
// read the set) until the returned cancel is called. Hosts use it to
// hand the new text to agents that are already running (their
// SetInstructions), not only to sessions opened afterwards.
func (cs *ContextSet) Subscribe(fn func(instructions string)) (cancel func()) {
	s := &subscriber{fn: fn}
	cs.mu.Lock()
	if cs.subs == nil {
		cs.subs = map[*subscriber]struct{}{}
	}
	cs.subs[s] = struct{}{}
	cs.mu.Unlock()
	return func() {
		cs.mu.Lock()
		delete(cs.subs, s)
		cs.mu.Unlock()
	}
}

// Instructions returns the current rendered instructions.
func (cs *ContextSet) Instructions() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return Instructions(cs.files)
}

// Files returns the currently loaded files.
func (cs *ContextSet) Files() []ContextFile {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]ContextFile(nil), cs.files...)
}

// Generation counts reloads; it lets tests and callers see a reload landed.
func (cs *ContextSet) Generation() uint64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.gen
}

// Follow reloads on every change from w until ctx ends or w closes.
func (cs *ContextSet) Follow(ctx context.Context, w Watcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.Changes():
			if !ok {
				return
			}
			if err := cs.Reload(); err != nil {
				slog.Warn("reload context files", "err", err)
			}
		}
	}
}
