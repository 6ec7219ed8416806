//go:build linux

package fsroot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// resolvers runs f once with openat2 and once with the forced component
// walk, so every table below covers both resolvers.
func resolvers(t *testing.T, f func(t *testing.T, open func(dir string) *Root)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			f(t, func(dir string) *Root {
				var opts []Option
				if walk {
					opts = append(opts, WithComponentWalk())
				}
				r, err := Open(dir, opts...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				return r
			})
		})
	}
}

// layout builds ws/ (the root) and out/ (outside) under a temp dir.
func layout(t *testing.T) (ws, out string) {
	t.Helper()
	base := t.TempDir()
	ws, out = filepath.Join(base, "ws"), filepath.Join(base, "out")
	must(t, os.MkdirAll(filepath.Join(ws, "dir", "sub"), 0o755))
	must(t, os.MkdirAll(out, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "file.txt"), []byte("inside\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "dir", "sub", "deep.txt"), []byte("deep\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(out, "secret.txt"), []byte("SECRET\n"), 0o644))
	must(t, os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(ws, "final-link")))
	must(t, os.Symlink(out, filepath.Join(ws, "dir-link")))
	must(t, os.Symlink("sub", filepath.Join(ws, "dir", "inner-link")))
	must(t, os.Symlink("file.txt", filepath.Join(ws, "rel-link")))
	must(t, unix.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
	return ws, out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadTable(t *testing.T) {
	resolvers(t, func(t *testing.T, open func(string) *Root) {
		ws, out := layout(t)
		r := open(ws)
		cases := []struct {
			path    string
			want    string // content on success
			errWant func(error) bool
		}{
			{path: "file.txt", want: "inside\n"},
			{path: "./dir/sub/deep.txt", want: "deep\n"},
			{path: "dir//sub/deep.txt", want: "deep\n"},
			{path: filepath.Join(out, "secret.txt"), errWant: isPathErr},
			{path: "/etc/passwd", errWant: isPathErr},
			{path: "../out/secret.txt", errWant: isPathErr},
			{path: "dir/../file.txt", errWant: isPathErr},
			{path: "dir/sub/../../../out/secret.txt", errWant: isPathErr},
			{path: "", errWant: isPathErr},
			{path: "a\x00b", errWant: isPathErr},
			{path: "final-link", errWant: isSymlink},
			{path: "rel-link", errWant: isSymlink},
			{path: "dir-link/secret.txt", errWant: isSymlink},
			{path: "dir/inner-link/deep.txt", errWant: isSymlink},
			{path: "dir", errWant: isNotRegular},
			{path: "fifo", errWant: isNotRegular},
			{path: "missing.txt", errWant: IsNotExist},
		}
		for _, c := range cases {
			got, _, err := r.ReadFile(c.path, 0)
			if c.errWant != nil {
				if err == nil || !c.errWant(err) {
					t.Errorf("ReadFile(%q) = %q, %v; want a matching error", c.path, got, err)
				}
				if bytes.Contains(got, []byte("SECRET")) {
					t.Errorf("ReadFile(%q) escaped: %q", c.path, got)
				}
				continue
			}
			if err != nil || string(got) != c.want {
				t.Errorf("ReadFile(%q) = %q, %v; want %q", c.path, got, err, c.want)
			}
		}
	})
}

func isPathErr(err error) bool    { var p *PathError; return errors.As(err, &p) }
func isSymlink(err error) bool    { return errors.Is(err, ErrSymlink) }
func isNotRegular(err error) bool { var n *NotRegularError; return errors.As(err, &n) }

func TestWriteTable(t *testing.T) {
	resolvers(t, func(t *testing.T, open func(string) *Root) {
		ws, out := layout(t)
		r := open(ws)
		bad := []string{
			filepath.Join(out, "new.txt"), "../out/new.txt", "dir/../x",
			"dir-link/new.txt", "dir/inner-link/new.txt", "final-link", "rel-link", "fifo", ".",
		}
		for _, p := range bad {
			if err := r.WriteFile(p, []byte("x"), Prior{Any: true}, WriteOptions{CreateParents: true}); err == nil {
				t.Errorf("WriteFile(%q) succeeded; want an error", p)
			}
		}
		assertOutsideUntouched(t, out)
		if got, _ := os.Readlink(filepath.Join(ws, "final-link")); got != filepath.Join(out, "secret.txt") {
			t.Errorf("final-link was replaced: %q", got)
		}
		// Creating nested directories goes through the same walk.
		must(t, r.WriteFile("new/a/b.txt", []byte("hello"), Absent, WriteOptions{CreateParents: true}))
		got, err := os.ReadFile(filepath.Join(ws, "new", "a", "b.txt"))
		if err != nil || string(got) != "hello" {
			t.Fatalf("created file = %q, %v", got, err)
		}
		st, _ := os.Stat(filepath.Join(ws, "new", "a", "b.txt"))
		if st.Mode().Perm() != 0o644 {
			t.Errorf("new file mode = %v, want 0644", st.Mode().Perm())
		}
		// Replacing keeps the target's mode.
		must(t, os.Chmod(filepath.Join(ws, "file.txt"), 0o600))
		must(t, r.WriteFile("file.txt", []byte("v2"), PriorOf([]byte("inside\n")), WriteOptions{}))
		st, _ = os.Stat(filepath.Join(ws, "file.txt"))
		if st.Mode().Perm() != 0o600 {
			t.Errorf("replaced file mode = %v, want 0600", st.Mode().Perm())
		}
		// Without CreateParents a missing parent is an error.
		if err := r.WriteFile("nope/x.txt", []byte("x"), Absent, WriteOptions{}); !IsNotExist(err) {
			t.Errorf("missing parent: %v", err)
		}
		assertNoTemps(t, ws)
	})
}

func assertOutsideUntouched(t *testing.T, out string) {
	t.Helper()
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "secret.txt" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("outside directory was written: %v", names)
	}
	got, _ := os.ReadFile(filepath.Join(out, "secret.txt"))
	if string(got) != "SECRET\n" {
		t.Errorf("outside file changed: %q", got)
	}
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".octet-tmp-") {
			t.Errorf("temporary left behind: %s", p)
		}
		return nil
	})
}

