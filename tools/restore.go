package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/internal/fsroot"
)

// Restoration is one path of a rewind, prepared by [Config.PrepareRestore]
// and carried out by [Config.ApplyRestore].
type Restoration struct {
	// Record is the change from the path's current state to the state it
	// is restored to; staged, it carries both images (the rewind's own
	// pre-image, so the rewind can itself be rewound).
	Record changes.Record
	// Conflict says why the path is left as it is; "" means it is
	// restored.
	Conflict string

	path   string
	doc    *Document
	prior  fsroot.Prior
	target *changes.File
	// dir is set for a directory restored to existence (mkdir with
	// dirMode; with unlink, the file in its place is removed first) or,
	// with rmdir, removed (then, with target, replaced by the file).
	dir, rmdir, unlink bool
	dirMode            fs.FileMode
	// underFile marks a path a parent of which is a file now: it can be
	// restored only when the rewind replaces that file with a directory.
	underFile bool
	// needless marks a directory removal the plan drops: it restores
	// entries in it (keepUsedDirs).
	needless bool
}

// RemovesDir reports whether rs removes a directory: such restorations
// are applied after the others, children before parents (the files a
// command created in it are removed first).
func (rs Restoration) RemovesDir() bool { return rs.rmdir }

// errUnrewindableOpen is the conflict of a rewind that would remove a
// file open in an editor that applies edits.
const errUnrewindableOpen = "open in the editor: octet does not delete a file behind its buffer; close it in the editor, then rewind again"

// The conflicts of a path whose present state is not the one octet's
// ledger expects: changed since (by the user or another program), or not
// known, its content having not been kept (hashed) when octet changed it.
const (
	errChangedSince   = "changed since octet last changed it (not by octet): left as it is; force this path to overwrite it"
	errChangedBetween = "changed between two of octet's changes on this branch after that entry, by something else (you, another program, or octet on another branch): rewinding it would discard that change too (the change store keeps it: rewinding to the entry before octet's next change of it restores it); left as it is; force this path to rewind it anyway"
	errUnverified     = "octet did not keep this file's content when its command changed it (over the snapshot limit, or holding a secret), so it cannot tell whether it changed since: left as it is; force this path to rewind it anyway"
)

// forceHint ends every conflict that force overwrites, and only those.
const forceHint = "force this path"

// Forceable reports whether a rewind's conflict is one that forcing its
// path overwrites (the others stay conflicts when forced).
func Forceable(conflict string) bool { return strings.Contains(conflict, forceHint) }

// PrepareRestore reads r.Path's present state (an open document's buffer
// when the editor applies edits, as edit and write do) and prepares
// restoring it to r.Target. needed is false when the path is already in
// that state. A present state octet's ledger does not expect is a
// conflict unless force is set. With stage, both images are kept in the
// change store before it returns (the caller records Record durably
// before ApplyRestore); without (a dry run), only the diff is rendered and
// nothing is written. An error means an image could not be kept.
func (c *Config) PrepareRestore(r changes.Restore, force, stage bool) (rs Restoration, needed bool, err error) {
	rs.path = r.Path
	conflict := func(why string) (Restoration, bool, error) {
		rs.Record.Change = changes.Change{Path: r.Path, Kind: changes.Modify, Diff: why, DiffOmitted: true}
		rs.Conflict = why
		return rs, true, nil
	}
	tg, err := c.open(r.Path)
	if err != nil {
		return conflict(fileErrorText(r.Path, err))
	}
	defer tg.close()
	kind, _, err := tg.root.Inspect(tg.rel)
	switch {
	case err == nil && kind != fsroot.KindRegular && kind != fsroot.KindDirectory:
		return conflict(fmt.Sprintf("%s is a %s now: octet does not replace it; move it away, then rewind again", r.Path, kind))
	case (err == nil && kind == fsroot.KindDirectory) || r.Target.Dir:
		return c.prepareDir(tg, r, force, stage, conflict)
	}
	cur, from, doc, err := c.presentFile(tg)
	switch {
	case underFile(err): // absent: the rewind may make the parent a directory first
		rs.underFile = true
	case err != nil:
		return conflict(fileErrorText(r.Path, err))
	}
	rs.doc, rs.prior = doc, fsroot.Absent
	if from != nil {
		rs.prior = fsroot.PriorOf(from.Data)
	}
	if cur.Same(r.Target) {
		return rs, false, nil
	}
	if r.Target.Exists {
		body, err := c.Changes.Content(r.Target)
		if err != nil {
			return conflict(unavailable(r.Path, err))
		}
		rs.target = &changes.File{Data: body, Mode: r.Target.Mode}
	}
	switch {
	case rs.target == nil && doc != nil:
		rs.Record.Change = c.Changes.Preview(r.Path, from, nil)
		rs.Conflict = errUnrewindableOpen
		return rs, true, nil
	case !force && (!r.Expects(cur) || r.Between):
		rs.Record.Change = c.Changes.Preview(r.Path, from, rs.target)
		rs.Conflict = errChangedSince
		switch {
		case !r.Expects(cur) && r.Unverified():
			rs.Conflict = errUnverified
		case r.Expects(cur):
			rs.Conflict = errChangedBetween
		}
		return rs, true, nil
	case !stage:
		rs.Record.Change = c.Changes.Preview(r.Path, from, rs.target)
		return rs, true, nil
	}
	rec, _, err := c.Changes.Stage(r.Path, from, rs.target)
	if err != nil {
		return Restoration{}, false, err
	}
	rs.Record = rec
	return rs, true, nil
}

