package tools

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDirLister checks a walk's directory listing against os.ReadDir:
// every name (across many chunks, long ones, ones that are not UTF-8)
// with its type, "." and ".." left out.
func TestDirLister(t *testing.T) {
	dir := t.TempDir()
	want := map[string]fs.FileMode{}
	add := func(name string, typ fs.FileMode, make func(p string) error) {
		t.Helper()
		if err := make(filepath.Join(dir, name)); err != nil {
			t.Skipf("%s: %v", name, err)
		}
		want[name] = typ
	}
	file := func(p string) error { return os.WriteFile(p, nil, 0o644) }
	for i := range 3000 { // more than one getdents buffer
		add(fmt.Sprintf("%s-%04d", strings.Repeat("n", i%200), i), 0, file)
	}
	add(strings.Repeat("x", 255), 0, file)
	add("sub", fs.ModeDir, func(p string) error { return os.Mkdir(p, 0o755) })
	add("with space\nand newline", 0, file)
	if runtime.GOOS != "windows" && runtime.GOOS != "darwin" {
		add("not-utf8-\xff\xfe", 0, file)
	}
	if runtime.GOOS != "windows" {
		add("link", fs.ModeIrregular, func(p string) error { return os.Symlink("sub", p) })
	}
	ents, chunks := listAll(t, &dirLister{}, dir)
	got := map[string]fs.FileMode{}
	for _, e := range ents {
		if _, dup := got[e.name]; dup {
			t.Errorf("%q listed twice", e.name)
		}
		typ := e.typ
		if !typ.IsDir() && !typ.IsRegular() {
			typ = fs.ModeIrregular
		}
		got[e.name] = typ
	}
	if chunks < 2 {
		t.Errorf("listed in %d chunk(s); want the listing to take several", chunks)
	}
	if len(got) != len(want) {
		t.Errorf("listed %d entries, want %d", len(got), len(want))
	}
	for name, typ := range want {
		if g, ok := got[name]; !ok || g != typ {
			t.Errorf("%q: listed %v (%v), want %v", name, g, ok, typ)
		}
	}
	_, dot := got["."]
	if _, dotdot := got[".."]; dot || dotdot {
		t.Error(`"." or ".." listed`)
	}
}

// listAll lists directory dir with l to its end and returns its entries
// and how many chunks they came in.
func listAll(t *testing.T, l *dirLister, dir string) ([]dirEnt, int) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var all []dirEnt
	chunks := 0
	for {
		ents, err := l.next(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) == 0 {
			return all, chunks
		}
		chunks++
		all = append(all, ents...)
	}
}
