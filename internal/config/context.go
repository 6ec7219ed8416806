package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fsnotify/fsnotify"
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

// ContextFilePaths returns the context files octet reads, global first:
// $OCTET_HOME/AGENTS.md, then <workspace>/AGENTS.md.
func ContextFilePaths(home, workspace string) []string {
	var paths []string
	if home != "" {
		paths = append(paths, filepath.Join(home, ContextFileName))
	}
	if workspace != "" {
		paths = append(paths, filepath.Join(workspace, ContextFileName))
	}
	return paths
}

// LoadContextFiles reads each existing path, bounded by MaxContextFileBytes.
// Missing files are skipped; unreadable or non-regular ones are errors.
func LoadContextFiles(paths []string) ([]ContextFile, error) {
	var files []ContextFile
	var errs []error
	for _, p := range paths {
		f, err := loadContextFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("context file %s: %w", p, err))
			continue
		}
		files = append(files, f)
	}
	return files, errors.Join(errs...)
}

func loadContextFile(path string) (ContextFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return ContextFile{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ContextFile{}, err
	}
	if !fi.Mode().IsRegular() {
		return ContextFile{}, fmt.Errorf("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxContextFileBytes+1))
	if err != nil {
		return ContextFile{}, err
	}
	if len(data) <= MaxContextFileBytes {
		return ContextFile{Path: path, Text: string(data)}, nil
	}
	cut := MaxContextFileBytes
	for cut > 0 && !utf8.RuneStart(data[cut]) {
		cut--
	}
	return ContextFile{Path: path, Text: string(data[:cut]), Truncated: true}, nil
}

// Instructions renders context files as one instruction block for the
// model, each file under a heading naming it.
func Instructions(files []ContextFile) string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "# Context from %s\n\n%s", f.Path, f.Text)
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
	paths []string
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
func NewContextSet(paths []string) (*ContextSet, error) {
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
