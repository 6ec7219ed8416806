package fsroot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/octet-agent/octet/internal/winat"
	"golang.org/x/sys/windows"
)

// tempDir is t.TempDir, removed file by file: Go's os.RemoveAll deletes
// with FILE_DISPOSITION_INFORMATION_EX, which Wine 8 does not implement
// (STATUS_NOT_IMPLEMENTED), and the tests run under Wine in CI.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fsroot-"+strings.ReplaceAll(t.Name(), "/", "-"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(dir) })
	return dir
}

func removeTree(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			removeTree(p)
			continue
		}
		os.Remove(p)
	}
	os.Remove(dir)
}

// winLayout builds ws/ (the root, with file.txt and dir/sub/deep.txt)
// and out/ (outside, with secret.txt).
func winLayout(t *testing.T) (ws, out string) {
	t.Helper()
	base := tempDir(t)
	ws, out = filepath.Join(base, "ws"), filepath.Join(base, "out")
	must(t, os.MkdirAll(filepath.Join(ws, "dir", "sub"), 0o755))
	must(t, os.MkdirAll(out, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "file.txt"), []byte("inside\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "dir", "sub", "deep.txt"), []byte("deep\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(out, "secret.txt"), []byte("SECRET\n"), 0o644))
	return ws, out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func openRoot(t *testing.T, ws string) *Root {
	t.Helper()
	r, err := Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func isPathErr(err error) bool    { var p *PathError; return errors.As(err, &p) }
func isSymlink(err error) bool    { return errors.Is(err, ErrSymlink) }
func isNotRegular(err error) bool { var n *NotRegularError; return errors.As(err, &n) }
func isChanged(err error) bool    { var c *ChangedError; return errors.As(err, &c) }

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".octet-tmp-") {
			t.Errorf("temporary left behind in %s: %s", dir, e.Name())
		}
	}
}

// TestWindowsReadWrite: reads and writes resolve relative to the root
// handle, nested parents are created relative to their parent, a replace
// with the right prior commits, a wrong prior is *ChangedError, and no
// temporary is left either way.
func TestWindowsReadWrite(t *testing.T) {
	ws, _ := winLayout(t)
	r := openRoot(t, ws)
	for _, p := range []string{"file.txt", `dir\sub\deep.txt`, "./dir//sub/deep.txt", "FILE.TXT"} {
		data, info, err := r.ReadFile(p, 0)
		if err != nil || info.Size != int64(len(data)) || len(data) == 0 {
			t.Errorf("ReadFile(%q) = %q, %+v, %v", p, data, info, err)
		}
	}
	if _, _, err := r.ReadFile("missing.txt", 0); !IsNotExist(err) {
		t.Errorf("ReadFile(missing) = %v, want not-exist", err)
	}
	must(t, r.WriteFile("new/deeper/n.txt", []byte("one"), Absent, WriteOptions{CreateParents: true}))
	if b, _ := os.ReadFile(filepath.Join(ws, "new", "deeper", "n.txt")); string(b) != "one" {
		t.Fatalf("created file = %q", b)
	}
	if err := r.WriteFile("nope/x.txt", []byte("x"), Absent, WriteOptions{}); !IsNotExist(err) {
		t.Errorf("write without CreateParents into a missing directory = %v, want not-exist", err)
	}
	must(t, r.WriteFile("new/deeper/n.txt", []byte("two"), PriorOf([]byte("one")), WriteOptions{}))
	if err := r.WriteFile("new/deeper/n.txt", []byte("three"), PriorOf([]byte("one")), WriteOptions{}); !isChanged(err) {
		t.Fatalf("write with a stale prior = %v, want *ChangedError", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "new", "deeper", "n.txt")); string(b) != "two" {
		t.Fatalf("after a refused write the file is %q, want two", b)
	}
	must(t, r.WriteFile("file.txt", []byte("any"), Prior{Any: true}, WriteOptions{}))
	must(t, r.WriteFile("x", []byte("one-character name"), Absent, WriteOptions{}))
	if b, _ := os.ReadFile(filepath.Join(ws, "x")); string(b) != "one-character name" {
		t.Errorf("x = %q", b)
	}
	assertNoTemps(t, filepath.Join(ws, "new", "deeper"))
	assertNoTemps(t, ws)

	data, trunc, err := r.ReadPrefix("file.txt", 2)
	if err != nil || string(data) != "an" || !trunc {
		t.Errorf("ReadPrefix = %q, %v, %v", data, trunc, err)
	}
	if _, _, err := r.ReadFile("file.txt", 2); err == nil {
		t.Errorf("ReadFile over the limit succeeded")
	}
}

