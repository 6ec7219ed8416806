//go:build linux

package fsroot

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// These tests inject through the system-call seams (sys_unix.go) the
// failures and races that cannot be produced from outside: each guards
// one rule of the commit protocol, and fails when that rule is removed
// (internal/mutants/mutants.txt names the mutants).

// seam replaces *v with f for the rest of the test.
func seam[T any](t *testing.T, v *T, f T) {
	t.Helper()
	old := *v
	*v = f
	t.Cleanup(func() { *v = old })
}

// fdKind reports whether fd is a directory or a regular file.
func fdKind(fd int) string {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return "?"
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return "dir"
	}
	return "file"
}

// fsyncLog records the kind of every descriptor fsynced; fail, when set,
// makes fsync of that kind fail with EIO.
func fsyncLog(t *testing.T, fail string) *[]string {
	var log []string
	seam(t, &sysFsync, func(fd int) error {
		k := fdKind(fd)
		log = append(log, k)
		if k == fail {
			return unix.EIO
		}
		return unix.Fsync(fd)
	})
	return &log
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadSeesGrowthAfterStat: a file that grows between fstat and read is
// read up to limit+1 bytes whatever fstat said, so growth past the limit is
// an error (ReadFile) or a truncation (ReadPrefix), never a silent cut.
func TestReadSeesGrowthAfterStat(t *testing.T) {
	ws, _ := layout(t)
	r, err := Open(ws)
	must(t, err)
	defer r.Close()
	p := filepath.Join(ws, "grow")
	grow := func(data string) {
		grown := false
		seam(t, &sysRead, func(fd int, b []byte) (int, error) {
			if !grown {
				grown = true
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
				must(t, err)
				_, err = f.WriteString(data)
				must(t, errors.Join(err, f.Close()))
			}
			return unix.Read(fd, b)
		})
	}

	must(t, os.WriteFile(p, []byte("0123456789"), 0o644))
	grow("abcdef")
	var tl *TooLargeError
	if got, _, err := r.ReadFile("grow", 10); !errors.As(err, &tl) {
		t.Errorf("ReadFile of a file grown past the limit after fstat = %q, %v; want *TooLargeError", got, err)
	}

	must(t, os.WriteFile(p, []byte("0123"), 0o644))
	grow("4567")
	if got, info, err := r.ReadFile("grow", 10); err != nil || string(got) != "01234567" || info.Size != 8 {
		t.Errorf("ReadFile of a file grown within the limit = %q (size %d), %v; want all 8 bytes", got, info.Size, err)
	}

	must(t, os.WriteFile(p, []byte("0123456789"), 0o644))
	grow("abcdef")
	if got, trunc, err := r.ReadPrefix("grow", 10); err != nil || !trunc || string(got) != "0123456789" {
		t.Errorf("ReadPrefix of a grown file = %q, truncated %v, %v; want 10 bytes, truncated", got, trunc, err)
	}
}

// TestReadInterruptedAndFailing: EINTR and EAGAIN are retried; any other
// read error is reported, never taken for the end of the file.
func TestReadInterruptedAndFailing(t *testing.T) {
	ws, _ := layout(t)
	r, err := Open(ws)
	must(t, err)
	defer r.Close()
	for _, errno := range []unix.Errno{unix.EINTR, unix.EAGAIN} {
		n := 0
		seam(t, &sysRead, func(fd int, b []byte) (int, error) {
			if n++; n == 1 {
				return -1, errno
			}
			return unix.Read(fd, b)
		})
		if got, _, err := r.ReadFile("file.txt", 0); err != nil || string(got) != "inside\n" {
			t.Errorf("read after %v = %q, %v", errno, got, err)
		}
	}
	seam(t, &sysRead, func(int, []byte) (int, error) { return -1, unix.EIO })
	if got, _, err := r.ReadFile("file.txt", 0); !errors.Is(err, unix.EIO) {
		t.Errorf("read error: %q, %v; want EIO", got, err)
	}
}

// TestWriteFailuresLeaveTargetIntact: a failing write, fsync or rename of
// the commit reports the error, leaves the target as it was and removes
// the temporary; a short or interrupted write is completed.
func TestWriteFailuresLeaveTargetIntact(t *testing.T) {
	failures := []struct {
		name string
		// replace: the failure also hits a write over an existing file
		// (the exclusive link rename only commits new files).
		replace bool
		inject  func(t *testing.T)
	}{
		{"write", true, func(t *testing.T) {
			seam(t, &sysWrite, func(int, []byte) (int, error) { return -1, unix.ENOSPC })
		}},
		{"temporary fsync", true, func(t *testing.T) { fsyncLog(t, "file") }},
		{"link", false, func(t *testing.T) {
			seam(t, &forceLinkRename, true)
			seam(t, &sysLinkat, func(int, string, int, string, int) error { return unix.EPERM })
		}},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			ws, _ := layout(t)
			r, err := Open(ws)
			must(t, err)
			defer r.Close()
			f.inject(t)
			if err := r.WriteFile("file.txt", []byte("ours\n"), Prior{Any: true}, WriteOptions{}); f.replace && err == nil {
				t.Error("WriteFile over an existing file succeeded")
			}
			must(t, os.WriteFile(filepath.Join(ws, "file.txt"), []byte("inside\n"), 0o644))
			if err := r.WriteFile("new.txt", []byte("ours\n"), Absent, WriteOptions{}); err == nil {
				t.Error("WriteFile of a new file succeeded")
			}
			if got := readFile(t, filepath.Join(ws, "file.txt")); got != "inside\n" {
				t.Errorf("target changed to %q", got)
			}
			if _, err := os.Lstat(filepath.Join(ws, "new.txt")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("new file exists after a failed commit: %v", err)
			}
			assertNoTemps(t, ws)
		})
	}
	t.Run("short and interrupted writes", func(t *testing.T) {
		ws, _ := layout(t)
		r, err := Open(ws)
		must(t, err)
		defer r.Close()
		n := 0
		seam(t, &sysWrite, func(fd int, b []byte) (int, error) {
			if n++; n%2 == 1 {
				return -1, unix.EINTR
			}
			return unix.Write(fd, b[:min(len(b), 3)])
		})
		data := bytes.Repeat([]byte("0123456789"), 10)
		must(t, r.WriteFile("file.txt", data, Prior{Any: true}, WriteOptions{}))
		if got := readFile(t, filepath.Join(ws, "file.txt")); got != string(data) {
			t.Errorf("content after short writes = %q", got)
		}
	})
}

