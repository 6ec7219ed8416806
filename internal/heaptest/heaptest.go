// Package heaptest gives the tests that measure the live heap what they
// share: a process of their own, where no other test's goroutines
// allocate while they measure, and the measure itself. It is imported by
// tests only.
package heaptest

import (
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// childEnv marks the process a test runs itself in.
const childEnv = "OCTET_TEST_HEAP_CHILD"

// OwnProcess runs the calling test again, alone, in a process of its own
// (the test binary with -test.run naming just it), and reports whether
// the caller is that process: a test measuring the heap begins with
//
//	if !heaptest.OwnProcess(t) {
//		return
//	}
//
// In the parent, the child's failure fails t with its output.
func OwnProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("measured in a process of its own: %v\n%s", err, out)
	}
	t.Logf("measured in a process of its own:\n%s", out)
	return false
}

// Live returns the bytes of live heap objects after a collection.
func Live() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
