//go:build linux

package tools

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests check the read-only checker against the real programs: a
// command the checker admits runs, through the real shell as the bash tool
// runs it, under strace in a scratch workspace (with links out of it, a
// FIFO and files named like find's operators), and every path the shell
// and the programs touched must be one the checker examined (the
// inspection that checkReadOnly records), an entry of a directory the
// program listed that is itself such a path, or a system file on an
// explicit allowlist (straceSystemPaths). No program may write anything,
// follow a link inside the workspace, or open a FIFO; each program the
// shell runs must get exactly the words the checker parsed.

// straceRequiredEnv, when set (.ci/run sets it), makes a missing strace or
// a refused ptrace a failure instead of a skip.
const straceRequiredEnv = "OCTET_TEST_STRACE"

// straceTimeout bounds one traced command; a run that needs it (a read
// blocked on a FIFO, say) is a finding.
const straceTimeout = 10 * time.Second

// requireStrace skips t unless strace can trace a process here.
func requireStrace(t testing.TB) string {
	t.Helper()
	fail := t.Skipf
	if os.Getenv(straceRequiredEnv) != "" {
		fail = t.Fatalf
	}
	bin, err := exec.LookPath("strace")
	if err != nil {
		fail("strace is not installed (apt-get install strace); %s makes this a failure", straceRequiredEnv)
		return ""
	}
	if out, err := exec.Command(bin, "-f", "-qq", "-o", os.DevNull, "/bin/true").CombinedOutput(); err != nil {
		fail("strace cannot trace here (ptrace not permitted?): %v: %s", err, out)
		return ""
	}
	return bin
}

// straceWorld is one scratch workspace ws with an outside directory out,
// a home and a temporary directory, and the call the checker judges.
type straceWorld struct {
	base, ws string
	call     ShellCall
}