// TestWindowsReadRefusesDirectory: a read of a directory is a
// *NotRegularError from the handle's metadata.
func TestWindowsReadRefusesDirectory(t *testing.T) {
	ws, _ := winLayout(t)
	r := openRoot(t, ws)
	for _, p := range []string{"dir", "dir/sub", "."} {
		if _, _, err := r.ReadFile(p, 0); !isNotRegular(err) || !strings.Contains(err.Error(), "directory") {
			t.Errorf("ReadFile(%q) = %v, want a directory *NotRegularError", p, err)
		}
		if _, _, err := r.ReadPrefix(p, 10); !isNotRegular(err) {
			t.Errorf("ReadPrefix(%q) = %v, want *NotRegularError", p, err)
		}
	}
	if err := r.WriteFile("dir", []byte("x"), Prior{Any: true}, WriteOptions{}); !isNotRegular(err) {
		t.Errorf("WriteFile over a directory = %v, want *NotRegularError", err)
	}
	if err := r.WriteFile("file.txt/x", []byte("x"), Prior{Any: true}, WriteOptions{CreateParents: true}); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("WriteFile beneath a file = %v, want ENOTDIR", err)
	}
}

// TestWindowsExclusiveCreate: a write that expects an absent target
// refuses an existing one, including one that appears between the
// comparison and the rename (the rename does not replace), and leaves it
// as it was.
func TestWindowsExclusiveCreate(t *testing.T) {
	ws, _ := winLayout(t)
	r := openRoot(t, ws)
	if err := r.WriteFile("file.txt", []byte("clobber"), Absent, WriteOptions{}); !isChanged(err) {
		t.Fatalf("exclusive create over an existing file = %v, want *ChangedError", err)
	}
	testHookBeforeRename = func() {
		must(t, os.WriteFile(filepath.Join(ws, "late.txt"), []byte("theirs"), 0o644))
	}
	t.Cleanup(func() { testHookBeforeRename = nil })
	if err := r.WriteFile("late.txt", []byte("ours"), Absent, WriteOptions{}); !isChanged(err) {
		t.Fatalf("exclusive create racing a new file = %v, want *ChangedError", err)
	}
	testHookBeforeRename = nil
	for name, want := range map[string]string{"file.txt": "inside\n", "late.txt": "theirs"} {
		if b, _ := os.ReadFile(filepath.Join(ws, name)); string(b) != want {
			t.Errorf("%s = %q, want %q", name, b, want)
		}
	}
	assertNoTemps(t, ws)
}

// TestWindowsRenameStaysRelative: the commit renames relative to the
// parent handle opened at the start: when the parent directory is moved
// away and another directory takes its name before the rename, the file
// lands in the moved directory (the one that was resolved and compared),
// never in the newcomer.
func TestWindowsRenameStaysRelative(t *testing.T) {
	ws, _ := winLayout(t)
	r := openRoot(t, ws)
	must(t, os.Mkdir(filepath.Join(ws, "a"), 0o755))
	testHookBeforeRename = func() {
		must(t, os.Rename(filepath.Join(ws, "a"), filepath.Join(ws, "moved")))
		must(t, os.Mkdir(filepath.Join(ws, "a"), 0o755))
	}
	t.Cleanup(func() { testHookBeforeRename = nil })
	err := r.WriteFile("a/f.txt", []byte("payload"), Absent, WriteOptions{})
	testHookBeforeRename = nil
	if _, serr := os.Stat(filepath.Join(ws, "a", "f.txt")); !errors.Is(serr, fs.ErrNotExist) {
		t.Fatalf("a/f.txt in the replacement directory: %v", serr)
	}
	if err != nil && underWine() {
		// Wine 8's server renames an open file by the Unix path it
		// recorded when the file was opened (set_fd_name_info), which
		// is stale once the parent directory has moved: the rename
		// fails with STATUS_OBJECT_NAME_NOT_FOUND. The target name was
		// resolved relative to the held handle and nothing reached the
		// replacement directory (checked above); Windows renames the
		// handle itself.
		t.Skipf("Wine renames by the recorded path of the source, stale after its directory moved: %v", err)
	}
	must(t, err)
	if b, err := os.ReadFile(filepath.Join(ws, "moved", "f.txt")); string(b) != "payload" {
		t.Errorf("moved/f.txt = %q, %v; want the commit in the directory it resolved", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "a", "f.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a/f.txt in the replacement directory: %v", err)
	}
}

