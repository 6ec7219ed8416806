package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	pt "github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// TestCheckpointWrittenBeforeNextRun: the session's file system fills up
// mid-run, so neither the call's result nor the run's checkpoint can be
// written (the session file ends on a page boundary: not one byte of
// room). The run fails naming the full disk. Once there is room again
// the agent's next run first writes the failed run's checkpoint, saying
// that it came late and why, and only then its own prompt. On the old
// code the failed run never got a checkpoint.
func TestCheckpointWrittenBeforeNextRun(t *testing.T) {
	checkLeaks(t)
	dir := mountTmpfs(t, 256<<10)
	filler := filepath.Join(dir, "filler")
	var path string
	fill := &probeTool{name: "fill", effect: tools.WorkspaceMutation, onExec: func(context.Context, tools.Invocation) (tools.Result, error) {
		if err := padToPage(path); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Text: "filled"}, fillDisk(filler, 0)
	}}
	h := newHarness(t, harnessOpt{sessDir: dir, policy: tools.UnsafeHost, extra: []tools.Tool{fill}})
	path = h.sess.Path()
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "fill", `{"n":1}`)), pt.Text("second answer"))
	r := h.prompt("fill the disk", PromptOptions{})
	fin := checkRunEvents(t, drain(t, r), OutcomeFailed)
	first := r.ID()
	if res := r.Wait(); !errors.Is(res.Err, unix.ENOSPC) {
		t.Fatalf("run error %v, want ENOSPC", res.Err)
	}
	if !strings.Contains(fin.Error, "OCTET_HOME is full") || strings.Contains(fin.Error, "read-only") {
		t.Errorf("run_finished error %q does not name the full disk", fin.Error)
	}
	if cps := h.sess.Checkpoints(); len(cps) != 0 {
		t.Fatalf("checkpoints on a full disk: %+v", cps)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r = h.prompt("again", PromptOptions{})
	checkRunEvents(t, drain(t, r), OutcomeCompleted)
	cps := h.sess.Checkpoints()
	if len(cps) != 2 || cps[0].RunID != first || cps[0].Outcome != string(OutcomeFailed) || cps[1].RunID != r.ID() {
		t.Fatalf("checkpoints %+v, want the failed run's, then the next run's", cps)
	}
	if e := cps[0].Error; !strings.Contains(e, "could not be written when the run ended") || !strings.Contains(e, "no space left on device") {
		t.Errorf("the late checkpoint says %q", e)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if cp, prompt := strings.Index(string(raw), `"kind":"checkpoint"`), strings.Index(string(raw), `"text":"again"`); cp < 0 || prompt < cp {
		t.Errorf("the late checkpoint (at %d) does not come before the next prompt (at %d)", cp, prompt)
	}
}

// padToPage appends one line of an unknown record kind (kept and skipped
// by every reader: another writer's, as far as the session is concerned)
// so that the file at path ends on a page boundary.
func padToPage(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	page := int64(os.Getpagesize())
	const min = int64(len(`{"kind":"padding","p":""}` + "\n"))
	n := (page - st.Size()%page) % page
	if n < min {
		n += page
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(`{"kind":"padding","p":"` + strings.Repeat("x", int(n-min)) + `"}` + "\n")
	return errors.Join(err, f.Close())
}

// TestReadOnlyMidRunNamesReadOnly: the session's file system turns
// read-only mid-run (ext4 with errors=remount-ro after a file system
// error, triggered through sysfs: writes through the open session file
// then fail with EROFS). The run fails saying the file system is
// read-only, never that the disk is full; the next prompt is refused
// because the failed run's checkpoint still cannot be written, saying
// why. On the old code the run's error told the user to free disk space.
func TestReadOnlyMidRunNamesReadOnly(t *testing.T) {
	checkLeaks(t)
	dir, trigger := mountExt4(t)
	fail := &probeTool{name: "fail", effect: tools.WorkspaceMutation, onExec: func(context.Context, tools.Invocation) (tools.Result, error) {
		return tools.Result{Text: "done"}, os.WriteFile(trigger, []byte("octet test\n"), 0)
	}}
	h := newHarness(t, harnessOpt{sessDir: dir, policy: tools.UnsafeHost, extra: []tools.Tool{fail}})
	h.srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "fail", `{"n":1}`)))
	r := h.prompt("go", PromptOptions{})
	fin := checkRunEvents(t, drain(t, r), OutcomeFailed)
	if res := r.Wait(); !errors.Is(res.Err, unix.EROFS) {
		t.Fatalf("run error %v, want EROFS", res.Err)
	}
	if !strings.Contains(fin.Error, "read-only file system") || !strings.Contains(fin.Error, "OCTET_HOME is read-only") || strings.Contains(fin.Error, "free disk space") {
		t.Errorf("run_finished error %q does not name the read-only file system", fin.Error)
	}
	_, err := h.agent.Prompt(context.Background(), "again", PromptOptions{})
	if err == nil || !strings.Contains(err.Error(), "checkpoint still cannot be written") || !strings.Contains(err.Error(), "OCTET_HOME is read-only") {
		t.Errorf("the next prompt: %v, want a refusal naming the read-only file system", err)
	}
}

// mountExt4 mounts a fresh 16 MiB ext4 image (errors=remount-ro) on a
// directory for the rest of the test and returns it with the file that
// triggers a file system error on it; it skips the test when loop mounts
// or mkfs.ext4 are not available.
func mountExt4(t *testing.T) (dir, trigger string) {
	t.Helper()
	img := filepath.Join(t.TempDir(), "fs.img")
	dir = t.TempDir()
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 16<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop,errors=remount-ro", img, dir).CombinedOutput(); err != nil {
		t.Skipf("loop mounts need root and loop devices: %v %s", err, out)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	dev, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/uevent", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		t.Skipf("no sysfs entry for the loop device: %v", err)
	}
	for line := range strings.Lines(string(dev)) {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "DEVNAME="); ok {
			trigger = filepath.Join("/sys/fs/ext4", name, "trigger_fs_error")
		}
	}
	if _, err := os.Stat(trigger); err != nil {
		t.Skipf("this kernel cannot trigger an ext4 error (%v)", err)
	}
	return dir, trigger
}