// newStraceWorld builds the scratch workspace.
func newStraceWorld(t testing.TB) *straceWorld {
	t.Helper()
	base := scratchTree(t, "octet-strace-", []string{"ws/src/sub", "ws/,", "ws/(", "ws/.git/info", "out/dir", "home", "tmp"}, map[string]string{
		"out/secret.txt": "secret\n", "out/dir/x": "x\n",
		"ws/a.txt": "b\na\nc\na\n", "ws/b.txt": "b\n", "ws/src/main.go": "package main\n",
		"ws/src/sub/x.go": "package sub\n", "ws/src/.gitignore": "*.o\n", "ws/,/f": "f\n",
		"ws/)": ")\n", "ws/-": "-\n", "ws/-n": "-n\n", "ws/!": "!\n", "ws/--files": "--files\n",
		"ws/+x": "+x\n", "ws/(/f": "(\n", "ws/src/sub/.ignore": "*.o\n", "ws/.rgignore": "*.o\n",
		"ws/.git/info/exclude": "*.o\n",
	})
	w := &straceWorld{base: base, ws: filepath.Join(base, "ws")}
	links := map[string]string{
		"ws/link.txt": "../out/secret.txt", "ws/linkdir": "../out", "ws/src/inlink": "../../out/secret.txt",
		"ws/src/indir": "../../out/dir", "ws/inner": "src",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, fifo := range []string{"ws/fifo", "ws/src/fifo"} {
		if err := syscall.Mkfifo(filepath.Join(base, fifo), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.call = ShellCall{
		Dir: w.ws,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + filepath.Join(base, "home"),
			"TMPDIR=" + filepath.Join(base, "tmp"), "LANG=C.UTF-8", "SHLVL=1"},
		Shell: "/bin/bash",
	}
	return w
}

// traced is one run of a command under strace.
type traced struct {
	accesses []fileAccess
	execs    []execCall
	output   []byte
	problems []string // lines strace printed that the parser does not understand
}

// runTraced runs the world's call of command, as the bash tool would
// (shell -c command, stdin on /dev/null), under strace.
func (w *straceWorld) runTraced(t testing.TB, strace, command string) traced {
	t.Helper()
	tracePath := filepath.Join(w.base, "trace")
	cmd := exec.Command(strace, "-f", "-qq", "-y", "-s", "65535",
		"-e", "trace=%file,getdents64,fchdir,clone,clone3,fork,vfork",
		"-o", tracePath, "--", w.call.Shell, "-c", command)
	cmd.Dir = w.ws
	cmd.Env = w.call.Env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start strace: %v", err)
	}
	timer := time.AfterFunc(straceTimeout, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	cmd.Wait()
	if !timer.Stop() {
		t.Errorf("%s: still running after %v (blocked on a FIFO or a terminal?)", command, straceTimeout)
	}
	raw, err := os.ReadFile(tracePath)
	if err != nil {
		t.Fatalf("read the trace: %v", err)
	}
	tr := parseTrace(string(raw), w.ws)
	tr.output = out.Bytes()
	return tr
}

// accessKind is what a system call did with a path.
type accessKind uint8

const (
	accessMeta  accessKind = iota // stat, lstat, access, readlink, xattr reads, O_PATH opens
	accessRead                    // opened for reading
	accessList                    // read a directory's entries
	accessExec                    // executed
	accessWrite                   // opened for writing or changed
)

func (k accessKind) String() string {
	return [...]string{"metadata", "read", "list", "exec", "write"}[k]
}

// fileAccess is one path a traced process touched.
type fileAccess struct {
	program string // the program the process was running (bash before exec)
	path    string // absolute and lexically clean
	kind    accessKind
	follow  bool   // the last component is resolved through a link
	raw     string // absolute but as given, when it has a ".." component
	spelled string // the path argument as given
	viaFD   bool   // relative to a directory descriptor (not AT_FDCWD)
	line    string
}

// execCall is a successful execve.
type execCall struct {
	path string
	argv []string
}

// syscallSpec says where a file system call's path is and how it treats it.
type syscallSpec struct {
	dirfd int // index of the directory descriptor argument, or -1
	path  int // index of the path argument
	kind  accessKind
	// follow: the last component is followed, unless flags (the index of
	// the open or *at flags argument, or -1) say otherwise.
	follow bool
	flags  int
}

// fileSyscalls are the file system calls the traced programs may make.
// Anything else strace's %file class reports (mkdir, unlink, rename,
// chmod, utimensat, setxattr, ...) changes the file system, or is not
// understood: either fails the test.
var fileSyscalls = map[string]syscallSpec{
	"open":       {dirfd: -1, path: 0, kind: accessRead, follow: true, flags: 1},
	"openat":     {dirfd: 0, path: 1, kind: accessRead, follow: true, flags: 2},
	"stat":       {dirfd: -1, path: 0, kind: accessMeta, follow: true, flags: -1},
	"lstat":      {dirfd: -1, path: 0, kind: accessMeta, flags: -1},
	"newfstatat": {dirfd: 0, path: 1, kind: accessMeta, follow: true, flags: 3},
	"statx":      {dirfd: 0, path: 1, kind: accessMeta, follow: true, flags: 2},
	"access":     {dirfd: -1, path: 0, kind: accessMeta, follow: true, flags: -1},
	"faccessat":  {dirfd: 0, path: 1, kind: accessMeta, follow: true, flags: -1},
	"faccessat2": {dirfd: 0, path: 1, kind: accessMeta, follow: true, flags: 3},
	"readlink":   {dirfd: -1, path: 0, kind: accessMeta, flags: -1},
	"readlinkat": {dirfd: 0, path: 1, kind: accessMeta, flags: -1},
	"getxattr":   {dirfd: -1, path: 0, kind: accessMeta, follow: true, flags: -1},
	"lgetxattr":  {dirfd: -1, path: 0, kind: accessMeta, flags: -1},
	"listxattr":  {dirfd: -1, path: 0, kind: accessMeta, follow: true, flags: -1},
	"llistxattr": {dirfd: -1, path: 0, kind: accessMeta, flags: -1},
	"statfs":     {dirfd: -1, path: 0, kind: accessMeta, follow: true, flags: -1},
	"chdir":      {dirfd: -1, path: 0, kind: accessMeta, follow: true, flags: -1},
	"execve":     {dirfd: -1, path: 0, kind: accessExec, follow: true, flags: -1},
	"unlink":     {dirfd: -1, path: 0, kind: accessWrite, flags: -1},
	"unlinkat":   {dirfd: 0, path: 1, kind: accessWrite, flags: -1},
}

// parseTrace turns strace -f -y output into the accesses and executions
// of every process, resolving each path against its directory descriptor
// (which -y prints resolved) or the process's working directory.
func parseTrace(raw, ws string) traced {
	var tr traced
	type event struct {
		pid        int
		name, args string
		ret        string
	}
	var events []event
	pending := map[int]string{}
	for _, line := range strings.Split(raw, "\n") {
		pidText, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil {
			if strings.TrimSpace(line) != "" {
				tr.problems = append(tr.problems, line)
			}
			continue
		}
		rest = strings.TrimSpace(rest)
		switch {
		case strings.HasPrefix(rest, "+++"), strings.HasPrefix(rest, "---"):
			continue
		case strings.HasSuffix(rest, "<unfinished ...>"):
			pending[pid] = strings.TrimSuffix(rest, "<unfinished ...>")
			continue
		case strings.HasPrefix(rest, "<... "):
			_, after, found := strings.Cut(rest, " resumed>")
			if !found {
				tr.problems = append(tr.problems, line)
				continue
			}
			rest = strings.TrimRight(pending[pid], " ") + after
			delete(pending, pid)
		}
		open := strings.IndexByte(rest, '(')
		if open < 0 {
			tr.problems = append(tr.problems, line)
			continue
		}
		end := matchingParen(rest, open)
		if end < 0 {
			tr.problems = append(tr.problems, line)
			continue
		}
		ret := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest[end+1:]), "="))
		events = append(events, event{pid: pid, name: rest[:open], args: rest[open+1 : end], ret: ret})
	}

	// Which program each process runs, and where: a child starts as its
	// parent was when it called clone (whose return strace may print
	// after the child's first calls; the parent cannot exec or chdir
	// meanwhile), execve changes the program.
	parent := map[int]int{}
	for _, ev := range events {
		switch ev.name {
		case "clone", "clone3", "fork", "vfork":
			if child, err := strconv.Atoi(strings.Fields(ev.ret + " x")[0]); err == nil && child > 0 {
				parent[child] = ev.pid
			}
		}
	}
	program := map[int]string{}
	cwd := map[int]string{}
	var start func(pid int)
	start = func(pid int) {
		if _, ok := program[pid]; ok {
			return
		}
		program[pid], cwd[pid] = "bash", ws
		if pp, ok := parent[pid]; ok {
			start(pp)
			program[pid], cwd[pid] = program[pp], cwd[pp]
		}
	}
	for _, ev := range events {
		start(ev.pid)
		failed := strings.HasPrefix(ev.ret, "-1") || strings.HasPrefix(ev.ret, "?")
		args := splitArgs(ev.args)
		switch ev.name {
		case "clone", "clone3", "fork", "vfork", "getcwd":
			continue
		case "fchdir":
			if !failed && len(args) > 0 {
				if dir, ok := fdPath(args[0]); ok {
					cwd[ev.pid] = dir
				}
			}
			continue
		case "getdents64":
			dir, ok := fdPath(args[0])
			if !ok {
				tr.problems = append(tr.problems, "no path for "+ev.name+"("+ev.args+")")
				continue
			}
			tr.accesses = append(tr.accesses, fileAccess{program: program[ev.pid], path: dir, kind: accessList, line: ev.name + "(" + ev.args + ")"})
			continue
		}
		spec, known := fileSyscalls[ev.name]
		text := fmt.Sprintf("%d %s(%s) = %s", ev.pid, ev.name, ev.args, ev.ret)
		if !known || spec.path >= len(args) {
			// A call that changes the file system, or one this table
			// does not know: both are findings.
			tr.accesses = append(tr.accesses, fileAccess{program: program[ev.pid], path: "?", kind: accessWrite, line: text})
			continue
		}
		p, isString := unquoteStrace(args[spec.path])
		if !isString {
			continue // NULL: no path
		}
		flags := ""
		if spec.flags >= 0 && spec.flags < len(args) {
			flags = args[spec.flags]
		}
		if p == "" && strings.Contains(flags, "AT_EMPTY_PATH") {
			continue // the descriptor itself, already accounted for when opened
		}
		base, viaFD := cwd[ev.pid], false
		if spec.dirfd >= 0 && !strings.HasPrefix(p, "/") {
			dir, ok := fdPath(args[spec.dirfd])
			if !ok {
				tr.problems = append(tr.problems, "no directory for "+text)
				continue
			}
			base, viaFD = dir, !strings.HasPrefix(args[spec.dirfd], "AT_FDCWD")
		}
		abs := p
		if !strings.HasPrefix(p, "/") {
			abs = base + "/" + p
		}
		a := fileAccess{program: program[ev.pid], path: path.Clean(abs), kind: spec.kind, follow: spec.follow,
			spelled: p, viaFD: viaFD, line: text}
		if slices.Contains(strings.Split(p, "/"), "..") {
			a.raw = abs
		}
		if strings.Contains(flags, "AT_SYMLINK_NOFOLLOW") || strings.Contains(flags, "O_NOFOLLOW") {
			a.follow = false
		}
		if spec.kind == accessRead {
			switch {
			case strings.Contains(flags, "O_WRONLY"), strings.Contains(flags, "O_RDWR"), strings.Contains(flags, "O_CREAT"),
				strings.Contains(flags, "O_TRUNC"), strings.Contains(flags, "O_APPEND"), strings.Contains(flags, "O_TMPFILE"):
				a.kind = accessWrite
			case strings.Contains(flags, "O_PATH"):
				a.kind = accessMeta
			}
		}
		tr.accesses = append(tr.accesses, a)
		switch {
		case ev.name == "chdir" && !failed:
			cwd[ev.pid] = a.path
		case ev.name == "execve" && !failed:
			argv, _ := parseStraceArray(args[1])
			tr.execs = append(tr.execs, execCall{path: a.path, argv: argv})
			if len(argv) > 0 {
				program[ev.pid] = path.Base(argv[0])
			}
		}
	}
	for pid, rest := range pending {
		tr.problems = append(tr.problems, fmt.Sprintf("%d unfinished: %s", pid, rest))
	}
	return tr
}