// TestWindowsPathShapes: every operation refuses the Windows path shapes
// that are absolute or not plain names before opening anything.
func TestWindowsPathShapes(t *testing.T) {
	ws, _ := winLayout(t)
	r := openRoot(t, ws)
	for _, p := range []string{
		`C:\Windows\win.ini`, `C:file.txt`, `\\server\share\f`, `\\?\C:\x`, `\file.txt`,
		`..\out\secret.txt`, `dir\..\..\out`, `file.txt:stream`, `file.txt::$DATA`,
		`CON`, `nul.txt`, `dir\COM1`, `lpt9.log`, `file.txt.`, `file.txt `, `a<b`, `a|b`, `a?`, `a*`, "a\x01b",
	} {
		if _, _, err := r.ReadFile(p, 0); !isPathErr(err) {
			t.Errorf("ReadFile(%q) = %v, want *PathError", p, err)
		}
		if err := r.WriteFile(p, []byte("x"), Prior{Any: true}, WriteOptions{CreateParents: true}); !isPathErr(err) {
			t.Errorf("WriteFile(%q) = %v, want *PathError", p, err)
		}
		if _, _, err := r.Inspect(p); !isPathErr(err) {
			t.Errorf("Inspect(%q) = %v, want *PathError", p, err)
		}
	}
	ents, _ := os.ReadDir(ws)
	if len(ents) != 2 {
		t.Errorf("the root holds %v after refused writes", ents)
	}
}

// TestWindowsOpenDirRemoveMkdir: OpenDir lists a directory and is ENOTDIR
// on a file (the search tool relies on that); Remove compares before it
// deletes; Mkdir and RemoveDir work relative to the parent handle.
func TestWindowsOpenDirRemoveMkdir(t *testing.T) {
	ws, _ := winLayout(t)
	r := openRoot(t, ws)
	f, err := r.OpenDir("dir")
	must(t, err)
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil || len(ents) != 1 || ents[0].Name() != "sub" || !ents[0].IsDir() {
		t.Errorf("OpenDir(dir).ReadDir = %v, %v", ents, err)
	}
	if _, err := r.OpenDir("file.txt"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("OpenDir(file) = %v, want ENOTDIR", err)
	}
	if err := r.Remove("file.txt", PriorOf([]byte("stale"))); !isChanged(err) {
		t.Errorf("Remove with a stale prior = %v, want *ChangedError", err)
	}
	must(t, r.Remove("file.txt", PriorOf([]byte("inside\n"))))
	if _, err := os.Stat(filepath.Join(ws, "file.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("file.txt after Remove: %v", err)
	}
	must(t, r.Remove("file.txt", Absent))
	if err := r.Remove("dir", Prior{Any: true}); !isNotRegular(err) {
		t.Errorf("Remove(dir) = %v, want *NotRegularError", err)
	}
	must(t, r.Mkdir("m/n", 0))
	if fi, err := os.Stat(filepath.Join(ws, "m", "n")); err != nil || !fi.IsDir() {
		t.Fatalf("Mkdir: %v", err)
	}
	must(t, r.Mkdir("m/n", 0)) // existing directory kept
	if err := r.RemoveDir("m"); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("RemoveDir(non-empty) = %v", err)
	}
	must(t, r.RemoveDir("m/n"))
	must(t, r.RemoveDir("m/n")) // absent is a success
	if err := r.RemoveDir("dir/sub/deep.txt"); err == nil {
		t.Errorf("RemoveDir(file) succeeded")
	}
	k, links, err := r.Inspect("dir/sub/deep.txt")
	if err != nil || k != KindRegular || links != 1 {
		t.Errorf("Inspect(file) = %v %d %v", k, links, err)
	}
	if k, _, err := r.Inspect("."); err != nil || k != KindDirectory {
		t.Errorf("Inspect(.) = %v %v", k, err)
	}
	if m, err := r.Mode("dir/sub/deep.txt"); err != nil || m != 0o666 {
		t.Errorf("Mode = %v %v", m, err)
	}
}

