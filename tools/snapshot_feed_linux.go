//go:build linux

package tools

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A feed is the change feed of a snapshotter's tree: inotify instances
// watching every checkpointed directory (for names created, removed or
// renamed in it, and its own mode) and every checkpointed file (for its
// content and metadata, whichever path it is written through: a hard
// link outside the workspace included). The kernel queues an event
// inside the system call that makes the change, so every change
// completed before drain is in what drain returns — or drain reports the
// feed lost (a queue overflowed, a file system was unmounted, the mount
// table changed), and the caller walks the tree.
//
// The watches are spread over feedInstances instances, each walk worker
// adding to its own: an instance adds one watch at a time (its marks'
// lock), so 10,000 watches took as long from four workers as from one.
// A watch descriptor names its instance (feedWD).
//
// A goroutine per instance reads its queue as events arrive, into a
// bounded set of (watch, name) pairs, so a command that changes many
// files does not overflow the kernel's queue (16,384 events by default).
type feed struct {
	insts  []feedInstance
	mounts []byte // /proc/self/mountinfo as last read

	// maxWatches, when positive, is a watch limit below the kernel's
	// (tests): past it a watch fails as the kernel's limit does.
	maxWatches int
	watches    atomic.Int64 // added by the walk's goroutines

	mu      sync.Mutex
	pending map[int32]map[string]struct{} // "" = the watched object itself
	npend   int
	lost    string // why the feed can no longer vouch for the tree ("": it can)
	closed  bool
}

// feedInstance is one inotify instance of a feed.
type feedInstance struct {
	file *os.File
	fd   int
	done chan struct{} // closed when its reader has stopped
}

// feedInstances is how many inotify instances a feed spreads its watches
// over.
const feedInstances = 2

// feedWD is the feed's name of watch wd of instance i, and instanceOf
// its inverse.
func feedWD(wd, i int) int32 { return int32(wd*feedInstances + i) }

func instanceOf(wd int32) (inst int, kernelWD int) {
	return int(wd % feedInstances), int(wd / feedInstances)
}

// Watch masks. A directory's watch reports names created, removed and
// renamed in it, the content and attributes of the files in it changed
// through it (through a path in the directory, however opened: not
// through a hard link elsewhere), the directory's own attributes, and the
// directory itself going away; a file's reports its content and metadata
// changing through any of its names (a link made or removed elsewhere
// changes its link count: IN_ATTRIB) and its last close after a write
// (a shared mapping's writes have no event of their own).
const (
	feedDirMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_MODIFY | unix.IN_CLOSE_WRITE |
		unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	feedFileMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE |
		unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW
)

// errWatchLimit reports that a watch could not be added for want of
// watches (the per-user limit, fs.inotify.max_user_watches).
var errWatchLimit = errors.New("the inotify watch limit is reached (fs.inotify.max_user_watches)")

// newFeed starts an empty feed. An error means there is none: the
// caller walks the tree on every snapshot.
func newFeed(maxWatches int) (*feed, error) {
	if feeds.Add(1) > maxFeeds {
		feeds.Add(-1)
		return nil, fmt.Errorf("change feed: this process already watches %d workspaces", maxFeeds)
	}
	mounts, err := readMounts()
	if err != nil {
		feeds.Add(-1)
		return nil, fmt.Errorf("change feed: %w", err)
	}
	f := &feed{mounts: mounts, maxWatches: maxWatches, pending: map[int32]map[string]struct{}{}}
	for range feedInstances {
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			for _, in := range f.insts {
				in.file.Close()
			}
			feeds.Add(-1)
			return nil, fmt.Errorf("change feed: inotify: %w", err)
		}
		f.insts = append(f.insts, feedInstance{file: os.NewFile(uintptr(fd), "inotify"), fd: fd, done: make(chan struct{})})
	}
	for i := range f.insts {
		if feedReads {
			go f.read(i)
		} else {
			close(f.insts[i].done)
		}
	}
	return f, nil
}

// read takes instance i's events off its queue as they arrive, until the
// feed closes.
func (f *feed) read(i int) {
	in := &f.insts[i]
	defer close(in.done)
	rc, err := in.file.SyscallConn()
	if err != nil {
		f.mu.Lock()
		f.lost = "the change feed cannot be read: " + err.Error()
		f.mu.Unlock()
		return
	}
	buf := make([]byte, 64<<10)
	_ = rc.Read(func(fd uintptr) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.closed {
			return true
		}
		f.readLocked(i, buf)
		return false // wait for more
	})
}

