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
)

// BenchmarkFirstSnapshotFloor measures what no first snapshot of a
// process can go below on this machine, beside git status of the same
// tree in the same iteration: "stat", every entry listed and lstat'ed
// (git status's own work), and "mark", the same with an inotify watch
// added per file first (what lets the change feed see a write through
// a hard link made outside the workspace) — both on two threads, the
// watches on two instances, with no tree built, nothing compared and no
// allocation kept. "floor" adds a bash call made once the snapshot is
// taken ("warm", the rest of a first call): the least a first call made
// at once can cost with the watches set up before its command. "twice"
// is the other way, the watches set up after the call: the command's
// snapshot before, then every file stat'ed again after it (nothing
// else can vouch for a file with no watch yet), then the call — two
// stat passes and the call. The target for a first call is 1.2× git
// status.
func BenchmarkFirstSnapshotFloor(b *testing.B) {
	for _, tr := range []ckptTree{tree10k, tree100k} {
		b.Run(tr.name, func(b *testing.B) {
			ws := cachedTree(b, tr)
			dirs := benchDirs(b, ws)
			git := commandTimer(b, ws, "git", "status", "--porcelain")
			s := series{}
			for b.Loop() {
				s["git"] = append(s["git"], git())
				stat := listAndStat(b, dirs, false)
				s["stat"] = append(s["stat"], stat)
				s["mark"] = append(s["mark"], listAndStat(b, dirs, true))
				s["twice"] = append(s["twice"], stat+listAndStat(b, dirs, false))
			}
			// The calls come after: the tool's feed holds a watch per file,
			// and two sets of 100,000 would pass the default limit
			// (fs.inotify.max_user_watches).
			bt := benchBash(b, ws, b.TempDir())
			defer bt.Close()
			<-bt.snaps.warmDone
			warm := callTimer(b, bt, "true")
			for i := range s["git"] {
				w := warm()
				s["warm"] = append(s["warm"], w)
				s["floor"] = append(s["floor"], s["mark"][i]+w)
				s["twice"][i] += w
			}
			s.report(b, [2]string{"stat", "git"}, [2]string{"mark", "git"}, [2]string{"floor", "git"}, [2]string{"twice", "git"})
		})
	}
}

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
// returns how long it took; with mark, each thread first adds a watch
// per file on an inotify instance of its own, from inside the
// directory (as the feed does), and the instances are closed after the
// time is taken.
func listAndStat(b *testing.B, dirs []string, mark bool) time.Duration {
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
			runtime.LockOSThread() // the thread's working directory is its own: never unlocked
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				b.Error(err)
				return
			}
			if mark {
				in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
				if err != nil {
					b.Error(err)
					return
				}
				insts[i] = in
			}
			for d := range jobs {
				if err := statDir(d, insts[i]); err != nil {
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

// statDir lists dir and lstats each name in it, adding a watch per name
// to instance in first when in ≥ 0.
func statDir(dir string, in int) error {
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
	if in >= 0 {
		if err := unix.Fchdir(fd); err != nil {
			return err
		}
	}
	var st unix.Stat_t
	for _, n := range names {
		if in >= 0 {
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