func TestCompareBeforeCommit(t *testing.T) {
	resolvers(t, func(t *testing.T, open func(string) *Root) {
		ws, _ := layout(t)
		r := open(ws)
		old, _, err := r.ReadFile("file.txt", 0)
		must(t, err)
		prior := PriorOf(old)
		// Someone else changes the file after we observed it.
		must(t, os.WriteFile(filepath.Join(ws, "file.txt"), []byte("theirs\n"), 0o644))
		err = r.WriteFile("file.txt", []byte("ours\n"), prior, WriteOptions{})
		var ce *ChangedError
		if !errors.As(err, &ce) {
			t.Fatalf("stale prior: err = %v, want *ChangedError", err)
		}
		if got, _ := os.ReadFile(filepath.Join(ws, "file.txt")); string(got) != "theirs\n" {
			t.Errorf("concurrent content lost: %q", got)
		}
		// Deleted since observed.
		must(t, os.Remove(filepath.Join(ws, "file.txt")))
		if err := r.WriteFile("file.txt", []byte("ours\n"), prior, WriteOptions{}); !errors.As(err, &ce) {
			t.Errorf("deleted target: err = %v", err)
		}
		// Expected absent, but someone created it.
		must(t, os.WriteFile(filepath.Join(ws, "file.txt"), []byte("created\n"), 0o644))
		if err := r.WriteFile("file.txt", []byte("ours\n"), Absent, WriteOptions{}); !errors.As(err, &ce) {
			t.Errorf("created target: err = %v", err)
		}
		if got, _ := os.ReadFile(filepath.Join(ws, "file.txt")); string(got) != "created\n" {
			t.Errorf("created content lost: %q", got)
		}
		assertNoTemps(t, ws)
	})
}

