//go:build unix

package gitsummary

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// git runs the real git in dir (the oracle and the fixture builder).
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(),
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// repo is a committed repository with an ignore file.
func repo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(dir, ".gitignore"), "*.log\nbuild/\n")
	write(t, filepath.Join(dir, "a.txt"), "a\n")
	write(t, filepath.Join(dir, "src", "b.go"), "package b\n")
	write(t, filepath.Join(dir, "src", "c.go"), "package c\n")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "init")
	return dir
}

// porcelain counts git status's unstaged changes and untracked files.
func porcelain(t *testing.T, dir string) (modified, untracked int) {
	for l := range strings.Lines(git(t, dir, "status", "--porcelain", "-uall")) {
		switch {
		case strings.HasPrefix(l, "??"):
			untracked++
		case len(l) > 1 && l[1] != ' ':
			modified++
		}
	}
	return modified, untracked
}

func TestReadMatchesGitStatus(t *testing.T) {
	dir := repo(t)
	// Same size, new time: only the content hash tells it changed.
	write(t, filepath.Join(dir, "a.txt"), "b\n")
	os.Remove(filepath.Join(dir, "src", "c.go"))
	if err := os.Chmod(filepath.Join(dir, "src", "b.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "new.txt"), "n\n")
	write(t, filepath.Join(dir, "src", "deep", "new.go"), "x\n")
	write(t, filepath.Join(dir, "debug.log"), "ignored\n")
	write(t, filepath.Join(dir, "build", "out"), "ignored\n")
	// Touched but unchanged: not modified.
	later := time.Now().Add(time.Hour)
	write(t, filepath.Join(dir, ".gitignore"), "*.log\nbuild/\n")
	os.Chtimes(filepath.Join(dir, ".gitignore"), later, later)

	s := Read(dir)
	if s == nil || !s.Counted || s.Partial {
		t.Fatalf("summary %+v", s)
	}
	m, u := porcelain(t, dir)
	if s.Branch != "main" || s.Modified != m || s.Untracked != u {
		t.Errorf("summary %+v, git status says %d modified, %d untracked", s, m, u)
	}
	if m != 3 || u != 2 {
		t.Errorf("fixture: git says %d modified, %d untracked", m, u)
	}
	// A workspace below the top counts only its own files.
	if s := Read(filepath.Join(dir, "src")); s == nil || s.Modified != 2 || s.Untracked != 1 {
		t.Errorf("summary of src %+v", s)
	}
}

func TestReadIndexV4AndDetached(t *testing.T) {
	dir := repo(t)
	git(t, dir, "update-index", "--index-version", "4")
	head := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
	git(t, dir, "checkout", "-q", "--detach")
	write(t, filepath.Join(dir, "src", "b.go"), "package b // changed\n")
	s := Read(dir)
	if s == nil || s.Branch != "" || s.Detached != head[:12] || s.Modified != 1 || s.Untracked != 0 {
		t.Errorf("summary %+v (HEAD %s)", s, head)
	}
}

func TestReadLinkedWorktreeAndNoRepo(t *testing.T) {
	dir := repo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, dir, "worktree", "add", "-q", "-b", "feature", wt)
	write(t, filepath.Join(wt, "x.txt"), "x\n")
	if s := Read(wt); s == nil || s.Branch != "feature" || s.Untracked != 1 || s.Modified != 0 {
		t.Errorf("linked worktree summary %+v", s)
	}
	if s := Read(t.TempDir()); s != nil {
		t.Errorf("summary outside a repository: %+v", s)
	}
}

// TestReadRunsNothingTheRepositoryConfigures: a hostile repository's
// fsmonitor hook and clean filter (which `git status` runs) are never
// run; a .git that is a link is not followed.
func TestReadRunsNothingTheRepositoryConfigures(t *testing.T) {
	dir := repo(t)
	marker := filepath.Join(t.TempDir(), "ran")
	git(t, dir, "config", "core.fsmonitor", "touch "+marker)
	git(t, dir, "config", "filter.evil.clean", "touch "+marker+"; cat")
	write(t, filepath.Join(dir, ".gitattributes"), "*.txt filter=evil\n")
	write(t, filepath.Join(dir, "a.txt"), "z\n")
	if s := Read(dir); s == nil || s.Modified != 1 {
		t.Errorf("summary %+v", s)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("reading the summary ran a program the repository configured")
	}
	linked := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, ".git"), filepath.Join(linked, ".git")); err != nil {
		t.Fatal(err)
	}
	if s := Read(linked); s != nil {
		t.Errorf("a .git link was followed: %+v", s)
	}
}

func TestParseIndexRefusesMalformed(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		[]byte("DIRX\x00\x00\x00\x02\x00\x00\x00\x00"),
		[]byte("DIRC\x00\x00\x00\x09\x00\x00\x00\x00"),
		[]byte("DIRC\x00\x00\x00\x02\xff\xff\xff\xff"),
	} {
		if _, err := parseIndex(b); err == nil {
			t.Errorf("parsed %q", b)
		}
	}
}

// FuzzParseIndex: the index parser never panics and never returns more
// entries than the bytes could hold.
func FuzzParseIndex(f *testing.F) {
	for _, v := range []string{"2", "4"} {
		dir := f.TempDir()
		cmd := exec.Command("sh", "-c", "git init -q && echo a > a && mkdir d && echo b > d/b && git add . && git update-index --index-version "+v)
		cmd.Dir = dir
		if err := cmd.Run(); err == nil {
			if b, err := os.ReadFile(filepath.Join(dir, ".git", "index")); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := parseIndex(b)
		if err == nil && len(es)*entryFixed > len(b) {
			t.Fatalf("%d entries from %d bytes", len(es), len(b))
		}
	})
}

// TestReadManyDirectories: a tree whose directories hold files before and
// after their subdirectories, looked at several directories at once,
// counts as git does — unchanged, then with a file changed, one removed
// and one added in every tenth directory.
func TestReadManyDirectories(t *testing.T) {
	dir := repo(t)
	for i := range 40 {
		d := filepath.Join(dir, "pkg", string(rune('a'+i%26))+strings.Repeat("x", i/26))
		write(t, filepath.Join(d, "a.go"), "a\n")
		write(t, filepath.Join(d, "m", "inner.go"), "m\n")
		write(t, filepath.Join(d, "z.go"), "z\n")
	}
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "many")
	check := func(what string) {
		t.Helper()
		s := Read(dir)
		m, u := porcelain(t, dir)
		if s == nil || !s.Counted || s.Partial || s.Modified != m || s.Untracked != u {
			t.Errorf("%s: summary %+v, git status says %d modified, %d untracked", what, s, m, u)
		}
	}
	check("unchanged")
	for i := 0; i < 40; i += 10 {
		d := filepath.Join(dir, "pkg", string(rune('a'+i%26))+strings.Repeat("x", i/26))
		write(t, filepath.Join(d, "z.go"), "changed\n")
		os.Remove(filepath.Join(d, "m", "inner.go"))
		write(t, filepath.Join(d, "m", "new.go"), "n\n")
	}
	check("changed")
}