// presentFile returns the present state of tg's file (an open document's
// buffer when the editor applies edits) and its bytes and mode (nil when
// absent). An error for which underFile is true means a parent is a file.
func (c *Config) presentFile(tg *target) (changes.State, *changes.File, *Document, error) {
	data, doc, err := c.readForChange(tg)
	switch {
	case fsroot.IsNotExist(err):
		return changes.State{}, nil, nil, nil
	case err != nil:
		return changes.State{}, nil, nil, err
	}
	mode, _ := tg.root.Mode(tg.rel) // zero (unknown) for a buffer with no file
	sum := sha256.Sum256(data)
	cur := changes.State{Exists: true, SHA256: hex.EncodeToString(sum[:]), Mode: mode, Size: int64(len(data))}
	return cur, &changes.File{Data: data, Mode: mode}, doc, nil
}

// prepareDir prepares restoring r.Path when it is a directory now or at
// the target: a directory is created (with its mode) or removed when
// empty, and one that replaced a file (or a file one) is replaced back
// when it is as octet left it (or forced), its files being restored
// first.
func (c *Config) prepareDir(tg *target, r changes.Restore, force, stage bool, conflict func(string) (Restoration, bool, error)) (Restoration, bool, error) {
	rs := Restoration{path: r.Path, prior: fsroot.Absent}
	cur := changes.State{}
	var from *changes.File
	kind, _, err := tg.root.Inspect(tg.rel)
	switch {
	case err == nil && kind == fsroot.KindDirectory:
		mode, _ := tg.root.Mode(tg.rel)
		cur = changes.State{Exists: true, Dir: true, Mode: mode}
	case err == nil: // a regular file: PrepareRestore handles the others
		var doc *Document
		if cur, from, doc, err = c.presentFile(tg); err != nil {
			return conflict(fileErrorText(r.Path, err))
		}
		if doc != nil {
			return conflict(errUnrewindableOpen)
		}
		if from != nil {
			rs.prior = fsroot.PriorOf(from.Data)
		}
	case underFile(err): // absent: the rewind may make the parent a directory first
		rs.underFile = true
	case !fsroot.IsNotExist(err):
		return conflict(fileErrorText(r.Path, err))
	}
	if cur.Same(r.Target) {
		return rs, false, nil
	}
	if !force && (!r.Expects(cur) || r.Between) {
		rs.Record = c.Changes.Describe(r.Path, imageOf(cur), imageOf(r.Target), nil, nil)
		rs.Conflict = errChangedSince
		if r.Expects(cur) {
			rs.Conflict = errChangedBetween
		}
		return rs, true, nil
	}
	if r.Target.Exists && !r.Target.Dir {
		body, err := c.Changes.Content(r.Target)
		if err != nil {
			return conflict(unavailable(r.Path, err))
		}
		rs.target = &changes.File{Data: body, Mode: r.Target.Mode}
	}
	if rs.Record, err = c.dirRecord(r.Path, cur, from, r.Target, rs.target, stage); err != nil {
		return Restoration{}, false, err
	}
	rs.dir, rs.rmdir, rs.unlink, rs.dirMode = true, cur.Dir && !r.Target.Dir, from != nil, r.Target.Mode
	return rs, true, nil
}