func TestSpecialFilesDoNotHang(t *testing.T) {
	resolvers(t, func(t *testing.T, open func(string) *Root) {
		ws, _ := layout(t)
		dev := filepath.Join(ws, "zero")
		if err := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
			t.Logf("mknod inside the workspace not permitted (%v); using /dev/zero via a /dev root", err)
		}
		r := open(ws)
		devRoot := open("/dev")
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, _, err := r.ReadFile("fifo", 0); !isNotRegular(err) {
				t.Errorf("fifo: %v", err)
			}
			if _, err := os.Stat(dev); err == nil {
				if _, _, err := r.ReadFile("zero", 0); !isNotRegular(err) {
					t.Errorf("device in workspace: %v", err)
				}
				if err := r.WriteFile("zero", []byte("x"), Prior{Any: true}, WriteOptions{}); !isNotRegular(err) {
					t.Errorf("write over device: %v", err)
				}
			}
			if _, _, err := devRoot.ReadFile("zero", 0); !isNotRegular(err) {
				t.Errorf("/dev/zero: %v", err)
			}
			if _, _, err := devRoot.ReadFile("null", 0); !isNotRegular(err) {
				t.Errorf("/dev/null: %v", err)
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("reading a FIFO or device hung")
		}
	})
}

func TestTooLarge(t *testing.T) {
	ws, _ := layout(t)
	r, err := Open(ws)
	must(t, err)
	defer r.Close()
	must(t, os.WriteFile(filepath.Join(ws, "big"), bytes.Repeat([]byte("a"), 101), 0o644))
	var tl *TooLargeError
	if _, _, err := r.ReadFile("big", 100); !errors.As(err, &tl) {
		t.Errorf("101 bytes with limit 100: %v", err)
	}
	if got, _, err := r.ReadFile("big", 101); err != nil || len(got) != 101 {
		t.Errorf("101 bytes with limit 101: %d, %v", len(got), err)
	}
}

func TestOpenRejectsRelativeRoot(t *testing.T) {
	if _, err := Open("relative/dir"); err == nil {
		t.Error("Open accepted a relative root")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Open accepted a missing root")
	}
}

// TestSymlinkSwapRace swaps a parent directory with a symlink to an outside
// directory at least 10,000 times while reads and writes run through it, and
// checks that nothing outside was read or written.
func TestSymlinkSwapRace(t *testing.T) {
	resolvers(t, func(t *testing.T, open func(string) *Root) {
		base := t.TempDir()
		ws, out := filepath.Join(base, "ws"), filepath.Join(base, "out")
		must(t, os.MkdirAll(filepath.Join(ws, "d"), 0o755))
		must(t, os.MkdirAll(out, 0o755))
		must(t, os.WriteFile(filepath.Join(ws, "d", "f"), []byte("inside"), 0o644))
		must(t, os.WriteFile(filepath.Join(out, "f"), []byte("SECRET"), 0o644))
		must(t, os.Symlink(out, filepath.Join(ws, "swap")))
		r := open(ws)

		const swaps = 10_000
		var done atomic.Bool
		var wg sync.WaitGroup
		var reads, writes, escapes, readTries, writeTries atomic.Int64
		wg.Go(func() {
			defer done.Store(true)
			dfd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer unix.Close(dfd)
			for i := 0; i < swaps || readTries.Load() < swaps || writeTries.Load() < 500; i++ {
				// Atomically exchange the real directory "d" with the
				// symlink "swap" -> out.
				if err := unix.Renameat2(dfd, "d", dfd, "swap", unix.RENAME_EXCHANGE); err != nil {
					t.Error(err)
					return
				}
			}
		})
		for range 2 {
			wg.Go(func() {
				for !done.Load() {
					got, _, err := r.ReadFile("d/f", 0)
					readTries.Add(1)
					if err == nil {
						reads.Add(1)
					}
					if bytes.Contains(got, []byte("SECRET")) {
						escapes.Add(1)
					}
				}
			})
		}
		wg.Go(func() {
			for !done.Load() {
				writeTries.Add(1)
				err := r.WriteFile("d/w", []byte("written"), Prior{Any: true}, WriteOptions{CreateParents: true})
				if err == nil {
					writes.Add(1)
				}
			}
		})
		wg.Wait()
		if escapes.Load() != 0 {
			t.Fatalf("%d reads escaped the root", escapes.Load())
		}
		if reads.Load() == 0 || writes.Load() == 0 {
			t.Fatalf("no read (%d) or write (%d) succeeded during the swaps; the race was not exercised", reads.Load(), writes.Load())
		}
		ents, _ := os.ReadDir(out)
		for _, e := range ents {
			if e.Name() != "f" {
				t.Errorf("write escaped the root: %s/%s", out, e.Name())
			}
		}
		if got, _ := os.ReadFile(filepath.Join(out, "f")); string(got) != "SECRET" {
			t.Errorf("outside file changed: %q", got)
		}
		t.Logf(">= %d swaps; reads %d/%d and writes %d/%d succeeded; 0 escapes",
			swaps, reads.Load(), readTries.Load(), writes.Load(), writeTries.Load())
	})
}