// TestCommitSyncs: a committed write, remove, mkdir and rmdir each fsync
// what makes them durable (the temporary before the rename, the directory
// after it), and report an fsync failure.
func TestCommitSyncs(t *testing.T) {
	ops := []struct {
		name string
		want []string
		op   func(r *Root) error
	}{
		{"write", []string{"file", "dir"}, func(r *Root) error {
			return r.WriteFile("file.txt", []byte("v2"), PriorOf([]byte("inside\n")), WriteOptions{})
		}},
		{"remove", []string{"dir"}, func(r *Root) error { return r.Remove("file.txt", PriorOf([]byte("inside\n"))) }},
		{"mkdir", []string{"dir"}, func(r *Root) error { return r.Mkdir("newdir", 0) }},
		{"rmdir", []string{"dir"}, func(r *Root) error { return r.RemoveDir("dir/sub2") }},
	}
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			ws, _ := layout(t)
			must(t, os.Mkdir(filepath.Join(ws, "dir", "sub2"), 0o755))
			r, err := Open(ws)
			must(t, err)
			defer r.Close()
			log := fsyncLog(t, "")
			must(t, o.op(r))
			if strings.Join(*log, ",") != strings.Join(o.want, ",") {
				t.Errorf("fsyncs = %v, want %v", *log, o.want)
			}
		})
		t.Run(o.name+" dir fsync fails", func(t *testing.T) {
			ws, _ := layout(t)
			must(t, os.Mkdir(filepath.Join(ws, "dir", "sub2"), 0o755))
			r, err := Open(ws)
			must(t, err)
			defer r.Close()
			fsyncLog(t, "dir")
			if err := o.op(r); !errors.Is(err, unix.EIO) {
				t.Errorf("err = %v, want the fsync's EIO", err)
			}
		})
	}
}

// TestCreateRacesCompare: a file created after the comparison found the
// target absent, and before the rename, is not replaced: the commit
// reports *ChangedError and leaves the other writer's file and no
// temporary, with the native exclusive rename and with link+unlink.
func TestCreateRacesCompare(t *testing.T) {
	for _, link := range []bool{false, true} {
		t.Run(map[bool]string{false: "renameat2", true: "link"}[link], func(t *testing.T) {
			seam(t, &forceLinkRename, link)
			ws, _ := layout(t)
			r, err := Open(ws)
			must(t, err)
			defer r.Close()
			p := filepath.Join(ws, "new.txt")
			raced := false
			seam(t, &sysOpenat, func(dirfd int, name string, flags int, mode uint32) (int, error) {
				fd, err := unix.Openat(dirfd, name, flags, mode)
				if name == "new.txt" && errors.Is(err, unix.ENOENT) && !raced {
					raced = true // the compare saw it absent; a foreign writer creates it now
					must(t, os.WriteFile(p, []byte("theirs\n"), 0o644))
				}
				return fd, err
			})
			var ce *ChangedError
			if err := r.WriteFile("new.txt", []byte("ours\n"), Absent, WriteOptions{}); !errors.As(err, &ce) {
				t.Errorf("WriteFile = %v, want *ChangedError", err)
			}
			if !raced {
				t.Fatal("the compare never looked for the target")
			}
			if got := readFile(t, p); got != "theirs\n" {
				t.Errorf("the other writer's file was replaced: %q", got)
			}
			assertNoTemps(t, ws)
		})
	}
}

