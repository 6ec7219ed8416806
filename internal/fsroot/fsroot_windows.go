package fsroot

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/octet-agent/octet/internal/winat"
	"golang.org/x/sys/windows"
)

// On Windows every path beneath the root is resolved one component at a
// time with NtCreateFile relative to the previous directory handle
// (package winat): FILE_OPEN_REPARSE_POINT keeps a symbolic link,
// junction or mount point from being followed, and any component whose
// attributes include FILE_ATTRIBUTE_REPARSE_POINT is refused with
// ErrSymlink. Mutations keep the parent directory handle, create the
// sibling temporary with FILE_CREATE (create_new) relative to it, re-read
// the target through the same handle just before commit and rename the
// temporary's own handle to a name relative to that parent handle
// (FILE_RENAME_INFORMATION.RootDirectory, ReplaceIfExists false when the
// target must be absent).

// dirAccess is the access of a directory handle the walk holds.
const dirAccess = windows.FILE_LIST_DIRECTORY | windows.FILE_TRAVERSE

// Root is an open workspace root. It is safe for concurrent use.
type Root struct {
	dir    string
	h      windows.Handle
	closed atomic.Bool
}

// Option configures Open.
type Option func(*Root)

// WithComponentWalk has no effect on Windows, whose only resolver is the
// handle-relative component walk.
func WithComponentWalk() Option { return func(*Root) {} }

// Open opens root, which must be an existing directory given as an
// absolute path. Links in root itself are resolved once, here: the root
// is trusted, the paths beneath it are not.
func Open(root string, opts ...Option) (*Root, error) {
	if root == "" || !filepath.IsAbs(root) {
		return nil, fmt.Errorf("open workspace root %q: root must be an absolute path", root)
	}
	dir := filepath.Clean(root)
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace root %s: %w", dir, err)
	}
	h, err := windows.CreateFile(p, dirAccess|windows.FILE_READ_ATTRIBUTES|windows.SYNCHRONIZE,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace root %s: %w", dir, err)
	}
	var info winat.Info
	if err := windows.GetFileInformationByHandle(h, &info); err != nil || !winat.IsDir(&info) {
		windows.CloseHandle(h)
		if err == nil {
			err = syscall.ENOTDIR
		}
		return nil, fmt.Errorf("open workspace root %s: %w", dir, err)
	}
	r := &Root{dir: dir, h: h}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// Dir returns the root's absolute path as given to Open (cleaned).
func (r *Root) Dir() string { return r.dir }

// UsesComponentWalk reports false: Windows has one resolver, the
// handle-relative walk, and never falls back from another.
func (r *Root) UsesComponentWalk() bool { return false }

// Close releases the root handle.
func (r *Root) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	if err := windows.CloseHandle(r.h); err != nil {
		return fmt.Errorf("close workspace root %s: %w", r.dir, err)
	}
	return nil
}

// mapErr names a refused reparse point ErrSymlink, keeping the cause.
func mapErr(err error) error {
	if errors.Is(err, winat.ErrReparsePoint) {
		return fmt.Errorf("%w: %w", ErrSymlink, err)
	}
	return err
}

// openDirPath opens the directory dir ("/"-separated, cleaned) beneath
// the root, one component at a time relative to the previous handle;
// with create, missing components are created relative to their parent.
// The caller closes the handle.
func (r *Root) openDirPath(dir string, create bool) (windows.Handle, error) {
	if r.closed.Load() {
		return windows.InvalidHandle, errors.New("workspace root is closed")
	}
	cur, err := winat.Dup(r.h)
	if err != nil {
		return windows.InvalidHandle, err
	}
	for _, c := range splitRel(dir) {
		next, err := openDirAt(cur, c, create)
		windows.CloseHandle(cur)
		if err != nil {
			return windows.InvalidHandle, mapErr(err)
		}
		cur = next
	}
	return cur, nil
}

