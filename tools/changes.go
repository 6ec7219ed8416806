package tools

import (
	"context"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/internal/fsroot"
)

// newFileMode is the mode fsroot gives a file it creates.
const newFileMode fs.FileMode = 0o644

// stageChange keeps the images of tg's change from before (absent unless
// existed) to after in the configured change store and returns the
// records a result carries once the change is made (nil when nothing
// changes). Call it right before performing the effect: an error means an
// image could not be kept, and the effect must then not be performed.
// Every path that changes a file (a disk write, an edit routed through the
// editor) calls it with the bytes it changes from and to; the file keeps
// its mode (a new one gets newFileMode, as fsroot creates it).
func (c *Config) stageChange(tg *target, before []byte, existed bool, after []byte) ([]changes.Record, error) {
	mode := tg.mode()
	var from *changes.File
	if existed {
		from = &changes.File{Data: before, Mode: mode}
	}
	return c.stageFile(tg.display, from, &changes.File{Data: after, Mode: mode})
}

// stageFile is stageChange for a change whose sides the caller built (nil:
// absent), a removal or a file moved with its mode included.
func (c *Config) stageFile(display string, before, after *changes.File) ([]changes.Record, error) {
	rec, ok, err := c.Changes.Stage(display, before, after)
	if err != nil || !ok {
		return nil, err
	}
	return []changes.Record{rec}, nil
}

// newDirs returns tg's parent directories (paths beneath its root) that
// do not exist yet and are not in claimed (by the paths results show),
// parents first: the ones writing tg creates. Each is added to claimed,
// so the steps of one patch claim a directory once.
func newDirs(tg *target, claimed map[string]bool) []string {
	var out []string
	for d := path.Dir(filepath.ToSlash(tg.rel)); d != "." && d != "/"; d = path.Dir(d) {
		if _, _, err := tg.root.Inspect(d); !fsroot.IsNotExist(err) {
			break
		}
		if !claimed[tg.shown(d)] {
			out = append(out, d)
		}
	}
	slices.Reverse(out)
	for _, d := range out {
		claimed[tg.shown(d)] = true
	}
	return out
}

// dirRecords returns the records of the directories dirs (paths beneath
// tg's root, parents first) that writing tg creates, each with the mode
// fsroot gives it: a rewind past the write then removes them (while
// empty), as it removes the directories a bash command made.
func (c *Config) dirRecords(tg *target, dirs []string) []changes.Record {
	out := make([]changes.Record, 0, len(dirs))
	for _, d := range dirs {
		out = append(out, c.Changes.Describe(tg.shown(d), nil, &changes.Image{Dir: true, Mode: fsroot.NewDirMode}, nil, nil))
	}
	return out
}

// creatingText is what an approval's detail says of the directories
// dirs (paths beneath tg's root) that writing tg creates: "" when none.
func creatingText(tg *target, dirs []string) string {
	if len(dirs) == 0 {
		return ""
	}
	names := make([]string, len(dirs))
	for i, d := range dirs {
		names[i] = shownPath(tg.shown(d))
	}
	noun := "directory"
	if len(dirs) > 1 {
		noun = "directories"
	}
	return "; creates " + noun + " " + strings.Join(names, ", ")
}

// removeDirs removes dirs (parents first, as newDirs lists them), deepest
// first, each only while empty: the directories a write that then failed
// created.
func removeDirs(tg *target, dirs []string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = tg.root.RemoveDir(dirs[i])
	}
}

// mode is tg's file's permission bits, or the mode fsroot gives a file it
// creates when it is absent on disk (or not inspectable).
func (tg *target) mode() fs.FileMode {
	mode, err := tg.root.Mode(tg.rel)
	if err != nil {
		return newFileMode
	}
	return mode
}

// recordIntent keeps recs as inv's intended changes (when the caller
// keeps intents): call it after stageChange and before the effect. The
// error is the model-visible refusal ("" on success). The staged images
// are released to the store's expiry once the intent names them: from
// then on the durable intent, and then the call's checkpoint, keep them.
// (Without an intent log they are released here too, and only the
// checkpoint keeps them once the call's result is committed.)
func (c *Config) recordIntent(inv Invocation, recs []changes.Record) string {
	defer c.Changes.Release(recs...)
	if inv.Intent == nil || len(recs) == 0 {
		return ""
	}
	if err := inv.Intent(changes.Intent{Records: recs}); err != nil {
		return stageErrorText(err)
	}
	return ""
}

// stageErrorText is the model-visible refusal when the change store could
// not keep a file's images.
func stageErrorText(err error) string {
	return err.Error() + "; nothing was written (octet keeps every file's prior content before changing it: free space in $OCTET_HOME or fix its permissions, then try again)"
}

// fileChanger is what the tools that change one whole file (edit, write)
// share: their configuration and the file states their approval
// previews showed, by call.
type fileChanger struct {
	cfg   Config
	shown *shownPriors
}

func newFileChanger(cfg Config) (fileChanger, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return fileChanger{}, err
	}
	return fileChanger{cfg: cfg, shown: newShownPriors()}, nil
}

// Concurrency reports Sequential: mutations are barriers.
func (fileChanger) Concurrency() Concurrency { return Sequential }

// ReplaySafety reports ReplayUnsafe: an interrupted change is
// indeterminate.
func (fileChanger) ReplaySafety() ReplaySafety { return ReplayUnsafe }

// fileChange is one whole-file change: tg from old (absent unless
// existed) to updated, through the editor when doc is set.
type fileChange struct {
	tg      *target
	doc     *Document
	old     []byte
	existed bool
	updated []byte
	// prior is what the file held when the change was computed; opts
	// are the write's.
	prior fsroot.Prior
	opts  fsroot.WriteOptions
	// watch follows the editor's diagnostics of the change (nil: none).
	watch *diagWatch
}

// apply makes ch for call inv: it keeps the change's images and intent,
// then commits the write, comparing the file with what it held when the
// change was computed or, when an approval preview was shown (bound),
// with what that preview showed. It returns the change's records, or the
// model-visible refusal; err is the call's cancellation.
func (c fileChanger) apply(ctx context.Context, inv Invocation, ch fileChange, shown fileState, bound bool) ([]changes.Record, string, error) {
	recs, err := c.cfg.stageChange(ch.tg, ch.old, ch.existed, ch.updated)
	if err != nil {
		return nil, stageErrorText(err), nil
	}
	var dirs []string // the parent directories a new file on disk needs
	if !ch.existed && ch.doc == nil && ch.opts.CreateParents && len(recs) > 0 {
		dirs = newDirs(ch.tg, map[string]bool{})
		recs = append(c.cfg.dirRecords(ch.tg, dirs), recs...)
	}
	if msg := c.cfg.recordIntent(inv, recs); msg != "" {
		return nil, msg, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if bound {
		ch.prior = shown.prior // equal to prior here; named so the commit compares with what was shown
	}
	if msg := c.cfg.commitWatched(ctx, ch.watch, ch.tg, ch.doc, ch.updated, ch.prior, ch.opts, bound); msg != "" {
		removeDirs(ch.tg, dirs)
		return nil, msg, nil
	}
	c.cfg.Files.record(inv.Principal, ch.tg.key, ch.updated)
	return recs, "", nil
}