func TestOpenDirNoFollow(t *testing.T) {
	resolvers(t, func(t *testing.T, open func(string) *Root) {
		ws, _ := layout(t)
		r := open(ws)
		f, err := r.OpenDir("dir/sub")
		must(t, err)
		names, _ := f.Readdirnames(-1)
		f.Close()
		if len(names) != 1 || names[0] != "deep.txt" {
			t.Errorf("names = %v", names)
		}
		if _, err := r.OpenDir("dir-link"); !isSymlink(err) {
			t.Errorf("OpenDir through a link: %v", err)
		}
		if _, err := r.OpenDir("../"); !isPathErr(err) {
			t.Errorf("OpenDir(..): %v", err)
		}
	})
}

// FuzzCleanRel checks that an accepted path is relative, has no ".."
// component and stays accepted when cleaned again.
func FuzzCleanRel(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "/abs", "a/../b", ".", "./a//b/", "..", "a/..b", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, err := CleanRel(p)
		if err != nil {
			return
		}
		if filepath.IsAbs(c) || c == "" {
			t.Fatalf("CleanRel(%q) = %q", p, c)
		}
		for _, part := range strings.Split(c, "/") {
			if part == ".." {
				t.Fatalf("CleanRel(%q) = %q keeps ..", p, c)
			}
		}
		if c2, err := CleanRel(c); err != nil || c2 != c {
			t.Fatalf("CleanRel not idempotent: %q -> %q, %v", c, c2, err)
		}
	})
}

// TestFallbackOnRefusedOpenat2 simulates a kernel without openat2 (ENOSYS)
// and a seccomp filter refusing it (EPERM): the Root must switch to the
// component walk for good and keep refusing escapes.
func TestFallbackOnRefusedOpenat2(t *testing.T) {
	for _, errno := range []unix.Errno{unix.ENOSYS, unix.EPERM} {
		t.Run(errno.Error(), func(t *testing.T) {
			orig := openat2
			t.Cleanup(func() { openat2 = orig })
			openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, errno }
			ws, _ := layout(t)
			r, err := Open(ws)
			must(t, err)
			defer r.Close()
			if r.UsesComponentWalk() {
				t.Fatal("walk before any refusal")
			}
			got, _, err := r.ReadFile("dir/sub/deep.txt", 0)
			if err != nil || string(got) != "deep\n" {
				t.Fatalf("read after refusal: %q, %v", got, err)
			}
			if !r.UsesComponentWalk() {
				t.Error("Root did not switch to the component walk")
			}
			if _, _, err := r.ReadFile("dir-link/secret.txt", 0); !isSymlink(err) {
				t.Errorf("link after fallback: %v", err)
			}
		})
	}
}

func TestWriteKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root")
	}
	ws, _ := layout(t)
	p := filepath.Join(ws, "file.txt")
	must(t, os.Chown(p, 12345, 23456))
	r, err := Open(ws)
	must(t, err)
	defer r.Close()
	must(t, r.WriteFile("file.txt", []byte("v2"), PriorOf([]byte("inside\n")), WriteOptions{}))
	var st unix.Stat_t
	must(t, unix.Stat(p, &st))
	if st.Uid != 12345 || st.Gid != 23456 {
		t.Errorf("owner %d:%d, want 12345:23456", st.Uid, st.Gid)
	}
}
