package team

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/octet-agent/octet/internal/osfile"
	"github.com/octet-agent/octet/tools"
)

// JournalName is the provenance journal in a team directory.
const JournalName = "provenance.jsonl"

// Provenance record kinds.
const (
	KindTeamStarted        = "team_started"
	KindAgentSpawned       = "agent_spawned"
	KindAgentStatus        = "agent_status"
	KindMessage            = "message"
	KindInterruptRequested = "interrupt_requested"
	KindTeamShutdown       = "team_shutdown"
)

// Origin values of [Orchestration] fields.
const (
	ParentInherited = "parent_inherited"
	ChildOverride   = "child_override"
)

// Orchestration says, for each kind of control a child could hold,
// whether it is its parent's (parent_inherited) or was set for the child
// by a host-validated spawn request (child_override). It carries no
// paths, environment values, tokens, identifiers or model arguments.
type Orchestration struct {
	Sandbox           string `json:"sandbox"`
	EffectPolicy      string `json:"effect_policy"`
	ApprovalAuthority string `json:"approval_authority"`
	Environment       string `json:"environment"`
	WorkingDirectory  string `json:"working_directory"`
	ExtensionTrust    string `json:"extension_trust"`
	ToolScope         string `json:"tool_scope"`
	ExecutionLimits   string `json:"execution_limits"`
}

// Record is one line of provenance.jsonl.
type Record struct {
	Kind string    `json:"kind"`
	Time time.Time `json:"time"`
	// Team is the team id (team_started).
	Team string `json:"team,omitempty"`
	// Owner is the root session id (team_started).
	Owner string `json:"owner_session,omitempty"`
	// RunID is the owning run (team_started).
	RunID string `json:"run_id,omitempty"`
	// Agent, Path and Parent identify the agent a record is about.
	Agent  string `json:"agent_id,omitempty"`
	Path   string `json:"agent_path,omitempty"`
	Parent string `json:"parent_id,omitempty"`
	// From is a message's sender (its agent path).
	From string `json:"from,omitempty"`
	// Session is the child's session id (agent_spawned).
	Session string `json:"session_id,omitempty"`
	Depth   int    `json:"depth,omitempty"`
	// Status is the new status (agent_status).
	Status string `json:"status,omitempty"`
	// Task is the spawn's task; Text a message or status detail.
	Task string `json:"task,omitempty"`
	Text string `json:"text,omitempty"`
	// MessageID is a direct message's id in its team's mailboxes (the id
	// a wait result shows); Redelivers names the earlier message this one
	// carries on ("<team>/<message id>", see Start).
	MessageID  int64  `json:"message_id,omitempty"`
	Redelivers string `json:"redelivers,omitempty"`
	// Followup marks a message record that is an accepted follow-up
	// task, queued for a busy child.
	Followup bool `json:"followup,omitempty"`
	// Tools is the child's tool scope (agent_spawned).
	Tools []string `json:"tools,omitempty"`
	// Policy and Provenance describe the child's authority (agent_spawned).
	Policy     *tools.EffectiveToolPolicy `json:"effective_tool_policy,omitempty"`
	Provenance *Orchestration             `json:"orchestration_provenance,omitempty"`
}

// journal is an open provenance.jsonl: every append is one write of the
// complete line followed by a data sync.
type journal struct {
	mu     sync.Mutex
	f      *os.File
	broken error
}

// append writes rec and syncs it. Once an append fails the journal stays
// failed.
func (j *journal) append(rec Record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode %s provenance: %w", rec.Kind, err)
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken != nil {
		return j.broken
	}
	if _, err := j.f.Write(line); err != nil {
		j.broken = fmt.Errorf("append %s to %s: %w", rec.Kind, JournalName, err)
		return j.broken
	}
	if err := osfile.Sync(j.f); err != nil {
		j.broken = fmt.Errorf("sync %s after %s: %w", JournalName, rec.Kind, err)
		return j.broken
	}
	return nil
}

