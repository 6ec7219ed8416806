package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/internal/fsroot"
)

// This file is the bash tool's workspace checkpoint: a snapshot of the
// workspace's files before and after each command that was not admitted
// as a read, whose difference is the call's changes (the same records edit
// and write produce, so a rewind takes a command back like an edit).
//
// A snapshot walks the workspace (not .git, nor what .gitignore files
// ignore, with search's matcher), lstat-ing every entry. A file whose
// size, mtime, ctime, inode and mode are those of the previous snapshot
// keeps that snapshot's hash; any other file is read (no-follow, through
// fsroot), hashed and kept in the change store, synced, before the
// snapshot returns. So the snapshot before a command costs a walk when
// nothing changed since the last one, and every image a rewind needs is
// durable before the command runs.

// DefaultSnapshotMaxEntries bounds the entries (files and directories) one
// snapshot covers; past it the rest of the workspace is not checkpointed
// (and the checkpoint says so).
const DefaultSnapshotMaxEntries = 200_000

// racyWindow is how recent a file's mtime or ctime may be for its stat
// to be trusted by the next snapshot: a file changed again within the
// filesystem's timestamp granularity could keep all its stat fields, so
// a file this recent is hashed again (git's "racy" entries).
const racyWindow = 2 * time.Second

// snapEntry is one path of a snapshot.
type snapEntry struct {
	dir     bool
	mode    fs.FileMode // permission bits
	size    int64
	mtime   int64 // ns
	ctime   int64 // ns; 0 where unknown
	ino     uint64
	sum     string // hex SHA-256; "" for a directory or a skipped file
	skipped bool   // over the per-file limit: neither hashed nor kept
	racy    bool   // its stat is too recent to be trusted next time
}

// sameStat reports whether e and o have the same stat fields.
func (e snapEntry) sameStat(o snapEntry) bool {
	return e.dir == o.dir && e.mode == o.mode && e.size == o.size && e.mtime == o.mtime && e.ctime == o.ctime && e.ino == o.ino
}

// sameState reports whether e and o are the same state of their path.
func (e snapEntry) sameState(o snapEntry) bool {
	switch {
	case e.dir || o.dir:
		return e.dir == o.dir && e.mode == o.mode
	case e.skipped || o.skipped:
		if e.mtime == 0 || o.mtime == 0 { // read back from a manifest: no stat
			return e.skipped == o.skipped && e.size == o.size && e.mode == o.mode
		}
		return e.skipped == o.skipped && e.sameStat(o)
	}
	return e.sum == o.sum && e.mode == o.mode
}

// image is the change-store image of e.
func (e snapEntry) image() *changes.Image {
	if e.dir {
		return &changes.Image{Dir: true, Mode: e.mode}
	}
	return &changes.Image{SHA256: e.sum, Size: e.size, Mode: e.mode, Unstored: e.skipped}
}

// snapshot is the state of a workspace's checkpointed files at one time.
type snapshot struct {
	taken   time.Time
	entries map[string]snapEntry // by slash-separated workspace path
	skipped []string             // files over the per-file limit, sorted
	secret  []string             // files holding a secret value, sorted
	failed  []string             // files that could not be read, sorted
	// overBudget lists the files past half the store's cap, not kept.
	overBudget []string
	special    int  // symbolic links, FIFOs, sockets, devices
	partial    bool // the entry bound was reached
	hashed     int  // files read and hashed (their stat changed)
	// manifest is the name of the snapshot's manifest in the store: every
	// path with its mode and hash, written and synced.
	manifest     string
	manifestSize int64
}

// snapshotter takes a workspace's snapshots for one bash tool, keeping
// the last one to compare stat fields with.
type snapshotter struct {
	root       string
	rec        *changes.Recorder
	redactor   *Redactor // a file holding a secret it knows is not kept
	maxEntries int
	racy       time.Duration // racyWindow

	mu       sync.Mutex
	last     *snapshot
	lastSeen time.Time // the store's expiry time when last was verified
}

// newSnapshotter returns the snapshotter of cfg's workspace, or nil when
// cfg keeps no change store (or the platform has no no-follow reads).
func newSnapshotter(cfg Config) *snapshotter {
	if cfg.Changes == nil || cfg.Changes.Store == nil || runtime.GOOS == "windows" {
		return nil
	}
	return &snapshotter{root: cfg.Root, rec: cfg.Changes, redactor: cfg.Redactor, maxEntries: DefaultSnapshotMaxEntries, racy: racyWindow}
}

