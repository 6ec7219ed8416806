//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/proc/proctest"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestKilledOctetTakesToolProcessesWithIt is the reported defect end to
// end: a real octet exec process is SIGKILLed (an editor crash, the OOM
// killer) while its bash call runs a backgrounded grandchild, a setsid'd
// one, a double fork and a setsid'd double fork, each of which would
// write a marker file 12 s later. None of them survives 3 s, and no marker
// appears 15 s later: a call left unresolved by the crash did not
// complete behind the user's back.
func TestKilledOctetTakesToolProcessesWithIt(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid(1) not installed")
	}
	t.Parallel()
	command := `sh w.sh a & setsid sh w.sh b & (sh w.sh c &) & setsid sh -c '(sh w.sh d &)' &
while [ ! -s a.pid ] || [ ! -s b.pid ] || [ ! -s c.pid ] || [ ! -s d.pid ]; do sleep 0.01; done
touch started; sleep 60`
	args, _ := json.Marshal(map[string]string{"command": command})
	x := newExecEnv(t,
		providertest.Reply(providertest.FunctionCall("b1", "bash", string(args))),
		providertest.Text("the run was supposed to be killed"),
	)
	if err := os.WriteFile(filepath.Join(x.ws, "w.sh"), []byte("echo $$ > $1.pid; sleep 12; echo done > $1.marker\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(octetBin, "exec", "--json", "run the command")
	cmd.Dir = x.ws
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "OCTET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range x.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(x.ws, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bash call never started\nstderr: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var pids []int
	for _, name := range []string{"a", "b", "c", "d"} {
		b, err := os.ReadFile(filepath.Join(x.ws, name+".pid"))
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || perr != nil {
			t.Fatalf("%s.pid: %v %v", name, err, perr)
		}
		pids = append(pids, pid)
	}
	defer func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()

	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for {
		var alive []string
		for i, pid := range pids {
			if !proctest.Gone(pid) {
				alive = append(alive, fmt.Sprintf("%c (pid %d)", 'a'+i, pid))
			}
		}
		if len(alive) == 0 {
			break
		}
		if time.Since(killed) > 3*time.Second {
			t.Fatalf("still running 3 s after octet was killed: %v", alive)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Until(killed.Add(15 * time.Second)))
	markers, _ := filepath.Glob(filepath.Join(x.ws, "*.marker"))
	if len(markers) > 0 {
		t.Errorf("the command completed after octet died: %v", markers)
	}
}
