//go:build unix

package fsroot

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFLNK:
		return "symbolic link"
	}
	return "special file"
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
	fd, err := r.open(clean, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, FileInfo{}, fmt.Errorf("open %s: %w", clean, err)
	}
	defer unix.Close(fd)
	return readFD(fd, clean, limit)
}

// readFD checks that fd is a regular file of at most limit bytes and
// reads it.
func readFD(fd int, name string, limit int64) ([]byte, FileInfo, error) {
	if limit <= 0 {
		limit = MaxFileBytes
	}
	st, err := regularStat(fd, name)
	if err != nil {
		return nil, FileInfo{}, err
	}
	info := FileInfo{
		Size:    st.Size,
		Mode:    fs.FileMode(uint32(st.Mode)) & ModeBits,
		ModTime: modTime(&st),
	}
	if st.Size > limit {
		return nil, info, &TooLargeError{Path: name, Limit: limit}
	}
	buf, err := readUpTo(fd, name, limit, st.Size)
	if err != nil {
		return nil, info, err
	}
	if int64(len(buf)) > limit {
		return nil, info, &TooLargeError{Path: name, Limit: limit}
	}
	info.Size = int64(len(buf))
	return buf, info, nil
}

// regularStat returns fd's metadata, or a *NotRegularError for anything
// but a regular file (decided by the descriptor, so opening never blocked).
func regularStat(fd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return st, fmt.Errorf("stat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return st, &NotRegularError{Path: name, Kind: kindOf(uint32(st.Mode))}
	}
	return st, nil
}