// TestWriteUnconditionalAndHuge: Prior{Any} replaces whatever is there;
// a target grown past MaxFileBytes no longer matches any prior.
func TestWriteUnconditionalAndHuge(t *testing.T) {
	ws, _ := layout(t)
	r, err := Open(ws)
	must(t, err)
	defer r.Close()
	must(t, r.WriteFile("file.txt", []byte("any\n"), Prior{Any: true}, WriteOptions{}))
	if got := readFile(t, filepath.Join(ws, "file.txt")); got != "any\n" {
		t.Errorf("unconditional write: %q", got)
	}
	must(t, os.Truncate(filepath.Join(ws, "file.txt"), MaxFileBytes+1))
	var ce *ChangedError
	if err := r.WriteFile("file.txt", []byte("x"), PriorOf([]byte("any\n")), WriteOptions{}); !errors.As(err, &ce) {
		t.Errorf("write over a target grown past MaxFileBytes: %v, want *ChangedError", err)
	}
}

// TestCreateParentsNoFollow: a parent directory replaced by a link while
// WriteFile creates it is not followed: nothing is created outside.
func TestCreateParentsNoFollow(t *testing.T) {
	resolvers(t, func(t *testing.T, open func(string) *Root) {
		ws, out := layout(t)
		r := open(ws)
		swapped := false
		seam(t, &sysOpenat, func(dirfd int, name string, flags int, mode uint32) (int, error) {
			if name == "a" && !swapped {
				swapped = true // a link appears where the walk is about to create a directory
				must(t, os.Symlink(out, filepath.Join(ws, "a")))
			}
			return unix.Openat(dirfd, name, flags, mode)
		})
		// The walk's O_DIRECTORY|O_NOFOLLOW open of the link fails
		// (ENOTDIR or ELOOP): the error is what matters.
		if err := r.WriteFile("a/b/x.txt", []byte("x"), Absent, WriteOptions{CreateParents: true}); err == nil {
			t.Error("WriteFile through a parent swapped for a link succeeded")
		}
		assertOutsideUntouched(t, out)
	})
}

// TestMkdir: Mkdir gives the exact mode (0755 by default) whatever the
// umask, accepts an existing directory, and never follows a link that
// replaced the directory it made.
func TestMkdir(t *testing.T) {
	ws, out := layout(t)
	r, err := Open(ws)
	must(t, err)
	defer r.Close()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, c := range []struct {
		name string
		mode fs.FileMode
		want fs.FileMode
	}{{"d0", 0, 0o755}, {"d1", 0o777, 0o777}, {"d0", 0o700, 0o700}, {"p/q", 0o750, 0o750}} {
		must(t, r.Mkdir(c.name, c.mode))
		st, err := os.Stat(filepath.Join(ws, c.name))
		must(t, err)
		if !st.IsDir() || st.Mode().Perm() != c.want {
			t.Errorf("Mkdir(%s, %v): %v, want directory %v", c.name, c.mode, st.Mode(), c.want)
		}
	}
	outMode := func() fs.FileMode {
		st, err := os.Stat(out)
		must(t, err)
		return st.Mode()
	}
	before := outMode()
	swapped := false
	seam(t, &sysOpenat, func(dirfd int, name string, flags int, mode uint32) (int, error) {
		if name == "d2" && !swapped {
			swapped = true
			must(t, os.Remove(filepath.Join(ws, "d2")))
			must(t, os.Symlink(out, filepath.Join(ws, "d2")))
		}
		return unix.Openat(dirfd, name, flags, mode)
	})
	if err := r.Mkdir("d2", 0o777); err == nil {
		t.Error("Mkdir of a directory swapped for a link succeeded")
	}
	if outMode() != before {
		t.Errorf("the link's target changed mode: %v, was %v", outMode(), before)
	}
	if err := r.Mkdir(".", 0); err == nil {
		t.Error("Mkdir of the root succeeded")
	}
}