// TestWindowsReparsePointsRefused: a junction (and, where this account may
// create them, symbolic links) in any component is never followed:
// reads, writes, directory opens and removals through it fail with
// ErrSymlink, Inspect reports the link itself, and nothing outside the
// root is read or changed.
func TestWindowsReparsePointsRefused(t *testing.T) {
	ws, out := winLayout(t)
	links := map[string]func(link string) error{
		"junction":   func(link string) error { return makeJunction(link, out) },
		"dirsymlink": func(link string) error { return os.Symlink(out, link) },
	}
	made := 0
	var why []string
	for name, mk := range links {
		link := filepath.Join(ws, name)
		if err := mk(link); err != nil {
			why = append(why, name+": "+err.Error())
			continue
		}
		if !isReparse(link) {
			// Wine 8 reports success for CreateSymbolicLinkW and creates
			// nothing; a plain directory left by makeJunction is removed.
			os.Remove(link)
			why = append(why, name+": created object is not a reparse point")
			continue
		}
		made++
		t.Run(name, func(t *testing.T) { reparseCases(t, ws, out, name) })
	}
	if made == 0 {
		// Under Wine 8 the refusal cannot be shown either with a host
		// symbolic link: Wine presents a link to a directory as a
		// reparse point only to path-based queries (GetFileAttributesW),
		// while a handle-relative NtCreateFile follows it (Wine opens
		// with Unix openat) and the handle's attributes are the
		// target's; a host link to a file is invisible to every Windows
		// API there.
		t.Skipf("no reparse point could be created here (%s); Wine 8 implements neither FSCTL_SET_REPARSE_POINT nor CreateSymbolicLinkW", strings.Join(why, "; "))
	}
}

// underWine reports whether the test runs under Wine (its ntdll exports
// wine_get_version).
func underWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

func isReparse(p string) bool {
	u, _ := windows.UTF16PtrFromString(p)
	a, err := windows.GetFileAttributes(u)
	return err == nil && a&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0
}

func reparseCases(t *testing.T, ws, out, link string) {
	r := openRoot(t, ws)
	if _, _, err := r.ReadFile(link+"/secret.txt", 0); !isSymlink(err) {
		t.Errorf("read through %s = %v, want ErrSymlink", link, err)
	}
	if _, _, err := r.ReadFile(link, 0); !isSymlink(err) {
		t.Errorf("read of %s = %v, want ErrSymlink", link, err)
	}
	if err := r.WriteFile(link+"/secret.txt", []byte("pwned"), Prior{Any: true}, WriteOptions{}); !isSymlink(err) {
		t.Errorf("write through %s = %v, want ErrSymlink", link, err)
	}
	if err := r.WriteFile(link+"/new/x.txt", []byte("pwned"), Prior{Any: true}, WriteOptions{CreateParents: true}); !isSymlink(err) {
		t.Errorf("write with parents through %s = %v, want ErrSymlink", link, err)
	}
	if _, err := r.OpenDir(link); !isSymlink(err) {
		t.Errorf("OpenDir(%s) = %v, want ErrSymlink", link, err)
	}
	if err := r.Remove(link+"/secret.txt", Prior{Any: true}); !isSymlink(err) {
		t.Errorf("remove through %s = %v, want ErrSymlink", link, err)
	}
	if err := r.RemoveDir(link); err == nil {
		t.Errorf("RemoveDir(%s) removed the link", link)
	}
	if k, _, err := r.Inspect(link); err != nil || k != KindSymlink {
		t.Errorf("Inspect(%s) = %v, %v; want the link itself", link, k, err)
	}
	if _, _, err := r.Inspect(link + "/secret.txt"); !isSymlink(err) {
		t.Errorf("Inspect through %s = %v, want ErrSymlink", link, err)
	}
	h, err := winat.Dup(r.h)
	must(t, err)
	defer windows.CloseHandle(h)
	if _, _, err := winat.Open(h, link, windows.FILE_LIST_DIRECTORY, windows.FILE_OPEN, 0, 0); !errors.Is(err, winat.ErrReparsePoint) {
		t.Errorf("winat.Open(%s) = %v, want ErrReparsePoint", link, err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "secret.txt")); string(b) != "SECRET\n" {
		t.Errorf("outside file changed: %q", b)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Errorf("outside directory holds %v", ents)
	}
}
