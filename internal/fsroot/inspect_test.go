//go:build linux

package fsroot

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestInspectTable runs Inspect over the shared layout on both resolvers:
// links (final, relative, dangling) are reported as links and never
// followed, a link in a parent component is ErrSymlink, special files
// are named, hard links are counted and nothing blocks.
func TestInspectTable(t *testing.T) {
	resolvers(t, func(t *testing.T, open func(string) *Root) {
		ws, out := layout(t)
		must(t, os.Symlink(filepath.Join(out, "gone"), filepath.Join(ws, "dangling")))
		must(t, os.Link(filepath.Join(ws, "file.txt"), filepath.Join(ws, "hard.txt")))
		ln, err := net.Listen("unix", filepath.Join(ws, "sock"))
		must(t, err)
		defer ln.Close()
		dev := unix.Mknod(filepath.Join(ws, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
		r := open(ws)
		cases := []struct {
			path  string
			kind  Kind
			links uint64 // checked when non-zero
			err   func(error) bool
		}{
			{path: ".", kind: KindDirectory},
			{path: "./", kind: KindDirectory},
			{path: "file.txt", kind: KindRegular, links: 2},
			{path: "hard.txt", kind: KindRegular, links: 2},
			{path: "dir/sub/deep.txt", kind: KindRegular, links: 1},
			{path: "dir//sub/./deep.txt", kind: KindRegular, links: 1},
			{path: "dir", kind: KindDirectory},
			{path: "dir/sub/", kind: KindDirectory},
			{path: "final-link", kind: KindSymlink},
			{path: "rel-link", kind: KindSymlink},
			{path: "dir-link", kind: KindSymlink},
			{path: "dir/inner-link", kind: KindSymlink},
			{path: "dangling", kind: KindSymlink},
			{path: "fifo", kind: KindFIFO},
			{path: "sock", kind: KindSocket},
			{path: "dir-link/secret.txt", err: isSymlink},
			{path: "dir-link/", kind: KindSymlink}, // cleaned to the link itself
			{path: "dir/inner-link/deep.txt", err: isSymlink},
			{path: "dangling/x", err: isSymlink},
			{path: "rel-link/x", err: isSymlink},
			{path: "missing.txt", err: IsNotExist},
			{path: "dir/missing/x", err: IsNotExist},
			{path: "file.txt/x", err: func(err error) bool { return err != nil }},
			{path: "../out/secret.txt", err: isPathErr},
			{path: "dir/../file.txt", err: isPathErr},
			{path: filepath.Join(out, "secret.txt"), err: isPathErr},
			{path: "", err: isPathErr},
			{path: "a\x00b", err: isPathErr},
		}
		if dev == nil {
			cases = append(cases, struct {
				path  string
				kind  Kind
				links uint64
				err   func(error) bool
			}{path: "null", kind: KindCharDevice})
		} else {
			t.Logf("mknod not permitted (%v); no device case", dev)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, c := range cases {
				kind, links, err := r.Inspect(c.path)
				if c.err != nil {
					if err == nil || !c.err(err) {
						t.Errorf("Inspect(%q) = %v, %d, %v; want a matching error", c.path, kind, links, err)
					}
					continue
				}
				if err != nil || kind != c.kind || (c.links != 0 && links != c.links) {
					t.Errorf("Inspect(%q) = %v, %d, %v; want %v (links %d)", c.path, kind, links, err, c.kind, c.links)
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Inspect blocked (a FIFO must not be opened for reading)")
		}
		assertOutsideUntouched(t, out)
	})
}

// TestInspectAfterRefusedOpenat2 checks that Inspect switches to the
// component walk like every other operation when the kernel refuses
// openat2, and still reports links without following them.
func TestInspectAfterRefusedOpenat2(t *testing.T) {
	orig := openat2
	t.Cleanup(func() { openat2 = orig })
	openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	ws, _ := layout(t)
	r, err := Open(ws)
	must(t, err)
	defer r.Close()
	if k, _, err := r.Inspect("final-link"); err != nil || k != KindSymlink {
		t.Errorf("final-link: %v %v", k, err)
	}
	if _, _, err := r.Inspect("dir-link/secret.txt"); !isSymlink(err) {
		t.Errorf("dir-link/secret.txt: %v", err)
	}
	if !r.UsesComponentWalk() {
		t.Error("Root did not switch to the component walk")
	}
}

// TestInspectClosedRoot: a closed root is an error, not a crash.
func TestInspectClosedRoot(t *testing.T) {
	ws, _ := layout(t)
	r, err := Open(ws)
	must(t, err)
	must(t, r.Close())
	if _, _, err := r.Inspect("file.txt"); err == nil {
		t.Fatal("Inspect on a closed root succeeded")
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindRegular: "regular file", KindSymlink: "symbolic link", KindFIFO: "FIFO", Kind(200): "special file"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q, want %q", k, k.String(), want)
		}
	}
}