// readUpTo reads at most limit+1 bytes of the regular file fd, whatever
// its size said (size only sizes the first buffer: files can grow), so a
// result longer than limit means the file is.
func readUpTo(fd int, name string, limit, size int64) ([]byte, error) {
	// Regular files never block; O_NONBLOCK only guarded the open.
	buf := make([]byte, 0, min(size, limit)+1)
	for int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := min(int64(cap(buf)), limit+1)
		n, err := sysRead(fd, buf[len(buf):end])
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
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

// WriteFile atomically replaces (or creates) the regular file rel with
// data. The parent directory descriptor is held for the whole operation: a
// sibling temporary is created with O_EXCL (0600, then chmod to the target's
// mode or 0644), written and fsynced; the target is re-read and compared
// with prior immediately before commit (*ChangedError on mismatch), renamed
// relative to the same descriptor, and the directory is fsynced.
func (r *Root) WriteFile(rel string, data []byte, prior Prior, opts WriteOptions) error {
	clean, err := CleanRel(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return &PathError{Path: rel, Reason: "path names the workspace root, not a file"}
	}
	dir, name := path.Split(clean)
	dir = path.Clean(dir)
	pfd, err := r.openParent(dir, opts.CreateParents)
	if err != nil {
		return fmt.Errorf("open parent of %s: %w", clean, r.explainNotDir(dir, err))
	}
	defer unix.Close(pfd)
	return commitAt(pfd, name, clean, data, prior, uint32(opts.Mode&ModeBits))
}

// openParent opens dir (cleaned) as a directory, creating missing
// components with mkdirat when create is set.
func (r *Root) openParent(dir string, create bool) (int, error) {
	fd, err := r.open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == nil || !create || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	return r.mkdirWalk(dir)
}

// mkdirWalk walks dir component by component with O_NOFOLLOW, creating
// each missing directory relative to its parent descriptor.
func (r *Root) mkdirWalk(dir string) (int, error) {
	cur, err := unix.Dup(r.fd)
	if err != nil {
		return -1, err
	}
	for _, c := range splitRel(dir) {
		next, err := openat(cur, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			next, err = makeDir(cur, c)
		}
		unix.Close(cur)
		if err != nil {
			return -1, mapErr(err)
		}
		cur = next
	}
	return cur, nil
}

// makeDir creates directory name in pfd and opens it. A directory this
// call creates gets exactly NewDirMode, as a new file gets exactly 0644
// (Mkdirat's mode is filtered by the umask; a set-group-ID bit inherited
// from its parent is kept), so the change octet records for it is the
// state it has; its parent is fsynced so the entry survives a crash. A
// directory someone else created meanwhile is opened as it is.
func makeDir(pfd int, name string) (int, error) {
	mkErr := unix.Mkdirat(pfd, name, uint32(NewDirMode))
	if mkErr != nil && !errors.Is(mkErr, unix.EEXIST) {
		return -1, fmt.Errorf("create directory %s: %w", name, mkErr)
	}
	fd, err := openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil || mkErr != nil {
		return fd, err
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	if err == nil && uint32(st.Mode)&0o777 != uint32(NewDirMode) {
		err = unix.Fchmod(fd, uint32(st.Mode)&0o7000|uint32(NewDirMode))
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("set the mode of directory %s: %w", name, err)
	}
	if err := sysFsync(pfd); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("fsync the directory holding %s: %w", name, err)
	}
	return fd, nil
}

func splitRel(rel string) []string {
	var out []string
	for _, c := range bytes.Split([]byte(rel), []byte("/")) {
		if len(c) == 0 || string(c) == "." {
			continue
		}
		out = append(out, string(c))
	}
	return out
}

// commitAt performs the temp-write, compare and rename under pfd.
func commitAt(pfd int, name, display string, data []byte, prior Prior, perm uint32) (err error) {
	mode, owner, err := targetMode(pfd, name, display)
	if err != nil {
		return err
	}
	if perm != 0 {
		mode = perm
	}
	tmp, tfd, err := createTemp(pfd, name)
	if err != nil {
		return fmt.Errorf("create temporary for %s: %w", display, err)
	}
	committed := false
	defer func() {
		if tfd >= 0 {
			unix.Close(tfd)
		}
		if !committed {
			unix.Unlinkat(pfd, tmp, 0)
		}
	}()
	if err := writeAll(tfd, data); err != nil {
		return fmt.Errorf("write temporary for %s: %w", display, err)
	}
	if owner != nil && (int(owner.Uid) != unix.Geteuid() || int(owner.Gid) != unix.Getegid()) {
		// Keep the replaced file's owner where permitted (best effort).
		unix.Fchown(tfd, int(owner.Uid), int(owner.Gid))
	}
	if err := unix.Fchmod(tfd, mode); err != nil {
		return fmt.Errorf("chmod temporary for %s: %w", display, err)
	}
	if err := sysFsync(tfd); err != nil {
		return fmt.Errorf("fsync temporary for %s: %w", display, err)
	}
	unix.Close(tfd)
	tfd = -1
	if err := compareAt(pfd, name, display, prior); err != nil {
		return err
	}
	if err := renameAt(pfd, tmp, name, display, prior); err != nil {
		return err
	}
	committed = true
	if err := sysFsync(pfd); err != nil {
		return fmt.Errorf("fsync directory of %s: %w", display, err)
	}
	return nil
}

// targetMode returns the permission bits (and metadata) of the existing
// target, or 0644 and nil when it does not exist.
func targetMode(pfd int, name, display string) (uint32, *unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return 0o644, nil, nil
	case err != nil:
		return 0, nil, fmt.Errorf("stat %s: %w", display, err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return 0, nil, fmt.Errorf("%s: %w", display, ErrSymlink)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return 0, nil, &NotRegularError{Path: display, Kind: kindOf(uint32(st.Mode))}
	}
	return uint32(st.Mode) & 0o7777, &st, nil
}

func createTemp(pfd int, name string) (string, int, error) {
	var rnd [8]byte
	for range 16 {
		rand.Read(rnd[:])
		tmp := ".octet-tmp-" + hex.EncodeToString(rnd[:]) + "-" + truncName(name)
		fd, err := openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		return tmp, fd, err
	}
	return "", -1, errors.New("could not allocate a unique temporary name")
}

func truncName(name string) string {
	if len(name) > 64 {
		return name[:64]
	}
	return name
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := sysWrite(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// compareAt re-reads the target through pfd and checks it against prior.
func compareAt(pfd int, name, display string, prior Prior) error {
	if prior.Any {
		return nil
	}
	fd, err := openat(pfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		if prior.Exists {
			return &ChangedError{Path: display}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("re-read %s before commit: %w", display, mapErr(err))
	}
	defer unix.Close(fd)
	if !prior.Exists {
		return &ChangedError{Path: display}
	}
	data, _, err := readFD(fd, display, MaxFileBytes)
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

// renameAt commits tmp over name. A target expected absent is committed
// with RENAME_NOREPLACE so a file created after the comparison is not
// clobbered.
func renameAt(pfd int, tmp, name, display string, prior Prior) error {
	if !prior.Any && !prior.Exists {
		err := renameNoReplace(pfd, tmp, name)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EEXIST):
			return &ChangedError{Path: display}
		case !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS):
			return fmt.Errorf("rename into %s: %w", display, err)
		}
	}
	if err := unix.Renameat(pfd, tmp, pfd, name); err != nil {
		return fmt.Errorf("rename into %s: %w", display, err)
	}
	return nil
}

// OpenDir opens the directory rel beneath the root with the same
// no-follow resolution. The caller closes the returned file; its Fd can be
// used with openat for single-component names read from it.
func (r *Root) OpenDir(rel string) (*os.File, error) {
	clean, err := CleanRel(rel)
	if err != nil {
		return nil, err
	}
	fd, err := r.open(clean, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", clean, r.explainNotDir(clean, err))
	}
	return os.NewFile(uintptr(fd), path.Join(r.dir, clean)), nil
}

// IsNotExist reports whether err means the path does not exist.
func IsNotExist(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, fs.ErrNotExist)
}
