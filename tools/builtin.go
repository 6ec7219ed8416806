package tools

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/internal/fsroot"
)

// Config configures the built-in tools. The zero values of the optional
// fields select the documented defaults.
type Config struct {
	// Root is the absolute path of the workspace root. Required.
	Root string
	// AllowExternalPaths lets the file tools accept absolute paths outside
	// the workspace. When it is on, read and search classify every call as
	// HostRead and edit and write as HostMutation, even for workspace paths:
	// a path-resolution race must not lower admission authority.
	AllowExternalPaths bool
	// Confine, when set and on, overrides AllowExternalPaths: the broker
	// turns it on for a session whose policy was tightened below
	// unsafe_host (see Confinement).
	Confine *Confinement
	// MaxOutputBytes bounds the model-visible text of one result
	// (DefaultResultTextBytes when zero).
	MaxOutputBytes int
	// BashTimeout is the default bash timeout (DefaultBashTimeout when zero,
	// at most MaxBashTimeout).
	BashTimeout time.Duration
	// BashMaxOutputBytes bounds the in-memory capture of one bash command
	// (DefaultBashMaxOutputBytes when zero).
	BashMaxOutputBytes int
	// ScrubEnv names more environment variables that hold credentials
	// of the octet process (every model provider's key variable): bash
	// commands never get them, like OPENAI_API_KEY.
	ScrubEnv []string
	// ShellPath is an explicitly configured shell; empty selects /bin/bash,
	// then bash on PATH, then sh (see ResolveShell).
	ShellPath string
	// SpillDir is where the bash tool creates its private spill directory
	// (os.TempDir() when empty).
	SpillDir string
	// Redactor replaces the host's known secret values in what bash
	// writes to its spill files; nil redacts nothing. (The broker redacts
	// results and progress of every tool.)
	Redactor *Redactor
	// Documents, when set, is the editor's view of open documents: read
	// and search see their unsaved text, and edit and write of an open
	// document go through the editor (see Documents). Nil uses the disk
	// only.
	Documents Documents
	// Files is the read-tracking state shared by read, edit and write.
	// Builtins sets it; a tool constructed alone with a nil Files gets its
	// own.
	Files *FileTracker
	// Sandbox is the user's widening of the OS sandbox bash commands run
	// in (the broker decides the profile of each call).
	Sandbox SandboxConfig
	// Changes stages the file changes of edit and write: their images
	// are kept in its store before the effect, and each result carries
	// its changes. Nil keeps no images (diffs only).
	Changes *changes.Recorder
}

// normalized validates c and fills in defaults.
func (c Config) normalized() (Config, error) {
	if c.Root == "" || !filepath.IsAbs(c.Root) {
		return c, fmt.Errorf("tools config: workspace root %q must be an absolute path", c.Root)
	}
	c.Root = filepath.Clean(c.Root)
	st, err := os.Stat(c.Root)
	if err != nil {
		return c, fmt.Errorf("tools config: workspace root: %w", err)
	}
	if !st.IsDir() {
		return c, fmt.Errorf("tools config: workspace root %s is not a directory", c.Root)
	}
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = DefaultResultTextBytes
	}
	if c.BashTimeout <= 0 {
		c.BashTimeout = DefaultBashTimeout
	}
	c.BashTimeout = min(c.BashTimeout, MaxBashTimeout)
	if c.BashMaxOutputBytes <= 0 {
		c.BashMaxOutputBytes = DefaultBashMaxOutputBytes
	}
	if c.Files == nil {
		c.Files = NewFileTracker()
	}
	return c, nil
}

// Builtins constructs read, search, edit, write, apply_patch, bash,
// view_image, update_plan and, for an editor that forwards its
// diagnostics (EditorDiagnostics), diagnostics over one shared
// configuration and read-tracking state. The returned close function
// removes the bash tool's retained spill files; call it when the host that
// owns the tools shuts down.
func Builtins(cfg Config) ([]Tool, func() error, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, nil, err
	}
	read, err := NewRead(cfg)
	if err != nil {
		return nil, nil, err
	}
	search, err := NewSearch(cfg)
	if err != nil {
		return nil, nil, err
	}
	edit, err := NewEdit(cfg)
	if err != nil {
		return nil, nil, err
	}
	write, err := NewWrite(cfg)
	if err != nil {
		return nil, nil, err
	}
	patch, err := NewApplyPatch(cfg)
	if err != nil {
		return nil, nil, err
	}
	bash, err := NewBash(cfg)
	if err != nil {
		return nil, nil, err
	}
	view, err := NewViewImage(cfg)
	if err != nil {
		return nil, nil, err
	}
	all := []Tool{read, search, edit, write, patch, bash, view, UpdatePlanTool{}}
	diag, err := NewDiagnostics(cfg)
	if err != nil {
		return nil, nil, err
	}
	if diag != nil {
		all = append(all, diag)
	}
	return all, bash.Close, nil
}

// FileTracker remembers, per agent (principal) and file, the content hash
// that agent last saw (through read, or its own edit or write), so edit
// and write can refuse to act on a file that changed since. Agents
// sharing the tools (a root and its delegated children) each have their
// own view: one agent's write makes another's earlier read stale. It is
// safe for concurrent use.
type FileTracker struct {
	mu   sync.Mutex
	seen map[trackKey][32]byte
}

// trackKey is one agent's view of one file.
type trackKey struct{ principal, file string }

// maxTrackedFiles bounds the tracker; the oldest entries are not kept in
// order, so when full the map is simply cleared (edits then behave as if
// the file was never read, which only relaxes the staleness check).
const maxTrackedFiles = 100_000

