package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/octet-agent/octet/internal/benchtree"
)

// BenchmarkFirstSnapshotFloor measures what no first snapshot of a
// process can go below on this machine, beside git status of the same
// tree in the same iteration: "stat", every entry listed and lstat'ed
// (git status's own work); "dirs", the same with an inotify watch added
// per directory first (what a walk sets up: the marker adds the files'
// watches after it); "mark", the same with a watch added per file first
// (what a walk set up before there was a marker) — each on two threads,
// the watches on two instances, with no tree built, nothing compared and
// no allocation kept. "floor" adds to dirs a bash call made once the
// snapshot is taken ("warm", the rest of a first call): the least a
// first call made at once can cost. The target for a first call is 1.2×
// git status.
func BenchmarkFirstSnapshotFloor(b *testing.B) {
	for _, tr := range []benchtree.Tree{tree10k, tree100k} {
		b.Run(tr.Name, func(b *testing.B) {
			ws := cachedTree(b, tr)
			dirs := benchDirs(b, ws)
			git := commandTimer(b, ws, "git", "status", "--porcelain")
			s := series{}
			for b.Loop() {
				s["git"] = append(s["git"], git())
				s["stat"] = append(s["stat"], listAndStat(b, dirs, watchNone))
				s["dirs"] = append(s["dirs"], listAndStat(b, dirs, watchDirs))
				s["mark"] = append(s["mark"], listAndStat(b, dirs, watchFiles))
			}
			// The calls come after: the tool's feed holds a watch per file
			// once marked, and two sets of 100,000 would pass the default
			// limit (fs.inotify.max_user_watches).
			bt := benchBash(b, ws, b.TempDir())
			defer bt.Close()
			<-bt.snaps.warmDone
			waitMarked(bt.snaps)
			warm := callTimer(b, bt, "true")
			for i := range s["git"] {
				w := warm()
				s["warm"] = append(s["warm"], w)
				s["floor"] = append(s["floor"], s["dirs"][i]+w)
			}
			s.report(b, [2]string{"stat", "git"}, [2]string{"dirs", "git"}, [2]string{"mark", "git"}, [2]string{"floor", "git"})
		})
	}
}

// What listAndStat watches.
const (
	watchNone = iota
	watchDirs
	watchFiles
)

// benchDirs returns the directories of the bench tree ws (one level).
func benchDirs(b *testing.B, ws string) []string {
	ents, err := os.ReadDir(ws)
	if err != nil {
		b.Fatal(err)
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() && e.Name() != ".git" {
			dirs = append(dirs, filepath.Join(ws, e.Name()))
		}
	}
	return dirs
}

// listAndStat lists and lstats every entry of dirs on two threads and
// returns how long it took; with watchDirs, each thread first adds a
// watch per directory, with watchFiles a watch per file (from inside the
// directory, as a walk adding them did), each on an inotify instance of
// its own, closed after the time is taken.
func listAndStat(b *testing.B, dirs []string, watch int) time.Duration {
	jobs := make(chan string, len(dirs))
	for _, d := range dirs {
		jobs <- d
	}
	close(jobs)
	var insts [2]int
	var wg sync.WaitGroup
	start := time.Now()
	for i := range insts {
		insts[i] = -1
		wg.Go(func() {
			if watch == watchFiles {
				runtime.LockOSThread() // the thread's working directory is its own: never unlocked
				if err := unix.Unshare(unix.CLONE_FS); err != nil {
					b.Error(err)
					return
				}
			}
			if watch != watchNone {
				in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
				if err != nil {
					b.Error(err)
					return
				}
				insts[i] = in
			}
			for d := range jobs {
				if err := statDir(d, insts[i], watch); err != nil {
					b.Error(err)
					for range jobs { // drain: one error is enough
					}
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	for _, in := range insts {
		if in >= 0 {
			unix.Close(in)
		}
	}
	return took
}

// statDir lists dir and lstats each name in it, first adding a watch to
// instance in for the directory (watchDirs) or for each name
// (watchFiles).
func statDir(dir string, in, watch int) error {
	if watch == watchDirs {
		if _, err := unix.InotifyAddWatch(in, dir, feedDirMask); err != nil {
			return fmt.Errorf("watch %s: %w", dir, err)
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	fd := int(f.Fd())
	if watch == watchFiles {
		if err := unix.Fchdir(fd); err != nil {
			return err
		}
	}
	var st unix.Stat_t
	for _, n := range names {
		if watch == watchFiles {
			if _, err := unix.InotifyAddWatch(in, n, feedFileMask); err != nil {
				return fmt.Errorf("watch %s: %w", filepath.Join(dir, n), err)
			}
		}
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("lstat %s: %w", filepath.Join(dir, n), err)
		}
	}
	return nil
}
