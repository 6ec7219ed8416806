package changes

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// DefaultMaxBlobBytes is the store's default per-file limit: an image
// larger than this is not kept (the Record says so).
const DefaultMaxBlobBytes = 8 << 20

// DefaultMaxStoreBytes is a store's default cap on its blobs' total size
// (1 GiB): past it, the least recently used blobs expire.
const DefaultMaxStoreBytes = 1 << 30

// expiredName is the marker file an expiry writes: a blob the ledger
// names that is missing after it expired, not lost.
const expiredName = "expired"

// tmpMaxAge is how old a temporary file left by a crashed writer must be
// before Open removes it (a live writer finishes within seconds).
const tmpMaxAge = time.Hour

// Store is a private content-addressed blob store for one workspace:
//
//	<dir>/workspace            the workspace's absolute path (0600)
//	<dir>/objects/<2 hex>/<62 hex>   one file per image, named by the hex
//	                           SHA-256 of its bytes, the bytes as they are (0600)
//	<dir>/tmp/                 temporary files of writes in progress
//
// Directories are 0700. A blob is written to tmp/, synced, renamed into
// objects/ and its directory synced before Put returns, so a blob named in
// the ledger is complete; two writers of one blob write the same bytes, so
// no lock is needed. Blobs are never changed. The blobs' total size is
// capped (DefaultMaxStoreBytes, SetMaxBytes): a write that takes it over
// the cap removes the least recently written or reused blobs (by mtime;
// reusing a blob touches it) down to 90% of it and leaves the marker file
// "expired", so a missing blob is reported as expired. Methods are safe
// for concurrent use.
type Store struct {
	dir     string
	maxBlob int64

	mu       sync.Mutex
	maxTotal int64
	total    int64      // the blobs' total size; -1 until counted
	counting *blobCount // the count under way, when total is not known
	// countHook, when set (tests, before the first write), runs as a
	// count begins.
	countHook func()
	pinned    map[string]int // blobs that must not expire (Pin)
	holds     map[int]func(string) bool
	nextHold  int
}

// WorkspaceDir returns the store directory of workspace (an absolute path)
// under home ($OCTET_HOME): home/store/<first 32 hex digits of the
// SHA-256 of the path>.
func WorkspaceDir(home, workspace string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(workspace)))
	return filepath.Join(home, "store", hex.EncodeToString(sum[:16]))
}

// OpenWorkspace opens (creating it when missing) the store of workspace
// under home. maxBlob bounds one image (DefaultMaxBlobBytes when <= 0).
func OpenWorkspace(home, workspace string, maxBlob int64) (*Store, error) {
	dir := WorkspaceDir(home, workspace)
	s, err := Open(dir, maxBlob)
	if err != nil {
		return nil, err
	}
	if err := s.claim(filepath.Clean(workspace)); err != nil {
		return nil, err
	}
	return s, nil
}

// InspectWorkspace opens the store of workspace under home for reading
// only (diffs, rewind previews): nothing is created, cleaned or claimed,
// so it works on a read-only $OCTET_HOME, and a missing store reads as
// an empty one. A store that names another workspace is refused, as by
// OpenWorkspace. The caller must not write through it.
func InspectWorkspace(home, workspace string, maxBlob int64) (*Store, error) {
	dir := WorkspaceDir(home, workspace)
	name := filepath.Join(dir, "workspace")
	got, err := os.ReadFile(name)
	switch {
	case err == nil && string(got) != filepath.Clean(workspace):
		return nil, fmt.Errorf("change store %s belongs to workspace %q, not %q", dir, got, workspace)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read change store %s: %w", name, err)
	}
	return newStore(dir, maxBlob), nil
}

func newStore(dir string, maxBlob int64) *Store {
	if maxBlob <= 0 {
		maxBlob = DefaultMaxBlobBytes
	}
	return &Store{dir: dir, maxBlob: maxBlob, maxTotal: DefaultMaxStoreBytes, total: -1}
}