// NewFileTracker returns an empty tracker.
func NewFileTracker() *FileTracker { return &FileTracker{seen: map[trackKey][32]byte{}} }

// record notes that principal saw data as file key.
func (t *FileTracker) record(principal, key string, data []byte) {
	sum := sha256.Sum256(data)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.seen) >= maxTrackedFiles {
		clear(t.seen)
	}
	t.seen[trackKey{principal, key}] = sum
}

// stale reports whether principal saw key with content other than data.
func (t *FileTracker) stale(principal, key string, data []byte) bool {
	t.mu.Lock()
	sum, ok := t.seen[trackKey{principal, key}]
	t.mu.Unlock()
	return ok && sum != sha256.Sum256(data)
}

// errChangedSinceRead is the model-visible refusal for stale edits.
const errChangedSinceRead = "file changed since last read; read it again"

// pathArg validates a model-supplied path for cfg without touching the
// filesystem: workspace-relative shapes always, absolute paths only when
// external paths are allowed, ".." never.
func (c *Config) pathArg(p string) error {
	if filepath.IsAbs(p) {
		if !c.externalPaths() {
			return fmt.Errorf("path %q is absolute; external paths are disabled, use a path relative to the workspace root", p)
		}
		for _, part := range strings.Split(p, "/") {
			if part == ".." {
				return fmt.Errorf(`path %q contains a ".." component`, p)
			}
		}
		if strings.IndexByte(p, 0) >= 0 {
			return fmt.Errorf("path %q contains a NUL byte", p)
		}
		return nil
	}
	_, err := fsroot.CleanRel(p)
	return err
}

// target is one resolved file-tool path: an opened fsroot.Root plus the
// path relative to it.
type target struct {
	root    *fsroot.Root
	rel     string
	display string // what results show: workspace-relative or absolute
	key     string // absolute path, the FileTracker key
	// base is the root's absolute path for an external target ("" for
	// the workspace, whose paths are shown relative to it).
	base string
}

// shown returns how results name rel, a path beneath tg's root: as the
// workspace path, or the absolute path of an external one.
func (tg *target) shown(rel string) string {
	if tg.base == "" {
		return rel
	}
	return filepath.Join(tg.base, filepath.FromSlash(rel))
}

// open resolves p (already validated by pathArg) to a target. Workspace
// paths, including absolute ones under the root, resolve beneath the
// workspace root; an external absolute path resolves beneath its nearest
// existing ancestor directory (trusted: the system resolves it), the
// components below it — the directories a write creates, then the file —
// with no-follow semantics, as workspace paths do.
func (c *Config) open(p string) (*target, error) {
	if err := c.pathArg(p); err != nil {
		return nil, err
	}
	if filepath.IsAbs(p) {
		abs := filepath.Clean(p)
		if rel, ok := strings.CutPrefix(abs, c.Root+string(filepath.Separator)); ok {
			p = rel
		} else {
			return openExternal(abs)
		}
	}
	rel, err := fsroot.CleanRel(p)
	if err != nil {
		return nil, err
	}
	r, err := fsroot.Open(c.Root)
	if err != nil {
		return nil, err
	}
	return &target{root: r, rel: rel, display: rel, key: filepath.Join(c.Root, rel)}, nil
}

// openExternal resolves abs, an external absolute path, beneath its
// nearest existing ancestor directory.
func openExternal(abs string) (*target, error) {
	dir, rel := filepath.Dir(abs), filepath.Base(abs)
	for {
		r, err := fsroot.Open(dir)
		if err == nil {
			return &target{root: r, rel: rel, display: abs, key: abs, base: dir}, nil
		}
		up := filepath.Dir(dir)
		if !fsroot.IsNotExist(err) || up == dir {
			return nil, err
		}
		dir, rel = up, filepath.Base(dir)+"/"+rel
	}
}

func (t *target) close() { t.root.Close() }

// fileErrorText turns a filesystem error into a clear model-visible text.
func fileErrorText(display string, err error) string {
	var nr *fsroot.NotRegularError
	var tl *fsroot.TooLargeError
	var pe *fsroot.PathError
	var ce *fsroot.ChangedError
	switch {
	case errors.As(err, &ce):
		return errChangedSinceRead
	case fsroot.IsNotExist(err):
		return fmt.Sprintf("%s: no such file or directory", display)
	case errors.As(err, &nr):
		return fmt.Sprintf("%s is a %s, not a regular file", display, nr.Kind)
	case errors.As(err, &tl):
		return fmt.Sprintf("%s is larger than the %d MiB file limit", display, tl.Limit>>20)
	case errors.As(err, &pe):
		return pe.Error()
	case errors.Is(err, fsroot.ErrSymlink):
		return fmt.Sprintf("%s: a path component is a symbolic link; built-in file tools do not follow links", display)
	case errors.Is(err, fsroot.ErrEscape):
		return fmt.Sprintf("%s resolves outside the workspace", display)
	}
	return fmt.Sprintf("%s: %v", display, err)
}

// errorResult is a model-visible failure.
func errorResult(text string) Result { return Result{Text: text, IsError: true} }

// decodeBuiltinArgs strictly decodes a tool's JSON arguments: one object,
// no unknown fields, no trailing data.
func decodeBuiltinArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return errors.New("arguments are empty; expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid arguments: trailing data after the JSON object")
	}
	return nil
}

// isBinary reports whether data looks binary: a NUL byte in its first
// 8 KiB, the heuristic git and ripgrep use.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8<<10)], 0) >= 0
}