// TestRemoveDir: an empty directory goes, anything else stays and is
// reported, an absent one is a success.
func TestRemoveDir(t *testing.T) {
	ws, _ := layout(t)
	r, err := Open(ws)
	must(t, err)
	defer r.Close()
	must(t, os.Mkdir(filepath.Join(ws, "empty"), 0o755))
	must(t, r.RemoveDir("empty"))
	must(t, r.RemoveDir("empty"))
	must(t, r.RemoveDir("missing/x"))
	for _, p := range []string{"dir", "file.txt", "dir-link", ".", "../x"} {
		if err := r.RemoveDir(p); err == nil {
			t.Errorf("RemoveDir(%q) succeeded", p)
		}
	}
	for _, p := range []string{"dir", "file.txt", "dir-link"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

// TestRemoveGuards: writing or removing the root is a path error, and a
// file expected to exist whose parent vanished is not a success.
func TestRemoveGuards(t *testing.T) {
	ws, _ := layout(t)
	r, err := Open(ws)
	must(t, err)
	defer r.Close()
	if err := r.Remove(".", Prior{Any: true}); !isPathErr(err) {
		t.Errorf("Remove(.) = %v, want *PathError", err)
	}
	if err := r.WriteFile(".", nil, Prior{Any: true}, WriteOptions{}); !isPathErr(err) {
		t.Errorf("WriteFile(.) = %v, want *PathError", err)
	}
	if err := r.Remove("gone/f", PriorOf([]byte("data"))); err == nil {
		t.Error("Remove of an expected file whose parent vanished succeeded")
	}
}

// TestOpenFailuresAndFallback: a relative root is refused even when it
// exists; a link refused by openat2 does not switch the Root to the walk;
// interrupted opens are retried; the kernel's escape answer is ErrEscape.
func TestOpenFailuresAndFallback(t *testing.T) {
	for _, rel := range []string{".", "testdata"} {
		if r, err := Open(rel); err == nil {
			r.Close()
			t.Errorf("Open(%q) accepted a relative root", rel)
		}
	}
	ws, _ := layout(t)
	r, err := Open(ws)
	must(t, err)
	defer r.Close()
	if _, _, err := r.ReadFile("dir-link/secret.txt", 0); !isSymlink(err) {
		t.Fatalf("read through a link: %v", err)
	}
	if r.UsesComponentWalk() {
		t.Error("a refused link switched the Root to the component walk")
	}
	w, err := Open(ws, WithComponentWalk())
	must(t, err)
	defer w.Close()
	n := 0
	seam(t, &sysOpenat, func(dirfd int, name string, flags int, mode uint32) (int, error) {
		if n++; n == 1 {
			return -1, unix.EINTR
		}
		return unix.Openat(dirfd, name, flags, mode)
	})
	if got, _, err := w.ReadFile("dir/sub/deep.txt", 0); err != nil || string(got) != "deep\n" {
		t.Errorf("read after an interrupted open: %q, %v", got, err)
	}
	if err := mapErr(unix.EXDEV); !errors.Is(err, ErrEscape) || !errors.Is(err, unix.EXDEV) {
		t.Errorf("mapErr(EXDEV) = %v, want ErrEscape wrapping EXDEV", err)
	}
}

// TestCreateParentsModeAndSync: the parent directories WriteFile creates
// get exactly NewDirMode whatever the umask (a set-group-ID bit inherited
// from their parent kept), a directory that exists keeps its mode, and
// each created directory's parent is fsynced before the file is written
// in it: three directories fsynced for two created, then the file and
// its directory.
func TestCreateParentsModeAndSync(t *testing.T) {
	ws, _ := layout(t)
	r, err := Open(ws)
	must(t, err)
	defer r.Close()
	defer syscall.Umask(syscall.Umask(0o077))
	must(t, os.Mkdir(filepath.Join(ws, "shared"), 0o700))
	must(t, os.Chmod(filepath.Join(ws, "shared"), 0o770|fs.ModeSetgid))
	log := fsyncLog(t, "")
	must(t, r.WriteFile("shared/a/b/f.txt", []byte("x"), Absent, WriteOptions{CreateParents: true}))
	if got := strings.Join(*log, " "); got != "dir dir file dir" {
		t.Errorf("fsynced %q, want the parents of a and b, then the file and b", got)
	}
	for p, want := range map[string]fs.FileMode{"shared": 0o770 | fs.ModeSetgid, "shared/a": 0o755 | fs.ModeSetgid, "shared/a/b": 0o755 | fs.ModeSetgid} {
		st, err := os.Stat(filepath.Join(ws, p))
		must(t, err)
		if got := st.Mode() &^ fs.ModeDir; got != want {
			t.Errorf("%s has mode %v, want %v", p, got, want)
		}
	}
}