// matchingParen returns the index of the parenthesis closing the one at
// open, skipping quoted strings and path annotations, or -1.
func matchingParen(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '"':
			i = skipQuoted(s, i)
			if i < 0 {
				return -1
			}
		case '<':
			i = skipAnnotation(s, i)
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// skipQuoted returns the index of the quote closing the string that
// starts at i, or -1.
func skipQuoted(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

// skipAnnotation returns the index of the '>' closing a -y path
// annotation ("3</ws/(>", "AT_FDCWD</ws>") that starts at i, or i when
// none starts there.
func skipAnnotation(s string, i int) int {
	if i == 0 || !(s[i-1] >= '0' && s[i-1] <= '9' || s[i-1] == 'D') {
		return i
	}
	if j := strings.IndexByte(s[i:], '>'); j > 0 {
		return i + j
	}
	return i
}

// splitArgs splits a system call's printed arguments at the commas outside
// strings, brackets, braces and -y's <path> annotations.
func splitArgs(s string) []string {
	var args []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			if j := skipQuoted(s, i); j > 0 {
				i = j
			}
		case '[', '{', '(':
			depth++
		case ']', '}', ')':
			depth--
		case '<':
			i = skipAnnotation(s, i)
		case ',':
			if depth == 0 {
				args = append(args, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(args, strings.TrimSpace(s[start:]))
}

// fdPath returns the path strace -y printed for a descriptor argument
// ("3</ws/src>", "AT_FDCWD</ws>").
func fdPath(arg string) (string, bool) {
	i := strings.IndexByte(arg, '<')
	if i < 0 || !strings.HasSuffix(arg, ">") {
		return "", false
	}
	return path.Clean(arg[i+1 : len(arg)-1]), true
}

// unquoteStrace decodes a string strace printed in C syntax; false for
// anything else (NULL, an address).
func unquoteStrace(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; {
		case e == 'n':
			b.WriteByte('\n')
		case e == 't':
			b.WriteByte('\t')
		case e == 'r':
			b.WriteByte('\r')
		case e == 'v':
			b.WriteByte('\v')
		case e == 'f':
			b.WriteByte('\f')
		case e == 'x' && i+2 < len(s):
			v, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
			b.WriteByte(byte(v))
			i += 2
		case e >= '0' && e <= '7':
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(s[i:j], 8, 8)
			b.WriteByte(byte(v))
			i = j - 1
		default:
			b.WriteByte(e)
		}
	}
	return b.String(), true
}

// parseStraceArray decodes an execve argument vector (["a", "b"]).
func parseStraceArray(s string) ([]string, bool) {
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, false
	}
	var out []string
	for _, a := range splitArgs(s[1 : len(s)-1]) {
		if a == "" {
			continue
		}
		v, ok := unquoteStrace(a)
		if !ok {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// straceSystemPaths are the files outside the workspace that the checker
// is entitled to ignore, read-only: what the dynamic loader, glibc
// (locales, iconv, the name service for user and group names, the time
// zone, libselinux's probe), bash's terminal probe and the Rust runtime
// (rg: its stack guard and CPU count) read whatever the words are.
var straceSystemPaths = map[string]bool{
	"/etc/ld.so.cache": true, "/etc/ld.so.preload": true,
	"/etc/nsswitch.conf": true, "/etc/passwd": true, "/etc/group": true,
	"/etc/localtime": true, "/etc/selinux/config": true, "/sys/fs/selinux": true, "/selinux": true,
	"/proc/filesystems": true, "/proc/self/maps": true, "/proc/self/cgroup": true, "/proc/self/mountinfo": true,
	"/dev/null": true, "/dev/tty": true, "/dev/urandom": true, // sort -R
	"/": true, // glibc's name service stats it; find -samefile opens it (never lists it) to probe O_NOFOLLOW
}

// straceSystemTrees are directories whose whole content is in
// straceSystemPaths: shared libraries, locale data, time zones, cgroups,
// and the user records systemd's name service module looks up (find
// -user NAME: NAME.user in each).
var straceSystemTrees = []string{"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/share/locale",
	"/usr/share/zoneinfo", "/sys/fs/cgroup", "/sys/devices/system/cpu",
	"/etc/userdb", "/run/userdb", "/run/host/userdb", "/run/systemd/userdb", "/usr/local/lib/userdb"}

// straceSystem reports whether a reads within straceSystemTrees, or only
// the metadata of a directory on the way to one.
func straceSystem(a fileAccess) bool {
	for _, tree := range straceSystemTrees {
		switch {
		case a.path == tree, strings.HasPrefix(a.path, tree+"/"):
			return true
		case a.kind == accessMeta && strings.HasPrefix(tree, strings.TrimSuffix(a.path, "/")+"/"):
			return true
		}
	}
	return false
}

// rgIgnoreFileNames are the names ripgrep looks for in every directory of
// a search root's ancestry (beyond the workspace, these are the user's
// directories, not the repository's), besides its global git ignore.
var rgIgnoreFileNames = []string{".gitignore", ".ignore", ".rgignore", ".git", ".git/info/exclude"}

// straceOracle judges the accesses of one run against one inspection.
type straceOracle struct {
	ws, home, tmp string
	rec           *inspection
	listed        map[string]map[string]bool // program → directories it read entries of
}

// violations returns what the run did that the check did not entitle it to.
func (o *straceOracle) violations(tr traced) []string {
	o.listed = map[string]map[string]bool{}
	for _, a := range tr.accesses {
		if rel, inside := o.relative(a.path); inside && a.kind == accessList {
			if o.listed[a.program] == nil {
				o.listed[a.program] = map[string]bool{}
			}
			o.listed[a.program][rel] = true
		}
	}
	var out []string
	for _, a := range tr.accesses {
		if why := o.judge(a); why != "" {
			out = append(out, fmt.Sprintf("%s (%s %s by %s): %s", why, a.kind, a.path, a.program, a.line))
		}
	}
	for _, p := range tr.problems {
		out = append(out, "strace line not understood: "+p)
	}
	return append(out, o.execViolations(tr.execs)...)
}

// relative returns p relative to the workspace, and whether it is inside.
func (o *straceOracle) relative(p string) (string, bool) {
	if p == o.ws {
		return ".", true
	}
	if rel, ok := strings.CutPrefix(p, o.ws+"/"); ok {
		return rel, true
	}
	return "", false
}

// judge returns why access a is not entitled, or "".
func (o *straceOracle) judge(a fileAccess) string {
	if a.path == "?" {
		return "makes a file system call that changes files, or one fileSyscalls does not know"
	}
	if a.raw != "" {
		// A directory's ".." entry, as ls -a lists it: the parent of a
		// directory reached without links. Any other ".." could be
		// redirected by a link before it.
		dir, last := path.Split(a.raw)
		rel, inside := o.relative(path.Clean(dir))
		if last != ".." || slices.Contains(strings.Split(dir, "/"), "..") {
			return `resolves a ".." component that is not a directory's own entry`
		}
		if inside {
			if why := o.linkOrSpecial(fileAccess{follow: true}, rel); why != "" {
				return why
			}
		}
	}
	rel, inside := o.relative(a.path)
	if !inside {
		return o.judgeOutside(a)
	}
	if a.kind == accessWrite {
		return "writes in the workspace"
	}
	if a.kind == accessExec {
		return "executes a file of the workspace"
	}
	if why := o.linkOrSpecial(a, rel); why != "" {
		return why
	}
	switch {
	case rel == "." && a.kind != accessList:
		return "" // the working directory itself
	case o.inspected(a.program, rel):
		return ""
	case a.kind == accessMeta && o.ancestorOfInspected(a.program, rel):
		return ""
	case o.listedEntry(a, rel) && o.reached(a.program, rel):
		return ""
	}
	return "touches a workspace path the checker did not inspect"
}

// listedEntry reports whether a names rel as an entry of the directory
// it was listed from, not as an operand would: relative to a descriptor
// of that directory, or spelled with the directory in front ("src/x",
// "./x"). ls and rg (searching "." by default) name the entries of "."
// bare ("x"), as an operand would be: that is accepted for them alone.
func (o *straceOracle) listedEntry(a fileAccess, rel string) bool {
	switch {
	case a.kind == accessList: // its opening was judged
		return true
	case a.viaFD && !strings.Contains(a.spelled, "/"):
		return true
	case strings.Contains(strings.TrimSuffix(a.spelled, "/"), "/"):
		return true
	}
	return (a.program == "ls" || a.program == "rg") && path.Dir(rel) == "."
}

// inspected reports whether the check inspected rel for program.
func (o *straceOracle) inspected(program, rel string) bool {
	return o.rec.inside[program][rel]
}

// ancestorOfInspected: resolving an inspected path walks its ancestors,
// which the checker's no-follow resolver walked too.
func (o *straceOracle) ancestorOfInspected(program, rel string) bool {
	for p := range o.rec.inside[program] {
		if rel == "." || strings.HasPrefix(p, rel+"/") {
			return true
		}
	}
	return false
}

// reached reports whether rel is an entry of a directory the program
// listed that is itself inspected or reached so: met while recursing.
func (o *straceOracle) reached(program, rel string) bool {
	for rel != "." {
		parent := path.Dir(rel)
		if !o.listed[program][parent] {
			return false
		}
		if o.inspected(program, parent) {
			return true
		}
		rel = parent
	}
	return false
}

// linkOrSpecial enforces, on the scratch workspace as it is, that a path
// is not resolved through a symbolic link (no link in a directory
// component; none at the end unless the call does not follow it) and that
// no FIFO, socket or device is opened. rg's one exception: it stats (never
// opens) what a link it meets while recursing points to, to skip links to
// directories.
func (o *straceOracle) linkOrSpecial(a fileAccess, rel string) string {
	parts := strings.Split(rel, "/")
	for i := range parts {
		st, err := os.Lstat(filepath.Join(o.ws, filepath.Join(parts[:i+1]...)))
		if err != nil {
			return ""
		}
		last := i == len(parts)-1
		if st.Mode()&os.ModeSymlink != 0 {
			if !last {
				return "resolves a path through a link"
			}
			if a.follow && !(a.program == "rg" && a.kind == accessMeta && o.listedEntry(a, rel) && o.reached(a.program, rel)) {
				return "follows a link"
			}
			return ""
		}
		if last && a.kind == accessRead && !st.Mode().IsRegular() && !st.IsDir() {
			return "opens a " + st.Mode().Type().String()
		}
	}
	return ""
}

// judgeOutside judges an access outside the workspace.
func (o *straceOracle) judgeOutside(a fileAccess) string {
	if a.path == "/dev/tty" {
		return "" // bash's probe for a terminal (ENXIO without one)
	}
	switch {
	case a.program == "sort" && path.Dir(a.path) == o.tmp && strings.HasPrefix(path.Base(a.path), "sort"):
		return "" // sort's own temporary files in TMPDIR (docs/security.md, "Not covered")
	case a.kind == accessWrite:
		return "writes outside the workspace"
	case straceSystem(a):
		return ""
	case a.kind == accessList:
		return "lists a directory outside the workspace"
	case straceSystemPaths[a.path] || o.rec.outside[a.path]:
		return ""
	}
	// The workspace's ancestors: bash checks its working directory,
	// realpath reads links.
	if a.kind == accessMeta && strings.HasPrefix(o.ws, strings.TrimSuffix(a.path, "/")+"/") {
		return ""
	}
	if a.program == "rg" && a.kind != accessList && a.kind != accessExec {
		for _, name := range []string{".gitconfig", ".config/git/config", ".config/git/ignore"} {
			if a.path == path.Join(o.home, name) {
				return "" // the user's git configuration and global ignore file
			}
		}
		for _, name := range rgIgnoreFileNames {
			dir := a.path
			for range strings.Count(name, "/") + 1 {
				dir = path.Dir(dir)
			}
			if path.Join(dir, name) == a.path && strings.HasPrefix(o.ws, strings.TrimSuffix(dir, "/")+"/") {
				return "" // an ignore file of the workspace's ancestry
			}
		}
	}
	return "touches a path outside the workspace"
}

// execViolations: every program the shell ran got exactly the words of a
// command the checker parsed, from a PATH candidate it looked at.
func (o *straceOracle) execViolations(execs []execCall) []string {
	var want [][]string
	for _, c := range o.rec.commands {
		if !readOnlyPrograms[c.name].builtin {
			want = append(want, c.argv)
		}
	}
	var out []string
	if len(execs) == 0 || len(execs[0].argv) < 2 || execs[0].argv[1] != "-c" {
		return []string{"the trace does not start with the shell"}
	}
	for _, e := range execs[1:] {
		i := slices.IndexFunc(want, func(argv []string) bool { return slices.Equal(argv, e.argv) })
		if i < 0 {
			out = append(out, fmt.Sprintf("ran %q, which the checker did not parse (it parsed %q)", e.argv, want))
			continue
		}
		want = slices.Delete(want, i, i+1)
		if !o.rec.outside[e.path] {
			out = append(out, fmt.Sprintf("ran %s, not a PATH candidate the checker looked at", e.path))
		}
	}
	if len(want) > 0 {
		out = append(out, fmt.Sprintf("the checker parsed %q, which never ran", want))
	}
	return out
}

// checkAgainstStrace runs command in a fresh scratch workspace if the
// checker admits it, and reports whether it was admitted; every access
// the oracle does not entitle fails t.
func checkAgainstStrace(t testing.TB, strace, command string) bool {
	t.Helper()
	w := newStraceWorld(t)
	var rec inspection
	call := w.call
	call.Command = command
	if err := checkReadOnly(call, &rec); err != nil {
		return false
	}
	tr := w.runTraced(t, strace, command)
	o := &straceOracle{ws: w.ws, home: filepath.Join(w.base, "home"), tmp: filepath.Join(w.base, "tmp"), rec: &rec}
	if v := o.violations(tr); len(v) > 0 {
		t.Errorf("the checker admitted %q, but under strace:\n  %s\ninspected: %v\noutput: %s",
			command, strings.Join(v, "\n  "), rec.inside, tr.output[:min(len(tr.output), 2000)])
	}
	return true
}

// straceAdmitted are commands the checker must admit and that must then
// touch only what it inspected: the everyday forms, each program's
// options, and the operand shapes where the checker and the programs
// have disagreed.
var straceAdmitted = []string{
	// ls
	"ls", "ls -la", "ls -laR", "ls -R src", "ls -l src", "ls -d src", "ls -- -n", "ls -", "ls -l ,",
	"ls -1 --indicator-style=slash src", "ls -Z src", "ls --color=auto -l src", "ls -l1 a.txt",
	// cat, head, tail, wc
	"cat a.txt", "cat -- -n -", "cat -A a.txt b.txt", "cat -", "head -n 1 a.txt", "head -5 a.txt",
	"head -c 1 -- -n", "tail -n +2 a.txt", "tail -1 a.txt", "tail -2 -- -", "tail -q a.txt b.txt",
	"wc -l a.txt b.txt", "wc --total=only a.txt", "wc -",
	// grep
	"grep -rn a .", "grep -r a", "grep -r a src", "grep -d recurse a", "grep --directories=recurse a",
	"grep -r -d read a", "grep a a.txt", "grep -e a a.txt", "grep -n a -- -n", "grep -c a a.txt b.txt",
	"grep --color=always a a.txt", "grep --color a a.txt", "grep -rl package src", "grep -5 a a.txt",
	"grep a", "grep -r a -", "grep -r --include '*.go' package .", "grep a src",
	// rg
	"rg a", "rg a src", "rg -n package src", "rg --files", "rg --files src", "rg -e a a.txt", "rg -- -n -n",
	"rg -tgo package", "rg -g '*.go' package src", "rg --hidden a .", "rg a -", "rg -uuu a src", "rg -n a a.txt -",
	// find
	"find", "find .", "find src -name '*.go'", "find . -type f -newer a.txt", "find -P . -maxdepth 1",
	"find , -name x", "find ')' -print", "find . , -name x", "find - -print", "find -- , -print",
	"find '!' -print", "find . '!' -name a", "find -P -- ')' , '(' -name f ')'", "find . '(' -name a -o -name b ')' -print", "find src -samefile src/main.go",
	"find . -empty", "find src -ls", "find . -lname x", "find . -user root -o -nouser",
	// sed, sort, uniq
	"sed -n 1p a.txt", "sed -n -e 1p -e 2,3p a.txt b.txt", "sed -n 1p -- -n", "sed -n 1p -",
	"sort a.txt", "sort -u a.txt b.txt", "sort -m a.txt b.txt", "sort -c a.txt", "sort -- -n", "sort -k1,1 -t, a.txt",
	"uniq a.txt", "uniq -c -", "uniq -- -n",
	// "--" and "-" around options and operands
	"grep -e a -- -n", "sort -k 1 -- -n", "head -n1 -- -n -", "rg -e a -- --files", "rg --files -- -n",
	"ls -I -- -n", "sed -n -e 1p -- -n", "uniq -f1 -- -n", "wc -l -- -n -", "tail -n +1 -- -n",
	"find -P -P . -maxdepth 0", "grep -r -e a", "grep -d recurse -e a", "rg -e a", "cat -- -", "ls -- -",
	"head -5 -- -n", "tail -5 -- -n", "grep -rn -- a", "rg -- a", "rg -n -- -n",
	// builtins and pipelines
	"echo a b", "pwd", "pwd -P", "cat a.txt | sort | uniq -c | head -n 1", "grep -r a . | wc -l",
}

// TestReadOnlyAgainstStrace runs straceAdmitted under strace: the checker
// must admit each, and each must touch only what the checker inspected.
func TestReadOnlyAgainstStrace(t *testing.T) {
	strace := requireStrace(t)
	haveRG := false
	for _, dir := range []string{"/usr/local/bin", "/usr/bin", "/bin"} { // the scratch call's PATH
		if st, err := os.Stat(filepath.Join(dir, "rg")); err == nil && st.Mode().IsRegular() {
			haveRG = true
		}
	}
	if !haveRG {
		t.Log("rg is not installed (apt-get install ripgrep): its commands are skipped")
	}
	for _, c := range straceAdmitted {
		if !haveRG && strings.HasPrefix(c, "rg ") {
			continue
		}
		if !checkAgainstStrace(t, strace, c) {
			w := newStraceWorld(t)
			call := w.call
			call.Command = c
			t.Errorf("the checker refused %q: %v", c, CheckReadOnly(call))
		}
	}
}

// FuzzReadOnlyAgainstStrace runs what the checker admits under strace
// (see the top of this file). picks inserts words into cmd: each three
// bytes are a word position and an index into the vocabulary of cmd's
// first program (straceVocabulary). OCTET_STRACE_FUZZ_PROGRAM=find (say)
// skips inputs for other programs, to spend a fuzzing run on one.
func FuzzReadOnlyAgainstStrace(f *testing.F) {
	strace := requireStrace(f)
	for _, c := range straceAdmitted {
		f.Add(c, []byte(nil))
	}
	only := os.Getenv("OCTET_STRACE_FUZZ_PROGRAM")
	vocab := map[string][]string{}
	for name := range readOnlyPrograms {
		vocab[name] = straceVocabulary(name)
	}
	probe := newStraceWorld(f) // judges admission; each run gets a fresh world
	f.Fuzz(func(t *testing.T, cmd string, picks []byte) {
		if only != "" && strings.Fields(cmd + " x")[0] != only {
			t.Skip()
		}
		call := probe.call
		call.Command = insertWords(vocab, cmd, picks)
		if CheckReadOnly(call) == nil {
			checkAgainstStrace(t, strace, call.Command)
		}
	})
}

// insertWords inserts into cmd, after its first word, the words of its
// program's vocabulary that picks selects.
func insertWords(vocab map[string][]string, cmd string, picks []byte) string {
	words := strings.Split(cmd, " ")
	v := vocab[words[0]]
	if v == nil {
		return cmd
	}
	for i := 0; i+2 < len(picks) && len(words) < 40; i += 3 {
		at := 1 + int(picks[i])%len(words)
		words = slices.Insert(words, at, v[(int(picks[i+1])<<8|int(picks[i+2]))%len(v)])
	}
	return strings.Join(words, " ")
}

// straceVocabulary is what the fuzzer inserts into a command of program:
// each of its table options (alone, with sample values attached, and
// followed by one), its refused options, find's grammar, other programs'
// option spellings that mean something else here, and names in the
// scratch workspace, shell-quoted where needed.
func straceVocabulary(program string) []string {
	words := map[string]bool{}
	values := []string{"1", "0", "-1", "+1", "a", "-", "--", ",", "recurse", "read", "always", "never", "auto",
		"a.txt", "src", "1p", "-n"}
	p := readOnlyPrograms[program]
	for _, r := range p.refused {
		words[r] = true
	}
	if p.opts != nil {
		for c, s := range p.opts.short {
			words["-"+string(c)] = true
			if s.kind != noArg {
				for _, v := range values {
					words["-"+string(c)+v] = true
					words["-"+string(c)+" "+v] = true
				}
			}
		}
		for l, s := range p.opts.long {
			words[l] = true
			if s.kind != noArg {
				for _, v := range values {
					words[l+"="+v] = true
					words[l+" "+v] = true
				}
			}
		}
	}
	if program == "find" {
		for w := range findOperators {
			words[w] = true
		}
		for w := range findNoArg {
			words[w] = true
		}
		for w, s := range findOneArg {
			words[w] = true
			for _, v := range []string{"a", "1", "+1", "f", "d", "src", "a.txt", "-", ",", ")", "root"} {
				if s.valid == nil || s.valid(v) {
					words[w+" "+v] = true
				}
			}
		}
		for _, w := range []string{"-P", "-H", "-L", "-D", "-O1", "-files0-from"} {
			words[w] = true
		}
	}
	for _, w := range []string{".", "..", "-", "--", ",", ")", "(", "!", "-n", "+x", "--files", "a.txt", "b.txt", "src",
		"src/", "./src", "src/main.go", "src/sub", "link.txt", "linkdir", "inner", "fifo", "src/fifo", "missing",
		"/etc/passwd", "1p", "$p", "*.go", "a", "-5", "+5", "-1n", "-n1", "-e", "-r", "--help", "--version", "-"} {
		words[w] = true
	}
	out := make([]string, 0, len(words))
	for w := range words {
		parts := strings.Split(w, " ")
		for i, p := range parts {
			if strings.ContainsAny(p, "()!*$") {
				parts[i] = "'" + p + "'"
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	slices.Sort(out)
	return out
}

// TestStraceParser pins the trace parser on the shapes strace prints.
func TestStraceParser(t *testing.T) {
	raw := `100 execve("/bin/bash", ["/bin/bash", "-c", "find , -name x"], 0x7ffc /* 5 vars */) = 0
100 openat(AT_FDCWD</ws>, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3</etc/ld.so.cache>
100 newfstatat(3</etc/ld.so.cache>, "", {st_mode=S_IFREG|0644, ...}, AT_EMPTY_PATH) = 0
100 clone(child_stack=NULL, flags=SIGCHLD <unfinished ...>
101 newfstatat(AT_FDCWD</ws>, "a\"b", 0x7ff, AT_SYMLINK_NOFOLLOW) = -1 ENOENT (No such file or directory)
100 <... clone resumed>, child_tidptr=0x7f) = 101
101 execve("/usr/bin/find", ["find", ",", "-name", "x"], 0x55 /* 5 vars */) = 0
101 openat(4</ws/,>, "f", O_RDONLY|O_NOFOLLOW) = 3</ws/,/f>
101 getdents64(3</ws/,>, 0x5 /* 2 entries */, 32768) = 48
101 readlink("x/../y", "z", 10) = 1
101 unlinkat(AT_FDCWD</ws>, "a", 0) = 0
101 mkdirat(AT_FDCWD</ws>, "d", 0777) = 0
101 clone3({flags=CLONE_VM|CLONE_THREAD, ...} <unfinished ...>
102 openat(AT_FDCWD</ws>, "src", O_RDONLY|O_DIRECTORY) = 3</ws/src>
101 <... clone3 resumed>, 88) = 102
101 +++ exited with 0 +++
`
	tr := parseTrace(raw, "/ws")
	if len(tr.problems) > 0 {
		t.Fatalf("problems: %q", tr.problems)
	}
	type got struct {
		program, path string
		kind          accessKind
		follow        bool
	}
	var gots []got
	for _, a := range tr.accesses {
		gots = append(gots, got{a.program, a.path, a.kind, a.follow})
	}
	want := []got{
		{"bash", "/bin/bash", accessExec, true},
		{"bash", "/etc/ld.so.cache", accessRead, true},
		{"bash", `/ws/a"b`, accessMeta, false},
		{"bash", "/usr/bin/find", accessExec, true},
		{"find", "/ws/,/f", accessRead, false},
		{"find", "/ws/,", accessList, false},
		{"find", "/ws/y", accessMeta, false},
		{"find", "/ws/a", accessWrite, false},
		{"find", "?", accessWrite, false},     // not in fileSyscalls
		{"find", "/ws/src", accessRead, true}, // a thread, seen before clone3 returned
	}
	if !slices.Equal(gots, want) {
		t.Errorf("accesses\n got %v\nwant %v", gots, want)
	}
	if len(tr.execs) != 2 || !slices.Equal(tr.execs[1].argv, []string{"find", ",", "-name", "x"}) {
		t.Errorf("execs %q", tr.execs)
	}
}