// readAllLocked reads what every instance has queued now into pending.
// The caller holds mu.
func (f *feed) readAllLocked() {
	buf := make([]byte, 64<<10)
	for i := range f.insts {
		f.readLocked(i, buf)
	}
}

// readLocked reads what instance i has queued now into pending. The
// caller holds mu.
func (f *feed) readLocked(i int, buf []byte) {
	for {
		n, err := unix.Read(f.insts[i].fd, buf)
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			if err != nil && err != unix.EAGAIN {
				f.loseLocked("reading the change feed failed: " + err.Error())
			}
			return
		}
		f.parseLocked(i, buf[:n])
	}
}

// parseLocked adds the events of instance i in b to pending.
func (f *feed) parseLocked(i int, b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			f.loseLocked("the change feed returned a truncated event")
			return
		}
		name := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:end], "\x00"))
		b = b[end:]
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			f.loseLocked("the kernel's event queue overflowed")
			continue
		case ev.Mask&unix.IN_UNMOUNT != 0:
			f.loseLocked("a watched file system was unmounted")
			continue
		}
		f.addLocked(feedWD(int(ev.Wd), i), name)
	}
}

// addLocked records that name in watch wd ("" for the watched object)
// changed.
func (f *feed) addLocked(wd int32, name string) {
	if f.lost != "" {
		return
	}
	names := f.pending[wd]
	if names == nil {
		names = map[string]struct{}{}
		f.pending[wd] = names
	}
	if _, ok := names[name]; ok {
		return
	}
	if f.npend >= feedMaxPending {
		f.loseLocked(fmt.Sprintf("more than %d names changed between two snapshots", feedMaxPending))
		return
	}
	names[name] = struct{}{}
	f.npend++
}

// loseLocked marks the feed lost and drops what it held.
func (f *feed) loseLocked(why string) {
	if f.lost == "" {
		f.lost = why
	}
	clear(f.pending)
	f.npend = 0
}