// take snapshots the workspace: it walks it, hashes and keeps (synced)
// every file whose stat changed since the last snapshot, and writes the
// manifest (synced). An error means the snapshot is not durable.
func (s *snapshotter) take() (*snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	store := s.rec.Store
	prev := s.last
	if prev != nil && !store.ExpiredAt().Equal(s.lastSeen) {
		// Blobs expired since: trust no hash whose blob is gone.
		prev = s.verified(prev)
	}
	root, err := fsroot.Open(s.root)
	if err != nil {
		return nil, fmt.Errorf("open the workspace: %w", err)
	}
	defer root.Close()
	snap := &snapshot{taken: time.Now(), entries: map[string]snapEntry{}}
	var work []string
	same := prev != nil && prev.manifest != "" // every entry as in prev
	s.walk(snap, func(rel string, e snapEntry) {
		old, ok := prevEntry(prev, rel)
		same = same && ok && old.sameStat(e)
		if ok && !old.racy && !old.skipped && old.sameStat(e) {
			e.sum = old.sum
		} else if !e.dir && e.size > store.MaxBlobBytes() {
			e.skipped = true
			snap.skipped = append(snap.skipped, rel)
		} else if !e.dir {
			work = append(work, rel)
		}
		snap.entries[rel] = e
	})
	work = s.bound(snap, work)
	snap.hashed = len(work)
	if err := s.hashAll(root, snap, work); err != nil {
		return nil, err
	}
	slices.Sort(snap.skipped)
	slices.Sort(snap.secret)
	slices.Sort(snap.failed)
	if same && len(snap.entries) == len(prev.entries) && sameSums(snap, prev) && store.Has(prev.manifest, prev.manifestSize) {
		// Nothing changed: the manifest would be the same bytes.
		snap.manifest, snap.manifestSize = prev.manifest, prev.manifestSize
	} else {
		data := snap.encode()
		if snap.manifest, err = store.PutManifest(data); err != nil {
			return nil, fmt.Errorf("keep the snapshot's manifest: %w", err)
		}
		snap.manifestSize = int64(len(data))
	}
	s.last, s.lastSeen = snap, store.ExpiredAt()
	return snap, nil
}

// bound keeps what a snapshot keeps within half the store's cap: past
// it, files (by path order) are not kept, as files over the per-file
// limit are not, and said to be (overBudget) — so a workspace larger than
// the store does not make every snapshot read and keep files that then
// expire. It returns work without those files.
func (s *snapshotter) bound(snap *snapshot, work []string) []string {
	budget := s.rec.Store.MaxBytes() / 2
	var total int64
	var files []string
	for p, e := range snap.entries {
		if !e.dir && !e.skipped {
			total += e.size
			files = append(files, p)
		}
	}
	if total <= budget {
		return work
	}
	slices.Sort(files)
	total = 0
	over := map[string]bool{}
	for _, p := range files {
		e := snap.entries[p]
		if total += e.size; total > budget {
			e.skipped, e.sum = true, ""
			snap.entries[p] = e
			snap.overBudget = append(snap.overBudget, p)
			over[p] = true
		}
	}
	return slices.DeleteFunc(work, func(p string) bool { return over[p] })
}

// sums returns the names of the blobs snap's files are kept as.
func (snap *snapshot) sums() []string {
	out := make([]string, 0, len(snap.entries))
	for _, e := range snap.entries {
		if e.sum != "" {
			out = append(out, e.sum)
		}
	}
	return out
}

// sameSums reports whether every entry of snap has the hash prev has
// for it (a racy file read again may have changed in place).
func sameSums(snap, prev *snapshot) bool {
	for p, e := range snap.entries {
		if prev.entries[p].sum != e.sum || prev.entries[p].skipped != e.skipped {
			return false
		}
	}
	return true
}

func prevEntry(prev *snapshot, rel string) (snapEntry, bool) {
	if prev == nil {
		return snapEntry{}, false
	}
	e, ok := prev.entries[rel]
	return e, ok
}

// verified returns snap without the entries whose blob is no longer in
// the store.
func (s *snapshotter) verified(snap *snapshot) *snapshot {
	out := &snapshot{entries: make(map[string]snapEntry, len(snap.entries))}
	for p, e := range snap.entries {
		if e.dir || e.skipped || s.rec.Store.Has(e.sum, e.size) {
			out.entries[p] = e
		}
	}
	return out
}