// dirRecord returns the record of path going from cur (from: its bytes,
// when a file) to target (tgt: its bytes, when a file), a directory on
// one side at least; with stage, a file side's image is kept in the
// change store (and pinned) first, so the rewind can itself be rewound.
func (c *Config) dirRecord(path string, cur changes.State, from *changes.File, target changes.State, tgt *changes.File, stage bool) (changes.Record, error) {
	before, after := imageOf(cur), imageOf(target)
	if stage && (from != nil || tgt != nil) {
		rec, _, err := c.Changes.Stage(path, from, tgt)
		if err != nil {
			return changes.Record{}, err
		}
		if from != nil {
			before = rec.Before
		} else {
			after = rec.After
		}
	}
	return c.Changes.Describe(path, before, after, nil, nil), nil
}

// imageOf returns the image of state s (nil when absent).
func imageOf(s changes.State) *changes.Image {
	if !s.Exists {
		return nil
	}
	return &changes.Image{Dir: s.Dir, Mode: s.Mode, SHA256: s.SHA256, Size: s.Size, Unstored: s.Unstored}
}

// unavailable is the conflict of a path whose content at the entry is
// not in the change store.
func unavailable(p string, err error) string {
	return fmt.Sprintf("%s cannot be rewound: its content at that entry is not available (%v); left as it is: restore it another way (version control, a backup) if you need it", p, err)
}

// underFile reports whether err says that a parent of the path is not a
// directory (a file now).
func underFile(err error) bool { return errors.Is(err, syscall.ENOTDIR) }

// SettlePlan makes conflicts, before anything is applied, of the paths of
// preps (sorted by path, as a rewind plans them) that applying would
// fail on part-way: a directory that holds entries they do not remove
// (keepUsedDirs), and a path a parent of which is a file that preps do
// not replace with a directory. staged reports that preps kept their
// images (released for the paths it leaves). It returns preps with the
// directories restoring them creates (parentDirs) before the paths that
// need them.
func (c *Config) SettlePlan(preps []Restoration, staged bool) []Restoration {
	made := map[string]bool{}
	for _, rs := range preps {
		if rs.Conflict == "" && rs.dir && rs.unlink {
			made[rs.path] = true
		}
	}
	for i := range preps {
		rs := &preps[i]
		if !rs.underFile || rs.Conflict != "" {
			continue
		}
		if p, kind := fileParent(c, rs.path); p != "" && !made[p] {
			c.leave(rs, fmt.Sprintf("%s is a %s now, and this rewind does not replace it with a directory: %s is left as it is; move %s away, then rewind again", p, kind, rs.path, p), staged)
		}
	}
	c.keepUsedDirs(preps, staged)
	return c.parentDirs(preps)
}

// parentDirs returns preps without the removals they do not need and
// with a restoration before each path restored into a directory that is
// missing and that no restoration before it makes: the directory,
// created as fsroot creates a missing parent. The rewind records it, so
// rewinding the rewind removes it again (while empty), as a rewind past
// a write removes the directories it made.
func (c *Config) parentDirs(preps []Restoration) []Restoration {
	made := map[string]bool{}
	out := make([]Restoration, 0, len(preps))
	for _, rs := range preps {
		if rs.needless {
			continue
		}
		creates := rs.Conflict == "" && !rs.rmdir && rs.doc == nil && (rs.dir || rs.target != nil)
		if creates {
			for _, d := range c.missingParents(rs.path, made) {
				made[d] = true
				out = append(out, Restoration{path: d, prior: fsroot.Absent, dir: true, dirMode: fsroot.NewDirMode,
					Record: c.Changes.Describe(d, nil, &changes.Image{Dir: true, Mode: fsroot.NewDirMode}, nil, nil)})
			}
			if rs.dir {
				made[rs.path] = true
			}
		}
		out = append(out, rs)
	}
	return out
}

// missingParents returns the parent directories of p that do not exist
// and are not in made, parents first: up to the nearest that exists (or
// is something else, or cannot be inspected: restoring p then reports
// it).
func (c *Config) missingParents(p string, made map[string]bool) []string {
	var out []string
	for dir := path.Dir(p); dir != "." && dir != "/" && dir != p && !made[dir]; p, dir = dir, path.Dir(dir) {
		tg, err := c.open(dir)
		if err != nil {
			break
		}
		_, _, err = tg.root.Inspect(tg.rel)
		tg.close()
		if !fsroot.IsNotExist(err) {
			break
		}
		out = append(out, dir)
	}
	slices.Reverse(out)
	return out
}

// fileParent returns the nearest parent of p that is not a directory,
// and what it is ("" when none is found).
func fileParent(c *Config, p string) (string, fsroot.Kind) {
	for dir := path.Dir(p); dir != "." && dir != "/" && dir != p; p, dir = dir, path.Dir(dir) {
		tg, err := c.open(dir)
		if err != nil {
			return "", 0
		}
		kind, _, err := tg.root.Inspect(tg.rel)
		tg.close()
		if err == nil && kind != fsroot.KindDirectory {
			return dir, kind
		}
	}
	return "", 0
}

