package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// octetCmd is the real binary with x's environment, in its workspace.
func (x *execEnv) octetCmd(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), octetBin, args...)
	cmd.Dir = x.ws
	cmd.Env = os.Environ()
	for k, v := range x.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// awaitRequests waits until the provider has received n requests.
func (x *execEnv) awaitRequests(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); len(x.srv.Requests()) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d provider requests, want %d", len(x.srv.Requests()), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runOctet runs the real binary to its end.
func (x *execEnv) runOctet(t *testing.T, args ...string) cliResult {
	t.Helper()
	cmd := x.octetCmd(t, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{code, out.String(), errb.String()}
}