// openDirAt opens the directory name relative to p, creating it (relative
// to p) when create is set and it is missing. The object is opened
// without FILE_DIRECTORY_FILE and judged by its handle's attributes, so
// a file in the way is syscall.ENOTDIR on every system (Wine reports a
// missing path for FILE_DIRECTORY_FILE on a file).
func openDirAt(p windows.Handle, name string, create bool) (windows.Handle, error) {
	h, info, err := winat.Open(p, name, dirAccess, windows.FILE_OPEN, 0, 0)
	if create && IsNotExist(err) {
		h, info, err = winat.Open(p, name, dirAccess, windows.FILE_CREATE, windows.FILE_DIRECTORY_FILE, 0)
		if errors.Is(err, syscall.EEXIST) { // created meanwhile
			h, info, err = winat.Open(p, name, dirAccess, windows.FILE_OPEN, 0, 0)
		}
	}
	if err != nil {
		return windows.InvalidHandle, err
	}
	if !winat.IsDir(info) {
		windows.CloseHandle(h)
		return windows.InvalidHandle, syscall.ENOTDIR
	}
	return h, nil
}

func splitRel(rel string) []string {
	var out []string
	for _, c := range strings.Split(rel, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// openFile opens the final component of clean relative to its parent
// directory handle, refusing a reparse point.
func (r *Root) openFile(clean string, access, disposition, options uint32) (windows.Handle, *winat.Info, error) {
	dir, name := path.Split(clean)
	p, err := r.openDirPath(path.Clean(dir), false)
	if err != nil {
		return windows.InvalidHandle, nil, err
	}
	defer windows.CloseHandle(p)
	h, info, err := winat.Open(p, name, access, disposition, options, 0)
	return h, info, mapErr(err)
}

// kindOfHandle names what h is, from its own metadata.
func kindOfHandle(h windows.Handle, info *winat.Info) Kind {
	switch {
	case winat.IsReparse(info):
		return KindSymlink
	case winat.IsDir(info):
		return KindDirectory
	}
	switch t, _ := windows.GetFileType(h); t {
	case windows.FILE_TYPE_DISK:
		return KindRegular
	case windows.FILE_TYPE_CHAR:
		return KindCharDevice
	case windows.FILE_TYPE_PIPE:
		return KindFIFO
	}
	return KindOther
}

// NewDirMode is the mode Mode reports for a directory, one fsroot creates
// as a missing parent (CreateParents) among them.
const NewDirMode fs.FileMode = 0o777

// modeOf is the permission bits Go reports on Windows: read-only files
// are 0444, others 0666, directories 0777.
func modeOf(info *winat.Info) fs.FileMode {
	switch {
	case winat.IsDir(info):
		return NewDirMode
	case info.FileAttributes&windows.FILE_ATTRIBUTE_READONLY != 0:
		return 0o444
	}
	return 0o666
}

// regularInfo refuses anything but a regular file, by the handle's own
// metadata.
func regularInfo(h windows.Handle, info *winat.Info, name string) error {
	if k := kindOfHandle(h, info); k != KindRegular {
		return &NotRegularError{Path: name, Kind: k.String()}
	}
	return nil
}

// ReadFile reads the regular file rel (workspace-relative) beneath the root.
// It fails with *TooLargeError when the file holds more than limit bytes
// (limit <= 0 means MaxFileBytes), and with *NotRegularError for anything
// but a regular file.
func (r *Root) ReadFile(rel string, limit int64) ([]byte, FileInfo, error) {
	clean, err := CleanRel(rel)
	if err != nil {
		return nil, FileInfo{}, err
	}
	h, info, err := r.openFile(clean, windows.FILE_GENERIC_READ, windows.FILE_OPEN, 0)
	if err != nil {
		return nil, FileInfo{}, fmt.Errorf("open %s: %w", clean, err)
	}
	defer windows.CloseHandle(h)
	return readHandle(h, info, clean, limit)
}

// readHandle checks that h is a regular file of at most limit bytes and
// reads it.
func readHandle(h windows.Handle, info *winat.Info, name string, limit int64) ([]byte, FileInfo, error) {
	if limit <= 0 {
		limit = MaxFileBytes
	}
	if err := regularInfo(h, info, name); err != nil {
		return nil, FileInfo{}, err
	}
	fi := FileInfo{
		Size:    winat.Size(info),
		Mode:    modeOf(info),
		ModTime: time.Unix(0, info.LastWriteTime.Nanoseconds()),
	}
	if fi.Size > limit {
		return nil, fi, &TooLargeError{Path: name, Limit: limit}
	}
	buf, err := readUpTo(h, name, limit, fi.Size)
	if err != nil {
		return nil, fi, err
	}
	if int64(len(buf)) > limit {
		return nil, fi, &TooLargeError{Path: name, Limit: limit}
	}
	fi.Size = int64(len(buf))
	return buf, fi, nil
}

// readUpTo reads at most limit+1 bytes of h, whatever its size said.
func readUpTo(h windows.Handle, name string, limit, size int64) ([]byte, error) {
	buf := make([]byte, 0, min(size, limit)+1)
	for int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := min(int64(cap(buf)), limit+1)
		n, err := winat.Read(h, buf[len(buf):end])
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
}

// ReadPrefix reads at most limit bytes of the regular file rel beneath the
// root, with the same no-follow resolution as ReadFile. truncated reports
// that the file holds more than limit bytes; limit <= 0 means
// MaxFileBytes.
func (r *Root) ReadPrefix(rel string, limit int64) (data []byte, truncated bool, err error) {
	clean, err := CleanRel(rel)
	if err != nil {
		return nil, false, err
	}
	if limit <= 0 {
		limit = MaxFileBytes
	}
	h, info, err := r.openFile(clean, windows.FILE_GENERIC_READ, windows.FILE_OPEN, 0)
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", clean, err)
	}
	defer windows.CloseHandle(h)
	if err := regularInfo(h, info, clean); err != nil {
		return nil, false, err
	}
	buf, err := readUpTo(h, clean, limit, winat.Size(info))
	if err != nil {
		return nil, false, err
	}
	if int64(len(buf)) > limit {
		return buf[:limit], true, nil
	}
	return buf, false, nil
}

// WriteFile atomically replaces (or creates) the regular file rel with
// data. The parent directory handle is held for the whole operation: a
// sibling temporary is created with FILE_CREATE relative to it, written
// and flushed; the target is re-read and compared with prior immediately
// before commit (*ChangedError on mismatch), and the temporary is renamed
// to a name relative to the same parent handle (without replacing when
// the target must be absent).
func (r *Root) WriteFile(rel string, data []byte, prior Prior, opts WriteOptions) error {
	clean, err := CleanRel(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return &PathError{Path: rel, Reason: "path names the workspace root, not a file"}
	}
	dir, name := path.Split(clean)
	p, err := r.openDirPath(path.Clean(dir), opts.CreateParents)
	if err != nil {
		return fmt.Errorf("open parent of %s: %w", clean, err)
	}
	defer windows.CloseHandle(p)
	return commitAt(p, name, clean, data, prior, opts.Mode&fs.ModePerm)
}

// testHookBeforeRename, when set by a test, runs between the comparison
// and the rename of a commit.
var testHookBeforeRename func()

// commitAt performs the temp-write, compare and rename under p.
func commitAt(p windows.Handle, name, display string, data []byte, prior Prior, perm fs.FileMode) error {
	mode, err := targetMode(p, name, display)
	if err != nil {
		return err
	}
	if perm != 0 {
		mode = perm
	}
	var attrs uint32
	if mode&0o200 == 0 {
		attrs = windows.FILE_ATTRIBUTE_READONLY
	}
	tmp, err := createTemp(p, name, attrs)
	if err != nil {
		return fmt.Errorf("create temporary for %s: %w", display, err)
	}
	committed := false
	defer func() {
		if !committed {
			winat.Delete(tmp)
		}
		windows.CloseHandle(tmp)
	}()
	if err := winat.WriteAll(tmp, data); err != nil {
		return fmt.Errorf("write temporary for %s: %w", display, err)
	}
	if err := windows.FlushFileBuffers(tmp); err != nil {
		return fmt.Errorf("flush temporary for %s: %w", display, err)
	}
	if err := compareAt(p, name, display, prior); err != nil {
		return err
	}
	if testHookBeforeRename != nil {
		testHookBeforeRename()
	}
	replace := prior.Any || prior.Exists
	if err := winat.Rename(tmp, p, name, replace); err != nil {
		if !replace && errors.Is(err, syscall.EEXIST) {
			return &ChangedError{Path: display}
		}
		return fmt.Errorf("rename into %s: %w", display, err)
	}
	committed = true
	return nil
}

// targetMode returns the permission bits of the existing target, or 0644
// when it does not exist; a reparse point or a non-regular target is an
// error.
func targetMode(p windows.Handle, name, display string) (fs.FileMode, error) {
	h, info, err := winat.OpenLink(p, name, windows.FILE_READ_ATTRIBUTES, windows.FILE_OPEN, 0, 0)
	switch {
	case IsNotExist(err):
		return 0o644, nil
	case err != nil:
		return 0, fmt.Errorf("stat %s: %w", display, mapErr(err))
	}
	defer windows.CloseHandle(h)
	if winat.IsReparse(info) {
		return 0, fmt.Errorf("%s: %w", display, ErrSymlink)
	}
	if err := regularInfo(h, info, display); err != nil {
		return 0, err
	}
	return modeOf(info), nil
}

// createTemp creates a sibling temporary of name relative to p, opened for
// writing and with DELETE access so its own handle can be renamed or
// deleted.
func createTemp(p windows.Handle, name string, attrs uint32) (windows.Handle, error) {
	var rnd [8]byte
	for range 16 {
		rand.Read(rnd[:])
		tmp := ".octet-tmp-" + hex.EncodeToString(rnd[:]) + "-" + truncName(name)
		h, _, err := winat.Open(p, tmp, windows.FILE_GENERIC_WRITE|windows.DELETE, windows.FILE_CREATE, windows.FILE_NON_DIRECTORY_FILE, attrs)
		if errors.Is(err, syscall.EEXIST) {
			continue
		}
		return h, err
	}
	return windows.InvalidHandle, errors.New("could not allocate a unique temporary name")
}

func truncName(name string) string {
	if len(name) > 64 {
		return name[:64]
	}
	return name
}

// compareAt re-reads the target through p and checks it against prior.
func compareAt(p windows.Handle, name, display string, prior Prior) error {
	if prior.Any {
		return nil
	}
	h, info, err := winat.Open(p, name, windows.FILE_GENERIC_READ, windows.FILE_OPEN, 0, 0)
	if IsNotExist(err) {
		if prior.Exists {
			return &ChangedError{Path: display}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("re-read %s before commit: %w", display, mapErr(err))
	}
	defer windows.CloseHandle(h)
	return compareHandle(h, info, display, prior)
}

// compareHandle checks the open target h against prior.
func compareHandle(h windows.Handle, info *winat.Info, display string, prior Prior) error {
	if !prior.Exists {
		return &ChangedError{Path: display}
	}
	data, _, err := readHandle(h, info, display, MaxFileBytes)
	if err != nil {
		var tl *TooLargeError
		if errors.As(err, &tl) {
			return &ChangedError{Path: display}
		}
		return fmt.Errorf("re-read %s before commit: %w", display, err)
	}
	if sha256.Sum256(data) != prior.SHA256 {
		return &ChangedError{Path: display}
	}
	return nil
}

// OpenDir opens the directory rel beneath the root with the same
// no-follow resolution. The caller closes the returned file; its Fd is a
// directory handle (FILE_LIST_DIRECTORY) for relative opens of names read
// from it.
func (r *Root) OpenDir(rel string) (*os.File, error) {
	clean, err := CleanRel(rel)
	if err != nil {
		return nil, err
	}
	h, err := r.openDirPath(clean, false)
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", clean, err)
	}
	return os.NewFile(uintptr(h), filepath.Join(r.dir, filepath.FromSlash(clean))), nil
}

// inspectHandle opens clean without following a final reparse point (a
// link in a parent component is ErrSymlink) and calls f with its handle.
func (r *Root) inspectHandle(clean string, f func(windows.Handle, *winat.Info)) error {
	dir, name := path.Split(clean)
	if clean == "." {
		dir, name = ".", "."
	}
	p, err := r.openDirPath(path.Clean(dir), false)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(p)
	h, info, err := winat.OpenLink(p, name, windows.FILE_READ_ATTRIBUTES, windows.FILE_OPEN, 0, 0)
	if err != nil {
		return mapErr(err)
	}
	defer windows.CloseHandle(h)
	f(h, info)
	return nil
}

// Inspect resolves rel beneath the root with the same no-follow resolver
// as every other operation and reports what the final component is and
// its hard-link count, without opening it for reading. A reparse point as
// the final component is KindSymlink with a nil error (the link itself);
// one in a parent component is an error wrapping ErrSymlink.
func (r *Root) Inspect(rel string) (Kind, uint64, error) {
	clean, err := CleanRel(rel)
	if err != nil {
		return KindOther, 0, err
	}
	kind, links := KindOther, uint64(0)
	err = r.inspectHandle(clean, func(h windows.Handle, info *winat.Info) {
		kind, links = kindOfHandle(h, info), uint64(info.NumberOfLinks)
	})
	if err != nil {
		return KindOther, 0, fmt.Errorf("inspect %s: %w", clean, err)
	}
	return kind, links, nil
}

// Mode returns the permission bits of rel beneath the root as Go reports
// them on Windows (0444 for a read-only file, else 0666), resolved like
// Inspect.
func (r *Root) Mode(rel string) (fs.FileMode, error) {
	clean, err := CleanRel(rel)
	if err != nil {
		return 0, err
	}
	var mode fs.FileMode
	err = r.inspectHandle(clean, func(_ windows.Handle, info *winat.Info) { mode = modeOf(info) })
	if err != nil {
		return 0, fmt.Errorf("inspect %s: %w", clean, err)
	}
	return mode, nil
}

// Remove removes the regular file rel beneath the root: the file is opened
// relative to its parent handle (never through a reparse point), compared
// with prior through that same handle (*ChangedError on mismatch; a prior
// of Absent makes an absent file a success) and deleted by handle.
func (r *Root) Remove(rel string, prior Prior) error {
	clean, err := CleanRel(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return &PathError{Path: rel, Reason: "path names the workspace root, not a file"}
	}
	dir, name := path.Split(clean)
	p, err := r.openDirPath(path.Clean(dir), false)
	if IsNotExist(err) && !prior.Exists {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open parent of %s: %w", clean, err)
	}
	defer windows.CloseHandle(p)
	if _, err := targetMode(p, name, clean); err != nil {
		return err
	}
	h, info, err := winat.Open(p, name, windows.FILE_GENERIC_READ|windows.DELETE, windows.FILE_OPEN, windows.FILE_NON_DIRECTORY_FILE, 0)
	if IsNotExist(err) {
		if prior.Exists {
			return &ChangedError{Path: clean}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", clean, mapErr(err))
	}
	defer windows.CloseHandle(h)
	if err := regularInfo(h, info, clean); err != nil {
		return err
	}
	if !prior.Any {
		if err := compareHandle(h, info, clean, prior); err != nil {
			return err
		}
	}
	if err := winat.Delete(h); err != nil {
		return fmt.Errorf("remove %s: %w", clean, err)
	}
	return nil
}

// Mkdir makes rel beneath the root a directory: missing parents and rel
// itself are created relative to their parent handle (FILE_OPEN_IF with
// FILE_DIRECTORY_FILE, never through a reparse point); an existing
// directory is kept. mode has no effect on Windows, where a new directory
// inherits its parent's ACL.
func (r *Root) Mkdir(rel string, mode fs.FileMode) error {
	clean, err := CleanRel(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return &PathError{Path: rel, Reason: "path names the workspace root"}
	}
	h, err := r.openDirPath(clean, true)
	if err != nil {
		return fmt.Errorf("create directory %s: %w", clean, err)
	}
	return windows.CloseHandle(h)
}

// RemoveDir removes the empty directory rel beneath the root, opened
// relative to its parent handle and deleted by handle. An absent rel is a
// success; a directory that is not empty, or anything that is not a
// directory (a junction included), is left in place and reported.
func (r *Root) RemoveDir(rel string) error {
	clean, err := CleanRel(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return &PathError{Path: rel, Reason: "path names the workspace root"}
	}
	dir, name := path.Split(clean)
	p, err := r.openDirPath(path.Clean(dir), false)
	if IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open parent of %s: %w", clean, err)
	}
	defer windows.CloseHandle(p)
	h, info, err := winat.OpenLink(p, name, windows.FILE_LIST_DIRECTORY|windows.DELETE, windows.FILE_OPEN, 0, 0)
	if IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect %s: %w", clean, err)
	}
	defer windows.CloseHandle(h)
	if k := kindOfHandle(h, info); k != KindDirectory {
		return fmt.Errorf("%s is a %s, not a directory: left in place", clean, k)
	}
	if err := winat.Delete(h); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) {
			return fmt.Errorf("directory %s is not empty (it holds entries octet did not create): %w", clean, err)
		}
		return fmt.Errorf("remove directory %s: %w", clean, err)
	}
	return nil
}

// ReadHostPrefix reads at most limit bytes of the regular file at path,
// an absolute path the user controls (their own configuration, never a
// workspace file). Links are followed; anything but a regular file is a
// *NotRegularError.
func ReadHostPrefix(path string, limit int64) (data []byte, truncated bool, err error) {
	if limit <= 0 {
		limit = MaxFileBytes
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, false, &NotRegularError{Path: path, Kind: "special file"}
	}
	buf, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(buf)) > limit {
		return buf[:limit], true, nil
	}
	return buf, false, nil
}

// IsNotExist reports whether err means the path does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
