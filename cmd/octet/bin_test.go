package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runBin runs the real octet binary in dir with the given variables added
// to a minimal environment and stdin holding the given text (no terminal
// anywhere), and returns how it ended.
func runBin(t *testing.T, dir string, vars map[string]string, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, octetBin, args...)
	cmd.Dir = dir
	cmd.Env = binEnv(vars)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if xe, ok := errors.AsType[*exec.ExitError](err); ok {
		code = xe.ExitCode()
	} else if err != nil {
		t.Fatalf("run octet %v: %v", args, err)
	}
	return cliResult{code, out.String(), errb.String()}
}

// binEnv is a minimal environment (PATH, HOME, TMPDIR) plus vars.
func binEnv(vars map[string]string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}