// drain returns the (watch, name) pairs changed since the last drain, or
// why the feed is lost. Everything queued before the call is included.
func (f *feed) drain() (map[int32]map[string]struct{}, string) {
	if f.mountsChanged() {
		f.mu.Lock()
		f.loseLocked("the mount table changed")
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readAllLocked()
	if f.lost != "" {
		return nil, f.lost
	}
	out := f.pending
	f.pending = map[int32]map[string]struct{}{}
	f.npend = 0
	return out, ""
}

// reset forgets what the feed queued and why it was lost (a walk of the
// whole tree is about to look at everything); what happens from now on
// is reported as before.
func (f *feed) reset() {
	f.mountsChanged()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readAllLocked()
	clear(f.pending)
	f.npend, f.lost = 0, ""
}

// mountsChanged reports whether the mount table changed since it was
// last asked: a file system mounted over a workspace directory changes
// what its paths name without an event. The table is read and compared
// (a few kilobytes; polling it for POLLPRI, as the kernel offers, missed
// mounts in testing).
func (f *feed) mountsChanged() bool {
	now, err := readMounts()
	if err != nil {
		return true
	}
	changed := !bytes.Equal(now, f.mounts)
	f.mounts = now
	return changed
}

// readMounts reads this process's mount table.
func readMounts() ([]byte, error) {
	return os.ReadFile("/proc/self/mountinfo")
}

// watchDir watches the directory open as dirfd (the very directory: by
// its descriptor, not a path that could have been swapped since), in t's
// instance.
func (f *feed) watchDir(t *watchThread, dirfd int) (int32, error) {
	return f.add(t.instance(), "/proc/self/fd/"+strconv.Itoa(dirfd), feedDirMask)
}

// watchFile watches name in the directory open as dirfd, not following
// a symbolic link, in t's instance: by its name in the working directory
// when t has entered dirfd, else through /proc/self/fd.
func (f *feed) watchFile(t *watchThread, dirfd int, name string) (int32, error) {
	if t != nil && t.in == dirfd {
		return f.add(t.instance(), name, feedFileMask)
	}
	return f.add(t.instance(), "/proc/self/fd/"+strconv.Itoa(dirfd)+"/"+name, feedFileMask)
}

// A watchThread is a walk worker's OS thread with a working directory of
// its own (CLONE_FS unshared), so a file's watch is added by its name in
// the directory entered: half the cost of a lookup through
// /proc/self/fd/N/name. The thread is locked to its goroutine for good
// and ends with it.
type watchThread struct {
	private bool
	in      int // the directory entered (-1: none)
	inst    int // the feed instance its watches go to
}

// newWatchThread makes the calling goroutine's thread walk worker
// worker's watchThread; call it only from a goroutine that ends when done
// with it.
func newWatchThread(worker int) *watchThread {
	runtime.LockOSThread() // kept, so the thread exits with the goroutine (but the main thread's, below)
	if unix.Gettid() == unix.Getpid() {
		// The main thread never exits (the runtime parks it for good
		// instead) and its directory is the one the system shows as the
		// process's (/proc/PID/cwd): it keeps the process's directory.
		runtime.UnlockOSThread()
		return instanceThread(worker)
	}
	return &watchThread{private: unix.Unshare(unix.CLONE_FS) == nil, in: -1, inst: worker % feedInstances}
}

// instanceThread is a walk worker's watchThread that keeps the thread it
// runs on (no working directory of its own): its watches go to the
// worker's instance, by /proc/self/fd paths.
func instanceThread(worker int) *watchThread {
	return &watchThread{in: -1, inst: worker % feedInstances}
}

// instance is the feed instance t's watches go to (the first without a
// thread).
func (t *watchThread) instance() int {
	if t == nil {
		return 0
	}
	return t.inst
}

// enter makes dirfd t's working directory (when t has its own).
func (t *watchThread) enter(dirfd int) {
	if t == nil {
		return
	}
	t.in = -1
	if t.private && unix.Fchdir(dirfd) == nil {
		t.in = dirfd
	}
}

// leave forgets the directory entered (its descriptor is about to be
// closed, and its number reused).
func (t *watchThread) leave() {
	if t != nil {
		t.in = -1
	}
}

func (f *feed) add(inst int, path string, mask uint32) (int32, error) {
	if f.maxWatches > 0 && f.watches.Add(1) > int64(f.maxWatches) {
		f.watches.Add(-1)
		return -1, errWatchLimit
	}
	wd, err := unix.InotifyAddWatch(f.insts[inst].fd, path, mask)
	if err == nil && wd > (math.MaxInt32-feedInstances)/feedInstances {
		// Past what feedWD can name (after some hundred million
		// watches): as if it could not be added.
		_, _ = unix.InotifyRmWatch(f.insts[inst].fd, uint32(wd))
		err = unix.ENOSPC
	}
	if err != nil && f.maxWatches > 0 {
		f.watches.Add(-1)
	}
	if err == unix.ENOSPC {
		return -1, errWatchLimit
	}
	if err != nil {
		return -1, err
	}
	return feedWD(wd, inst), nil
}

// unwatch removes watch wd (gone already is fine).
func (f *feed) unwatch(wd int32) {
	inst, kwd := instanceOf(wd)
	if _, err := unix.InotifyRmWatch(f.insts[inst].fd, uint32(kwd)); err == nil && f.maxWatches > 0 {
		f.watches.Add(-1)
	}
}

// close stops the feed and releases its watches.
func (f *feed) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	for _, in := range f.insts {
		in.file.Close() // wakes its reader
		<-in.done
	}
	feeds.Add(-1)
}

// feedFilesystems are the file systems whose changes inotify reports
// whoever makes them (local ones): on others (NFS, FUSE, 9p, …) another
// machine or process can change a file unseen, so a tree on them is
// walked.
var feedFilesystems = map[int64]string{
	0xEF53:     "ext4",
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0x01021994: "tmpfs",
	0xF2F52010: "f2fs",
	0x2FC12FC1: "zfs",
	0x794C7630: "overlayfs",
	0xCA451A4E: "bcachefs",
	0x858458F6: "ramfs",
}

// feedFilesystem reports whether the file system of the directory open as
// dirfd is one a feed can vouch for, and names it otherwise.
func feedFilesystem(dirfd int) (bool, string) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(dirfd, &st); err != nil {
		return false, "unknown (" + err.Error() + ")"
	}
	if _, ok := feedFilesystems[int64(st.Type)]; ok {
		return true, ""
	}
	return false, fmt.Sprintf("0x%x", st.Type)
}