// hashWorkers is how many files are read, hashed and written at once;
// they are made durable together at the end (one syncfs on Linux).
const hashWorkers = 4

// hashAll reads, hashes and keeps the files rels of snap. A file that
// vanished or became something else meanwhile is left out of the
// snapshot (the command has not run yet, or has ended).
func (s *snapshotter) hashAll(root *fsroot.Root, snap *snapshot, rels []string) error {
	type done struct {
		rel     string
		sum     string
		stored  bool
		missing bool // vanished since the walk
		failed  bool // could not be read (permissions)
		secret  bool
		err     error
	}
	batch := s.rec.Store.Batch()
	jobs := make(chan string)
	results := make(chan done)
	var wg sync.WaitGroup
	for range min(hashWorkers, max(len(rels), 1)) {
		wg.Go(func() {
			for rel := range jobs {
				data, _, err := root.ReadFile(rel, s.rec.Store.MaxBlobBytes())
				if err != nil {
					var tl *fsroot.TooLargeError
					switch {
					case errors.As(err, &tl):
						results <- done{rel: rel} // grew past the limit
					case fsroot.IsNotExist(err):
						results <- done{rel: rel, missing: true}
					default:
						results <- done{rel: rel, failed: true}
					}
					continue
				}
				if s.redactor.Contains(data) {
					results <- done{rel: rel, secret: true}
					continue
				}
				sum, stored, err := batch.Put(data)
				results <- done{rel: rel, sum: sum, stored: stored, err: err}
			}
		})
	}
	go func() {
		for _, rel := range rels {
			jobs <- rel
		}
		close(jobs)
		wg.Wait()
		close(results)
	}()
	var errs []error
	for d := range results {
		e := snap.entries[d.rel]
		switch {
		case d.err != nil:
			errs = append(errs, fmt.Errorf("keep %s: %w", d.rel, d.err))
		case d.missing:
			delete(snap.entries, d.rel)
		case d.failed:
			delete(snap.entries, d.rel)
			snap.failed = append(snap.failed, d.rel)
		case d.secret: // never copied into $OCTET_HOME
			e.skipped = true
			snap.secret = append(snap.secret, d.rel)
			snap.entries[d.rel] = e
		case !d.stored: // grew past the limit since the walk
			e.skipped = true
			snap.skipped = append(snap.skipped, d.rel)
			snap.entries[d.rel] = e
		default:
			e.sum = d.sum
			snap.entries[d.rel] = e
		}
	}
	// The images are durable before the snapshot naming them is.
	if err := batch.Sync(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// walkWorkers is how many directories a snapshot reads at once.
const walkWorkers = 4

// walkJob is a directory of the workspace waiting to be read.
type walkJob struct {
	rel    string
	parts  []string
	ignore *ignoreDir
}

// walked is what reading one directory found: its checkpointed entries
// (by path) and subdirectories, and how many entries it did not follow.
type walked struct {
	rels    []string
	entries []snapEntry
	subdirs []walkJob
	special int
}

// walk calls fn, from one goroutine, with every checkpointed entry of the
// workspace: regular files and directories, not .git, not what a
// .gitignore ignores, at most maxEntries. Symbolic links and special
// files are counted, not followed. Directories are read (readdir, then
// an fstatat per entry) by walkWorkers goroutines.
func (s *snapshotter) walk(snap *snapshot, fn func(rel string, e snapEntry)) {
	racyBefore := snap.taken.Add(-s.racy).UnixNano()
	jobs := make(chan walkJob)
	results := make(chan walked)
	var wg sync.WaitGroup
	for range walkWorkers {
		wg.Go(func() {
			for job := range jobs {
				results <- s.readDir(job, racyBefore)
			}
		})
	}
	pending := []walkJob{{rel: "."}}
	inFlight, n := 0, 0
	for len(pending) > 0 || inFlight > 0 {
		var send chan walkJob
		var next walkJob
		if len(pending) > 0 {
			send, next = jobs, pending[len(pending)-1]
		}
		select {
		case send <- next:
			pending = pending[:len(pending)-1]
			inFlight++
		case w := <-results:
			inFlight--
			snap.special += w.special
			for k, rel := range w.rels {
				if n >= s.maxEntries {
					snap.partial = true
					break
				}
				n++
				fn(rel, w.entries[k])
			}
			if !snap.partial {
				pending = append(pending, w.subdirs...)
			}
		}
	}
	close(jobs)
	wg.Wait()
}

// readDir reads one directory of the workspace.
func (s *snapshotter) readDir(job walkJob, racyBefore int64) walked {
	var w walked
	abs := filepath.Join(s.root, filepath.FromSlash(job.rel))
	dir, err := os.Open(abs)
	if err != nil {
		return w // vanished or unreadable: not checkpointed
	}
	defer dir.Close()
	ents, _ := dir.ReadDir(-1)
	matcher := job.ignore
	for _, e := range ents {
		if e.Name() == ".gitignore" && e.Type().IsRegular() {
			if data, err := readBounded(filepath.Join(abs, ".gitignore"), 1<<20); err == nil {
				matcher = matcher.with(data, job.parts)
			}
			break
		}
	}
	for _, e := range ents {
		name := e.Name()
		typ := e.Type()
		isDir := typ.IsDir()
		if isDir && name == ".git" {
			continue
		}
		if !isDir && !typ.IsRegular() {
			w.special++
			continue
		}
		parts := append(slices.Clip(job.parts), name)
		if matcher != nil && matcher.Match(parts, isDir) {
			continue
		}
		en, ok := statAt(dir, abs, name)
		if !ok || en.dir != isDir {
			continue
		}
		rel := name
		if job.rel != "." {
			rel = job.rel + "/" + name
		}
		en.racy = en.mtime >= racyBefore || en.ctime >= racyBefore
		w.rels = append(w.rels, rel)
		w.entries = append(w.entries, en)
		if isDir {
			w.subdirs = append(w.subdirs, walkJob{rel: rel, parts: parts, ignore: matcher.child(parts, name)})
		}
	}
	return w
}

// readBounded reads at most limit bytes of the regular file name.
func readBounded(name string, limit int64) ([]byte, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is over %d bytes", name, limit)
	}
	return data, nil
}

// encode returns the manifest: one JSON object per line and path,
// sorted, {"p":path,"m":mode,...} with "d":true for a directory, "s" the
// size and "h" the hex SHA-256 of a file, "x":true for a file not kept.
// It holds no stat fields, so the same workspace state has the same
// manifest.
func (snap *snapshot) encode() []byte {
	paths := make([]string, 0, len(snap.entries))
	for p := range snap.entries {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	b := make([]byte, 0, len(paths)*128)
	for _, p := range paths {
		e := snap.entries[p]
		b = append(b, `{"p":`...)
		b = appendJSONString(b, p)
		b = append(b, `,"m":`...)
		b = strconv.AppendUint(b, uint64(e.mode), 10)
		if e.dir {
			b = append(b, `,"d":true`...)
		} else {
			b = append(b, `,"s":`...)
			b = strconv.AppendInt(b, e.size, 10)
		}
		if e.sum != "" {
			b = append(b, `,"h":"`...)
			b = append(b, e.sum...)
			b = append(b, '"')
		}
		if e.skipped {
			b = append(b, `,"x":true`...)
		}
		b = append(b, "}\n"...)
	}
	return b
}

// appendJSONString appends s as a JSON string: as it is when it needs no
// escaping (the common case), else through encoding/json (which also
// replaces invalid UTF-8).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// CrashRecoverer is implemented by tools whose intent is a snapshot
// (bash): crash recovery asks them what changed since it.
type CrashRecoverer interface {
	// RecoverChanges returns what changed in the workspace since the
	// snapshot in.Snapshot names, and what a rewind of it cannot undo.
	RecoverChanges(in changes.Intent) ([]changes.Record, []string, error)
}

var _ CrashRecoverer = (*BashTool)(nil)

// RecoverChanges implements CrashRecoverer: the changes between the
// snapshot a command killed with octet took before it and the workspace
// now (which may include what the user did since).
func (t *BashTool) RecoverChanges(in changes.Intent) ([]changes.Record, []string, error) {
	if t.snaps == nil || in.Snapshot == "" {
		return nil, nil, nil
	}
	pre, err := t.snaps.load(in.Snapshot)
	if err != nil {
		return nil, nil, err
	}
	post, err := t.snaps.take()
	if err != nil {
		return nil, nil, err
	}
	undo := append([]string{"the command was killed with octet: what it did is known only from the workspace's files, which may also hold later changes"}, t.snaps.cannotUndo(pre, post)...)
	return t.snaps.changesBetween(pre, post), undo, nil
}

// load reads back the snapshot whose manifest is sum (no stat fields:
// only what the manifest keeps).
func (s *snapshotter) load(sum string) (*snapshot, error) {
	data, err := s.rec.Store.Get(sum)
	if err != nil {
		return nil, fmt.Errorf("read the snapshot before the command: %w", err)
	}
	snap := &snapshot{entries: map[string]snapEntry{}, manifest: sum, manifestSize: int64(len(data))}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		var m struct {
			P string      `json:"p"`
			D bool        `json:"d"`
			M fs.FileMode `json:"m"`
			S int64       `json:"s"`
			H string      `json:"h"`
			X bool        `json:"x"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return nil, fmt.Errorf("the snapshot before the command is damaged: %w", err)
		}
		snap.entries[m.P] = snapEntry{dir: m.D, mode: m.M, size: m.S, sum: m.H, skipped: m.X}
		if m.X {
			snap.skipped = append(snap.skipped, m.P)
		}
	}
	return snap, nil
}

// changesBetween returns the records of what changed from pre to post,
// sorted by path. A path only in pre that still exists (a .gitignore
// written by the command now ignores it) is not a deletion; one only in
// post that was not changed after pre was taken (no longer ignored) is
// not a creation.
func (s *snapshotter) changesBetween(pre, post *snapshot) []changes.Record {
	var paths []string
	for p := range pre.entries {
		paths = append(paths, p)
	}
	for p := range post.entries {
		if _, ok := pre.entries[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var out []changes.Record
	for _, p := range paths {
		a, inPre := pre.entries[p]
		b, inPost := post.entries[p]
		switch {
		case inPre && inPost && a.sameState(b):
			continue
		case inPre && !inPost:
			if _, err := os.Lstat(filepath.Join(s.root, filepath.FromSlash(p))); err == nil {
				continue
			}
		case !inPre && inPost:
			if changed := max(b.mtime, b.ctime); changed != 0 && changed < pre.taken.UnixNano() {
				continue
			}
		}
		var before, after *changes.Image
		var old, updated []byte
		if inPre {
			before = a.image()
			old = s.content(a)
		}
		if inPost {
			after = b.image()
			updated = s.content(b)
		}
		out = append(out, s.rec.Describe(p, before, after, old, updated))
	}
	return out
}

// content returns the kept bytes of e (nil for a directory or a file not
// kept).
func (s *snapshotter) content(e snapEntry) []byte {
	if e.dir || e.skipped {
		return nil
	}
	data, err := s.rec.Store.Get(e.sum)
	if err != nil {
		return nil
	}
	return data
}

// pathList names the paths of a and b (at most 10 of them) with their
// count; "" when there are none.
func pathList(a, b []string) string {
	all := append(slices.Clone(a), b...)
	slices.Sort(all)
	all = slices.Compact(all)
	if len(all) == 0 {
		return ""
	}
	shown := all[:min(len(all), 10)]
	more := ""
	if len(all) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(all)-len(shown))
	}
	return fmt.Sprintf("%d: %s%s", len(all), strings.Join(shown, ", "), more)
}

// cannotUndo states what a rewind of a command checkpointed by pre and
// post cannot take back.
func (s *snapshotter) cannotUndo(pre, post *snapshot) []string {
	out := []string{"effects outside the workspace's files: network requests, processes the command started or signalled, files outside the workspace, .git, and files .gitignore ignores"}
	if l := pathList(pre.skipped, post.skipped); l != "" {
		out = append(out, fmt.Sprintf("file(s) over the %d-byte snapshot limit, not kept: %s", s.rec.Store.MaxBlobBytes(), l))
	}
	if l := pathList(pre.secret, post.secret); l != "" {
		out = append(out, "file(s) holding a secret octet keeps out of its own files (the API key), not kept: "+l)
	}
	if l := pathList(pre.overBudget, post.overBudget); l != "" {
		out = append(out, fmt.Sprintf("file(s) past the %d bytes a snapshot keeps (half the change store's cap), not kept: %s", s.rec.Store.MaxBytes()/2, l))
	}
	if l := pathList(pre.failed, post.failed); l != "" {
		out = append(out, "file(s) octet could not read, not kept: "+l)
	}
	if n := max(pre.special, post.special); n > 0 {
		out = append(out, fmt.Sprintf("%d symbolic link(s) or special file(s), not followed or kept", n))
	}
	if pre.partial || post.partial {
		out = append(out, fmt.Sprintf("the workspace has more than %d entries: those past the bound were not checkpointed", s.maxEntries))
	}
	return out
}