// leave makes rs a conflict saying why, releasing its staged images.
func (c *Config) leave(rs *Restoration, why string, staged bool) {
	rs.Conflict = why
	if staged {
		c.Changes.Release(rs.Record)
	}
}

// keepUsedDirs makes a conflict of each directory preps (sorted by path,
// as a rewind plans them) would remove that holds an entry they do not
// remove — a file the user put there, an ignored one — rather than fail
// on it part-way, after the other paths were restored; its parents are
// then kept too. A directory they would remove that holds only what they
// restore (or keep) is needed by the plan itself: its removal is dropped
// without a conflict (the state octet last knew there is older than its
// entries', as when someone removed it between two of octet's changes).
// staged reports that preps kept their images (released for the paths
// it keeps).
func (c *Config) keepUsedDirs(preps []Restoration, staged bool) {
	removed, kept, used := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, rs := range preps {
		switch {
		case rs.Conflict != "":
		case rs.rmdir || !rs.dir && rs.target == nil:
			removed[rs.path] = true
		default: // restored to a file or a directory
			kept[rs.path], used[path.Dir(rs.path)] = true, true
		}
	}
	for i := len(preps) - 1; i >= 0; i-- { // children before parents
		rs := &preps[i]
		if !rs.rmdir || rs.Conflict != "" {
			continue
		}
		others := c.otherEntries(rs.path, func(p string) bool { return removed[p] || kept[p] })
		switch {
		case len(others) == 0 && used[rs.path] && rs.target == nil:
			rs.needless = true
			kept[rs.path], used[path.Dir(rs.path)] = true, true
		case len(others) == 0:
			continue
		default:
			c.leave(rs, fmt.Sprintf("directory %s holds entries this rewind does not remove (%s): left in place; move them away, then rewind again", rs.path, strings.Join(others, ", ")), staged)
		}
		delete(removed, rs.path)
	}
}

// otherEntries returns (at most three of) the entries of directory dir
// for which planned is false; none when it cannot be listed
// (ApplyRestore then reports why).
func (c *Config) otherEntries(dir string, planned func(string) bool) []string {
	tg, err := c.open(dir)
	if err != nil {
		return nil
	}
	defer tg.close()
	f, err := tg.root.OpenDir(tg.rel)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	for {
		names, err := f.Readdirnames(256)
		for _, n := range names {
			if p := path.Join(dir, n); !planned(p) && len(out) < 3 {
				out = append(out, p)
			}
		}
		if err != nil || len(out) == 3 {
			return out
		}
	}
}

// ApplyRestore restores a prepared path: through the editor (applyEdit
// with the buffer's version) when it is an open document the editor
// edits, else through fsroot's no-follow, compare-before-commit write
// (bytes and mode) or removal. A path that changed since PrepareRestore
// is left as it is (the error says so).
func (c *Config) ApplyRestore(ctx context.Context, rs Restoration) error {
	if rs.Conflict != "" {
		return errors.New(rs.Conflict)
	}
	tg, err := c.open(rs.path)
	if err != nil {
		return errors.New(fileErrorText(rs.path, err))
	}
	defer tg.close()
	switch {
	case rs.rmdir:
		if err := tg.root.RemoveDir(tg.rel); err != nil || rs.target == nil {
			return err
		}
	case rs.dir:
		if rs.unlink {
			if err := tg.root.Remove(tg.rel, rs.prior); err != nil {
				return errors.New(commitErrorText(tg.display, err, false))
			}
		}
		return tg.root.Mkdir(tg.rel, rs.dirMode)
	}
	if rs.target == nil {
		if err := tg.root.Remove(tg.rel, rs.prior); err != nil {
			return errors.New(commitErrorText(tg.display, err, false))
		}
		return nil
	}
	opts := fsroot.WriteOptions{CreateParents: true, Mode: rs.target.Mode}
	if msg := c.commitChange(ctx, tg, rs.doc, rs.target.Data, rs.prior, opts, false); msg != "" {
		if rs.doc != nil {
			// The editor's failure, worded for the model's next edit:
			// what the person does after a rewind is rewind again.
			msg = strings.TrimSuffix(msg, "; read the file again") + "; the rewind is recorded: rewind to the same entry again to finish it"
		}
		return errors.New(msg)
	}
	return nil
}
