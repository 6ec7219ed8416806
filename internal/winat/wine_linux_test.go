package winat

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// windowsTests are the Windows tests run under Wine, by package: the
// handle-relative file operations, the search walker's handle calls, the
// credentials DACL check and the file tools end to end. Other packages' Windows tests stay
// compile-only: their t.TempDir cleanup fails under Wine 8 (os.RemoveAll
// deletes with FILE_DISPOSITION_INFORMATION_EX, which Wine answers
// STATUS_NOT_IMPLEMENTED, a status Go does not fall back on).
var windowsTests = map[string]string{
	"./internal/fsroot": "^(TestWindows|TestCleanRel)",
	"./internal/unixfd": "^TestWindows",
	"./internal/config": "^(TestCredentialsSDRules|TestCredentialsACL|TestCredentialsMissingSaysIcacls|TestSaveCredentials)$",
	"./tools":           "^TestWindowsFileTools$",
}

// TestWindowsTestsUnderWine cross-compiles the Windows tests above and
// runs them under Wine in a private prefix, with the ProcessPrng shim of
// testdata/wine (Go binaries abort at start-up under Wine 8 without it).
// It skips where wine or mingw-w64 is missing, unless OCTET_TEST_WINE is
// set (.ci/run sets it after installing both), when it must run.
func TestWindowsTestsUnderWine(t *testing.T) {
	required := os.Getenv("OCTET_TEST_WINE") != ""
	var missing []string
	for _, tool := range []string{"wine", "wineserver", "x86_64-w64-mingw32-gcc", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		if required {
			t.Fatalf("OCTET_TEST_WINE is set but %s not on PATH", strings.Join(missing, ", "))
		}
		t.Skipf("%s not installed (.ci/run installs wine and gcc-mingw-w64-x86-64): the Windows tests are compile-only here", strings.Join(missing, ", "))
	}
	if testing.Short() && !required {
		t.Skip("-short: not starting Wine")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(os.TempDir(), fmt.Sprintf("octet-wine-prefix-%d", os.Getuid()))
	env := append(os.Environ(),
		"WINEPREFIX="+prefix, "WINEARCH=win64", "WINEDEBUG=-all",
		"WINEDLLOVERRIDES=bcryptprimitives=n,b;mscoree=;mshtml=")
	logs := t.TempDir()
	// run sends output to a file, not a pipe: wineboot leaves wineserver
	// and Wine's services running with its stdout, and a pipe would not
	// reach EOF until they exit.
	run := func(timeout time.Duration, dir string, env []string, name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		f, err := os.CreateTemp(logs, "out")
		if err != nil {
			return "", err
		}
		defer f.Close()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, env
		cmd.Stdout, cmd.Stderr = f, f
		err = cmd.Run()
		out, _ := os.ReadFile(f.Name())
		return string(out), err
	}
	t.Cleanup(func() { run(30*time.Second, root, env, "wineserver", "-k") })

	system32 := filepath.Join(prefix, "drive_c", "windows", "system32")
	if _, err := os.Stat(system32); err != nil {
		if out, err := run(3*time.Minute, root, env, "wine", "wineboot", "--init"); err != nil {
			t.Fatalf("create the Wine prefix %s: %v\n%s", prefix, err, out)
		}
	}
	src := filepath.Join(root, "internal", "winat", "testdata", "wine")
	dll := filepath.Join(system32, "bcryptprimitives.dll")
	if out, err := run(time.Minute, src, env, "x86_64-w64-mingw32-gcc", "-O2", "-shared", "-nostdlib",
		"-Wl,--entry=0", "-o", dll, "bcryptprimitives.c", "bcryptprimitives.def", "-ladvapi32", "-lkernel32"); err != nil {
		t.Fatalf("build the ProcessPrng shim: %v\n%s", err, out)
	}

	bin := t.TempDir()
	buildEnv := append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=")
	for pkg, filter := range windowsTests {
		t.Run(filepath.Base(pkg), func(t *testing.T) {
			exe := filepath.Join(bin, filepath.Base(pkg)+".exe")
			if out, err := run(5*time.Minute, root, buildEnv, "go", "test", "-c", "-o", exe, pkg); err != nil {
				t.Fatalf("compile the Windows tests of %s: %v\n%s", pkg, err, out)
			}
			out, err := run(5*time.Minute, bin, env, "wine", exe, "-test.v", "-test.run", filter)
			t.Logf("wine %s -test.run %q:\n%s", filepath.Base(exe), filter, out)
			if err != nil {
				t.Fatalf("the Windows tests of %s failed under Wine: %v", pkg, err)
			}
			if !strings.Contains(out, "--- PASS") {
				t.Fatalf("no Windows test of %s passed under Wine", pkg)
			}
		})
	}
}
