package tools

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mainThreadEnv makes the test binary check, on its main thread, what a
// walk worker's thread does there (TestWatchThreadKeepsProcessDirectory).
const mainThreadEnv = "OCTET_TOOLS_TEST_MAIN_THREAD"

func init() {
	if os.Getenv(mainThreadEnv) == "1" {
		runtime.LockOSThread() // TestMain then runs on the main thread
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(mainThreadEnv) == "1" {
		fmt.Println(mainThreadCheck())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mainThreadCheck makes the calling thread a walk worker's and enters a
// directory, and reports whether it is the main thread and whether the
// process's directory, as the system shows it, is then that directory.
func mainThreadCheck() string {
	dir, err := os.MkdirTemp("", "octet-main-thread")
	if err != nil {
		return err.Error()
	}
	defer os.RemoveAll(dir)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err.Error()
	}
	defer unix.Close(fd)
	onMain := unix.Gettid() == unix.Getpid()
	newWatchThread(0).enter(fd)
	cwd, _ := os.Readlink("/proc/self/cwd")
	return fmt.Sprintf("main=%v entered=%v", onMain, strings.HasPrefix(cwd, dir))
}

// TestWatchThreadKeepsProcessDirectory: a walk worker that runs on the
// main thread gives it no directory of its own — the runtime never ends
// that thread, and its directory is the process's as /proc shows it (a
// workspace directory octet would seem to be in, and hold, for good).
func TestWatchThreadKeepsProcessDirectory(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainThreadEnv+"=1")
	out, err := cmd.CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "main=true entered=false" {
		t.Errorf("on the main thread: %q, %v; want main=true entered=false", got, err)
	}
}