func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f.Close()
}

// teamDir is an activated team directory: a random owner-only directory
// below parent, opened by descriptor, with its journal.
type teamDir struct {
	name   string   // the directory's name in its parent
	path   string   // its path, for messages and session paths (never opened)
	parent *os.Root // the directory holding team directories
	root   *os.Root // the team directory itself
	j      *journal
}

// activate creates a new team directory below dir (created 0700 if
// missing) and its journal, and writes first. Every step goes through the
// parent's descriptor without following a link in the final component; a
// failed activation removes exactly what it created (the journal, then the
// empty directory) and reports both failures if that cleanup fails too.
func activate(dir string, first Record) (*teamDir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create team directory parent %s: %w", dir, err)
	}
	parent, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open team directory parent %s: %w", dir, err)
	}
	d, err := create(parent, dir, first)
	if err != nil {
		parent.Close()
		return nil, err
	}
	return d, nil
}

func create(parent *os.Root, dir string, first Record) (*teamDir, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	name := "team-" + hex.EncodeToString(b[:])
	if err := parent.Mkdir(name, 0o700); err != nil {
		return nil, fmt.Errorf("create team directory in %s: %w", dir, err)
	}
	d := &teamDir{name: name, path: filepath.Join(dir, name), parent: parent}
	if err := d.open(first); err != nil {
		if rerr := d.rollback(); rerr != nil {
			return nil, fmt.Errorf("activate team directory %s: %w; and removing it failed: %w", d.path, err, rerr)
		}
		return nil, fmt.Errorf("activate team directory %s: %w", d.path, err)
	}
	return d, nil
}

// open binds the new directory by descriptor (checking it is the
// directory just made, owner-only, not a link) and creates the journal.
func (d *teamDir) open(first Record) error {
	made, err := d.parent.Lstat(d.name)
	if err != nil {
		return err
	}
	if !made.IsDir() || made.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is not an owner-only directory (mode %s)", d.name, made.Mode())
	}
	root, err := d.parent.OpenRoot(d.name)
	if err != nil {
		return err
	}
	if st, err := root.Stat("."); err != nil || !os.SameFile(st, made) {
		root.Close()
		return errors.Join(errors.New("the team directory changed while it was opened"), err)
	}
	d.root = root
	f, err := root.OpenFile(JournalName, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	d.j = &journal{f: f}
	if journalOpened != nil {
		journalOpened(f)
	}
	if err := d.j.append(first); err != nil {
		return err
	}
	return osfile.SyncRoot(root)
}

// journalOpened, when set by a test, sees the new journal before its first
// append (to make that append fail).
var journalOpened func(*os.File)

// rollback removes what a failed activation created: its journal and its
// then empty directory, through the parent's descriptor.
func (d *teamDir) rollback() error {
	var errs []error
	if d.j != nil {
		_ = d.j.close()
		if err := d.root.Remove(JournalName); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if d.root != nil {
		d.root.Close()
	}
	if err := d.parent.Remove(d.name); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// close closes the journal and the descriptors; the directory stays.
func (d *teamDir) close() error {
	err := d.j.close()
	d.root.Close()
	d.parent.Close()
	return err
}

// ReadProvenance reads a provenance journal, at most MaxJournalBytes. A
// final line without its newline (a crash mid-append) is ignored; any
// other line that does not parse is an error.
func ReadProvenance(path string) ([]Record, error) {
	f, err := osfile.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxJournalBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxJournalBytes {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, MaxJournalBytes)
	}
	var out []Record
	for n := 1; len(data) > 0; n++ {
		line, rest, complete := bytes.Cut(data, []byte{'\n'})
		if !complete {
			break // torn tail
		}
		data = rest
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return out, fmt.Errorf("read %s: line %d: %w", path, n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// MaxJournalBytes bounds what ReadProvenance reads.
const MaxJournalBytes = 64 << 20
