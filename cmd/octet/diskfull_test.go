//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// TestExecDiskFullCheckpointLater: OCTET_HOME is a small tmpfs that
// fills up while a real `octet exec --session` has its request in
// flight, so neither the answer nor the run's checkpoint can be written
// (the session file's last page has less room than the checkpoint: the
// prompt's length is chosen for that). The run fails saying the disk is
// full; `sessions show` says the run has no checkpoint. With OCTET_HOME
// then read-only (a read-only bind mount), continuing the session is
// refused naming the read-only file system, not a full disk. Once it is
// writable with space again, the next `exec --session` records the
// missing checkpoint (and the request's uncertainty) before its own run:
// every run has exactly one checkpoint. On the old code the failed run
// never got one.
func TestExecDiskFullCheckpointLater(t *testing.T) {
	ready := make(chan struct{})
	x := newExecEnv(t,
		providertest.Text("first answer"),
		providertest.Text(strings.Repeat("a long answer that needs more room than is left ", 400)).HoldUntil(ready),
		providertest.Text("third answer"),
	)
	released := false
	defer func() {
		if !released {
			close(ready)
		}
	}()
	home := mountTmpfs(t, 4<<20)
	x.home, x.vars["OCTET_HOME"] = home, home
	if r := x.runOctet(t, "exec", "first"); r.code != exitOK {
		t.Fatalf("first exec: exit %d\n%s", r.code, r.stderr)
	}
	file := x.oneSession(t)
	path := file
	sid := strings.TrimSuffix(filepath.Base(path), ".jsonl")

	// The second run's prompt entry and dispatch take the file to just
	// short of a page boundary: less room than any checkpoint needs.
	prompt := promptLeaving(t, path, "second", 24)
	second := x.octetCmd(t, "exec", "--session", sid, prompt)
	var errb bytes.Buffer
	second.Stderr = &errb
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	x.awaitRequests(t, 2)
	page := int64(os.Getpagesize())
	if st, err := os.Stat(path); err != nil {
		t.Fatal(err)
	} else if room := (page - st.Size()%page) % page; room > 200 {
		t.Fatalf("test setup: %d bytes left in the session file's last page, want under 200", room)
	}
	filler := filepath.Join(home, "filler")
	fillUp(t, filler)
	released = true
	close(ready)
	err := second.Wait()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != exitFailed {
		t.Fatalf("the run on a full disk: %v\nstderr: %s", err, errb.String())
	}
	if msg := errb.String(); !strings.Contains(msg, "no space left on device") || !strings.Contains(msg, "OCTET_HOME is full") || strings.Contains(msg, "read-only") {
		t.Errorf("the failure does not name the full disk:\n%s", msg)
	}
	s, err := session.Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	open, cps := s.OpenRuns(), s.Checkpoints()
	s.Close()
	if len(open) != 1 || len(cps) != 1 {
		t.Fatalf("after the failed run: open runs %v, checkpoints %+v (want the failed run open: its checkpoint did not fit)", open, cps)
	}
	failed := open[0]
	show := x.runOctet(t, "sessions", "show", sid)
	if !strings.Contains(show.stdout, "run "+failed+": no checkpoint yet") {
		t.Errorf("sessions show does not say the run has no checkpoint:\n%s", show.stdout)
	}

	// Read-only now: the next writable open cannot record it, and says
	// why (read-only, not full).
	undo := readOnlyBind(t, home)
	r := x.runOctet(t, "exec", "--session", sid, "third")
	if r.code == exitOK || !strings.Contains(r.stderr, "read-only file system") || !strings.Contains(r.stderr, "OCTET_HOME is read-only") || strings.Contains(r.stderr, "free disk space") {
		t.Errorf("continuing on a read-only OCTET_HOME: exit %d\n%s", r.code, r.stderr)
	}
	if show := x.runOctet(t, "sessions", "show", sid); show.code != exitOK || !strings.Contains(show.stdout, "run "+failed+": no checkpoint yet") {
		t.Errorf("sessions show on a read-only OCTET_HOME: exit %d\n%s%s", show.code, show.stdout, show.stderr)
	}
	undo()

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if r := x.runOctet(t, "exec", "--session", sid, "third"); r.code != exitOK {
		t.Fatalf("continuing once there is room: exit %d\n%s", r.code, r.stderr)
	}
	s, err = session.Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []string
	for _, c := range s.Checkpoints() {
		got = append(got, c.Outcome)
		if c.RunID == failed && c.Error != session.ReasonRunUnrecorded {
			t.Errorf("the failed run's checkpoint says %q", c.Error)
		}
	}
	if strings.Join(got, ",") != "completed,failed,completed" || len(s.OpenRuns()) != 0 {
		t.Fatalf("checkpoints %v, open runs %v; want one per run, the failed run's recorded late", got, s.OpenRuns())
	}
	if tot := s.Totals(); !tot.Uncertain {
		t.Errorf("the request whose answer was lost is not uncertain: %+v", tot)
	}
	show = x.runOctet(t, "sessions", "show", sid)
	if !strings.Contains(show.stdout, "run "+failed+": failed (the run ended without a checkpoint") {
		t.Errorf("sessions show:\n%s", show.stdout)
	}
}

// promptLeaving returns a prompt, starting with word and made of ASCII
// letters, for which the next run's prompt entry and its first dispatch
// record leave about room bytes before the next page boundary of the
// session file at path. The lengths of those records are taken from the
// file's previous run (its times counted at their longest, so the room
// left is at least room).
func promptLeaving(t *testing.T, path, word string, room int) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var user, dispatch int
	var prev string
	for line := range strings.Lines(string(raw)) {
		switch {
		case user == 0 && strings.Contains(line, `"type":"user"`):
			// Its time at full length (RFC 3339, 9 fraction digits).
			i := strings.Index(line, `"time":"`)
			j := strings.Index(line[i+8:], `"`)
			user = len(line) - j + len("2006-01-02T15:04:05.000000000Z")
			if !strings.Contains(line, `"parent":"`) { // the next one follows an entry
				user += len(`,"parent":"0123456789abcdef"`)
			}
			k := strings.Index(line, `"text":"`)
			prev = line[k+8 : k+8+strings.Index(line[k+8:], `"`)]
		case dispatch == 0 && strings.HasPrefix(line, `{"kind":"dispatch"`):
			dispatch = len(line)
		}
	}
	if user == 0 || dispatch == 0 {
		t.Fatalf("no prompt entry or dispatch in %s", raw)
	}
	page := os.Getpagesize()
	end := len(raw) + user - len(prev) + dispatch // with an empty prompt
	n := (page - end%page - room + 2*page) % page
	if n < len(word) {
		n += page
	}
	return word + strings.Repeat("x", n-len(word))
}

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory for the
// rest of the test, or skips the test when mounting is not permitted.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)+",mode=0700"); err != nil {
		t.Skipf("mounting a tmpfs needs CAP_SYS_ADMIN (root in CI): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillUp writes path until its file system has no free block left.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for _, n := range []int{len(buf), 1} {
		for {
			if _, err := f.Write(buf[:n]); errors.Is(err, unix.ENOSPC) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
}