// Open opens (creating it when missing) the store in dir. maxBlob bounds
// one image (DefaultMaxBlobBytes when <= 0).
func Open(dir string, maxBlob int64) (*Store, error) {
	s := newStore(dir, maxBlob)
	for _, d := range []string{dir, s.objects(), s.tmp()} {
		if err := mkdirSynced(d); err != nil {
			return nil, fmt.Errorf("open change store %s: %w (check the permissions of $OCTET_HOME)", dir, err)
		}
	}
	s.removeStaleTemps()
	return s, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// SetMaxBytes sets the cap on the blobs' total size (DefaultMaxStoreBytes
// when n <= 0).
func (s *Store) SetMaxBytes(n int64) {
	if n <= 0 {
		n = DefaultMaxStoreBytes
	}
	s.mu.Lock()
	s.maxTotal = n
	s.mu.Unlock()
}

// MaxBlobBytes returns the per-file limit.
func (s *Store) MaxBlobBytes() int64 { return s.maxBlob }

func (s *Store) objects() string { return filepath.Join(s.dir, "objects") }
func (s *Store) tmp() string     { return filepath.Join(s.dir, "tmp") }

// claim records the workspace path in the store (once), and refuses a
// store that names another workspace.
func (s *Store) claim(workspace string) error {
	name := filepath.Join(s.dir, "workspace")
	got, err := os.ReadFile(name)
	switch {
	case err == nil && string(got) == workspace:
		return nil
	case err == nil:
		return fmt.Errorf("change store %s belongs to workspace %q, not %q", s.dir, got, workspace)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read change store %s: %w", name, err)
	}
	return s.writeSynced(name, []byte(workspace))
}

// blobPath returns the file of the blob named sum.
func (s *Store) blobPath(sum string) string {
	return filepath.Join(s.objects(), sum[:2], sum[2:])
}

// validSum reports whether sum is 64 lower-case hex digits.
func validSum(sum string) bool {
	if len(sum) != 64 {
		return false
	}
	for _, c := range sum {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Put keeps data and returns its name (hex SHA-256) and whether it was
// kept: data over the per-file limit is not.
func (s *Store) Put(data []byte) (sum string, stored bool, err error) {
	h := sha256.Sum256(data)
	sum = hex.EncodeToString(h[:])
	stored, err = s.put(sum, data)
	return sum, stored, err
}

// PutManifest keeps data, a snapshot's manifest, durably whatever its
// size (the per-file limit is for workspace files), and returns its name.
func (s *Store) PutManifest(data []byte) (string, error) {
	h := sha256.Sum256(data)
	sum := hex.EncodeToString(h[:])
	_, err := s.putBounded(sum, data, int64(len(data)))
	return sum, err
}

// Has reports whether the store holds a blob named sum (of size bytes).
func (s *Store) Has(sum string, size int64) bool {
	if !validSum(sum) {
		return false
	}
	st, err := os.Lstat(s.blobPath(sum))
	return err == nil && st.Mode().IsRegular() && st.Size() == size
}

// ExpiredAt returns when blobs last expired (zero if never).
func (s *Store) ExpiredAt() time.Time {
	st, err := os.Lstat(filepath.Join(s.dir, expiredName))
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// put keeps data, whose hex SHA-256 is sum, durably.
func (s *Store) put(sum string, data []byte) (bool, error) {
	return s.putBounded(sum, data, s.maxBlob)
}

// putBounded keeps data, whose hex SHA-256 is sum, durably unless it is
// over limit bytes.
func (s *Store) putBounded(sum string, data []byte, limit int64) (bool, error) {
	if int64(len(data)) > limit {
		return false, nil
	}
	final := s.blobPath(sum)
	if s.reuse(final, int64(len(data))) {
		// A batch of another snapshot may have written it and not synced
		// it yet: this caller's durability must not depend on that one.
		if err := syncPath(final); err != nil {
			return false, fmt.Errorf("change store: %w", err)
		}
		return true, syncDir(filepath.Dir(final))
	}
	if err := mkdirSynced(filepath.Dir(final)); err != nil {
		return false, fmt.Errorf("change store: %w", err)
	}
	if err := s.writeSynced(final, data); err != nil {
		return false, fmt.Errorf("change store: %w", err)
	}
	s.account(final, int64(len(data)))
	return true, nil
}

// reuse reports whether the blob final of size bytes is kept already
// (content-addressed); reused, it is recent again.
func (s *Store) reuse(final string, size int64) bool {
	st, err := os.Lstat(final)
	if err != nil || !st.Mode().IsRegular() || st.Size() != size {
		return false
	}
	now := time.Now()
	_ = os.Chtimes(final, now, now)
	return true
}

// A Batch keeps many blobs and makes them durable together with Sync:
// one file-system sync (syncfs on Linux) instead of two fsyncs per blob,
// for the snapshot before a bash command, which may keep every file of
// the workspace at once. A blob put through a batch is durable only once
// Sync has returned nil; a crash before that may leave it empty or
// missing, which Has (by size) and Get (by content) see, so it is written
// again or reported, never used wrong. Every blob put through a batch is
// pinned (it does not expire, whatever else is written) until Release:
// the caller pins what it keeps of them before releasing the batch.
type Batch struct {
	s       *Store
	mu      sync.Mutex
	written []string // blobs since the last Sync, for platforms without syncfs
	pinned  []string // every blob put, until Release
}

// Batch starts a batch of blobs.
func (s *Store) Batch() *Batch { return &Batch{s: s} }

// Release unpins the blobs put through b.
func (b *Batch) Release() {
	b.mu.Lock()
	pinned := b.pinned
	b.pinned = nil
	b.mu.Unlock()
	b.s.Unpin(pinned)
}

// Put keeps data as [Store.Put] does, durable once Sync returns.
func (b *Batch) Put(data []byte) (sum string, stored bool, err error) {
	h := sha256.Sum256(data)
	sum = hex.EncodeToString(h[:])
	if int64(len(data)) > b.s.maxBlob {
		return sum, false, nil
	}
	// Pinned before it is written: another worker's write over the cap
	// must not expire it before the caller keeps it.
	b.s.Pin([]string{sum})
	b.mu.Lock()
	b.pinned = append(b.pinned, sum)
	b.mu.Unlock()
	final := b.s.blobPath(sum)
	if !b.s.reuse(final, int64(len(data))) {
		if err := mkdirSynced(filepath.Dir(final)); err != nil {
			return sum, false, fmt.Errorf("change store: %w", err)
		}
		if err := b.s.write(final, data, false); err != nil {
			return sum, false, fmt.Errorf("change store: %w", err)
		}
		b.s.account(final, int64(len(data)))
	}
	b.mu.Lock()
	b.written = append(b.written, final)
	b.mu.Unlock()
	return sum, true, nil
}

// Sync makes every blob put since the last Sync durable.
func (b *Batch) Sync() error {
	b.mu.Lock()
	written := b.written
	b.written = nil
	b.mu.Unlock()
	if len(written) == 0 {
		return nil
	}
	sync := syncAll
	if len(written) <= syncEachMax {
		// A few blobs: their own fsyncs, not a flush of everything else
		// dirty on the store's file system.
		sync = func(_ string, files []string) error { return syncEach(files) }
	}
	if err := sync(b.s.dir, written); err != nil {
		return fmt.Errorf("change store: %w", err)
	}
	return nil
}

// syncEachMax is the most blobs a Batch syncs one by one.
const syncEachMax = 8

// syncEach syncs each file and then each of their directories.
func syncEach(files []string) error {
	dirs := map[string]bool{}
	for _, f := range files {
		if err := syncPath(f); err != nil {
			return err
		}
		dirs[filepath.Dir(f)] = true
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// syncPath syncs the file at path.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// blobFile is one blob found by a scan.
type blobFile struct {
	path  string
	size  int64
	mtime time.Time
}

// scan lists the store's blobs.
func (s *Store) scan() []blobFile {
	var out []blobFile
	fans, _ := os.ReadDir(s.objects())
	for _, fan := range fans {
		dir := filepath.Join(s.objects(), fan.Name())
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
				out = append(out, blobFile{path: filepath.Join(dir, e.Name()), size: info.Size(), mtime: info.ModTime()})
			}
		}
	}
	return out
}

// account adds a new blob of size bytes to the total and, over the cap,
// expires the least recently used blobs (never the one just written).
// Until the blobs are counted — in the background, begun by the first
// write — a write waits for the count only when the blobs written since
// are over the cap by themselves: a process's first write does not wait
// for a look at every blob in the store.
func (s *Store) account(written string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.total >= 0:
		s.total += size
	default:
		c := s.countLocked()
		c.add(written, size)
		if c.bytes <= s.maxTotal {
			return // checked by the first write after the count
		}
		s.mu.Unlock()
		<-c.done // the count adds what was written since
		s.mu.Lock()
	}
	if s.total <= s.maxTotal {
		return
	}
	if s.expire(written) {
		_ = s.writeSynced(filepath.Join(s.dir, expiredName), []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n"))
	}
}

// Counted returns a channel closed once the blobs' total size is
// counted, beginning the count in the background when it is not known
// and none is under way (the first write begins it otherwise).
func (s *Store) Counted() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total < 0 {
		return s.countLocked().done
	}
	return closedChan
}

// closedChan is a closed channel.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// blobCount is a count of the blobs' total size under way, and the blobs
// written while it runs (by path), which it adds.
type blobCount struct {
	written map[string]int64
	bytes   int64 // their sizes' sum
	done    chan struct{}
}

// add notes a blob written while c runs.
func (c *blobCount) add(path string, size int64) {
	if _, again := c.written[path]; !again {
		c.bytes += size
	}
	c.written[path] = size
}

// countLocked returns the count under way, begun now if there is none.
// The caller holds s.mu and the total is not known.
func (s *Store) countLocked() *blobCount {
	if s.counting == nil {
		c := &blobCount{written: map[string]int64{}, done: make(chan struct{})}
		s.counting = c
		go s.count(c)
	}
	return s.counting
}

// count counts the blobs' total size into s.total: every blob in the
// store, each written while it ran once.
func (s *Store) count(c *blobCount) {
	defer close(c.done)
	if s.countHook != nil {
		s.countHook()
	}
	blobs := s.scan() // without s.mu: writes go on meanwhile
	s.mu.Lock()
	defer s.mu.Unlock()
	total := c.bytes
	for _, b := range blobs {
		if _, seen := c.written[b.path]; !seen {
			total += b.size
		}
	}
	s.total, s.counting = total, nil
}

// expire brings the blobs down to 90% of the cap: first the blobs no
// checkpoint or kept intent needs (a snapshot's unchanged files, images
// of calls whose result never became durable and whose intent was
// dropped), least recently used first; then whole checkpoints, oldest
// first, each with the blobs no newer checkpoint needs. Neither the blob
// just written, nor a pinned or held one, nor one an intent names is removed. It
// reports whether anything was. The caller holds s.mu.
func (s *Store) expire(written string) bool {
	blobs := s.scan()
	slices.SortFunc(blobs, func(a, b blobFile) int { return a.mtime.Compare(b.mtime) })
	s.total = 0
	bySum := make(map[string]blobFile, len(blobs))
	for _, b := range blobs {
		s.total += b.size
		bySum[filepath.Base(filepath.Dir(b.path))+filepath.Base(b.path)] = b
	}
	cps := s.checkpoints()
	refs := map[string]int{}
	for _, c := range cps {
		for _, sum := range c.blobs {
			refs[sum]++
		}
	}
	for _, sum := range s.intentBlobs() {
		refs[sum]++ // held by a call in progress (or one a crash left): never expired here
	}
	for _, sum := range s.headBlobs() {
		refs[sum]++ // the next process's first snapshot starts from it
	}
	goal := s.maxTotal / 10 * 9
	removed := false
	remove := func(sum string) {
		b, ok := bySum[sum]
		if !ok || b.path == written || s.held(sum) || os.Remove(b.path) != nil {
			return
		}
		delete(bySum, sum)
		s.total -= b.size
		removed = true
	}
	for _, b := range blobs {
		if s.total <= goal {
			return removed
		}
		if sum := filepath.Base(filepath.Dir(b.path)) + filepath.Base(b.path); refs[sum] == 0 {
			remove(sum)
		}
	}
	now := time.Now()
	for _, c := range cps {
		if s.total <= goal {
			break
		}
		s.expireCheckpoint(c, now)
		removed = true
		for _, sum := range c.blobs {
			if refs[sum]--; refs[sum] == 0 {
				remove(sum)
			}
		}
	}
	return removed
}

// writeSynced writes data to name through a synced temporary file, a
// rename and a sync of name's directory.
func (s *Store) writeSynced(name string, data []byte) error {
	return s.write(name, data, true)
}

// write writes data to name through a temporary file and a rename; with
// synced, the file is synced before the rename and the directory after.
func (s *Store) write(name string, data []byte, synced bool) error {
	tmp, err := s.createTemp()
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if synced {
		if err := tmp.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", tmp.Name(), err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("rename into %s: %w", name, err)
	}
	ok = true
	if !synced {
		return nil
	}
	return syncDir(filepath.Dir(name))
}

// createTemp creates a new 0600 file in tmp/.
func (s *Store) createTemp() (*os.File, error) {
	for range 16 {
		name := filepath.Join(s.tmp(), rand.Text())
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create temporary file: %w", err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("create temporary file in %s: names keep colliding", s.tmp())
}

// removeStaleTemps removes temporary files a crashed writer left behind.
func (s *Store) removeStaleTemps() {
	ents, err := os.ReadDir(s.tmp())
	if err != nil {
		return
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > tmpMaxAge {
			os.Remove(filepath.Join(s.tmp(), e.Name()))
		}
	}
}

// MaxBytes returns the cap on the blobs' total size.
func (s *Store) MaxBytes() int64 { return s.maxBytes() }

func (s *Store) maxBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxTotal
}

// ErrNotStored is returned (wrapped) by Get for a blob the store does not
// hold.
var ErrNotStored = errors.New("not in the change store")

// Get returns the blob named sum, checking that its bytes still hash to
// sum.
func (s *Store) Get(sum string) ([]byte, error) {
	if !validSum(sum) {
		return nil, fmt.Errorf("change store: invalid blob name %q", sum)
	}
	data, err := os.ReadFile(s.blobPath(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, s.notStored(sum)
	}
	if err != nil {
		return nil, fmt.Errorf("change store: %w", err)
	}
	h := sha256.Sum256(data)
	if hex.EncodeToString(h[:]) != sum {
		return nil, fmt.Errorf("change store: blob %s is damaged (its content no longer matches its name)", sum)
	}
	return data, nil
}

// notStored is the error of blob sum, which the store does not hold.
func (s *Store) notStored(sum string) error {
	if _, err := os.Lstat(filepath.Join(s.dir, expiredName)); err == nil {
		return fmt.Errorf("blob %s: %w (it may have expired: the store keeps at most %d bytes and removes the least recently used images first)", sum, ErrNotStored, s.maxBytes())
	}
	return fmt.Errorf("blob %s: %w", sum, ErrNotStored)
}

// mkdirSynced creates dir (0700) when missing and syncs its parent so the
// new entry is durable; an existing directory is left as it is.
func mkdirSynced(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		if err := mkdirSynced(filepath.Dir(dir)); err != nil {
			return err
		}
		err = os.Mkdir(dir, 0o700)
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
	}
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	if err := errors.Join(d.Sync(), d.Close()); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
