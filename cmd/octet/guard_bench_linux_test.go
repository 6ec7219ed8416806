package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkGuardStartOctet measures the CPU of the octet binary started
// as a command's process guard, running /bin/true and exiting (its
// resource usage, which includes the command it reaped), in the same
// loop: with GOMAXPROCS=1, as internal/proc starts guards ("one-p"), and
// with the runtime's default ("default", as they were started before),
// beside /bin/true started directly. It speaks the guard's start-up
// protocol itself (internal/proc: the marker variable, the socket on
// descriptor 3, "spec N" and the command's JSON, no descriptors passed),
// as proc.Prepare does.
//
//	go test ./cmd/octet -run '^$' -bench GuardStartOctet -benchtime 40x -count 6
func BenchmarkGuardStartOctet(b *testing.B) {
	if raceEnabled {
		b.Skip("the race detector's binary is not the one users run")
	}
	s := map[string][]float64{}
	for b.Loop() {
		s["one-p"] = append(s["one-p"], guardCPU(b, "GOMAXPROCS=1"))
		s["default"] = append(s["default"], guardCPU(b))
		cmd := exec.Command("/bin/true")
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		s["direct"] = append(s["direct"], cpuMS(cmd.ProcessState))
	}
	for name, xs := range s {
		slices.Sort(xs)
		b.ReportMetric(xs[len(xs)/2], name+"-cpu-ms")
	}
}

// guardCPU starts octetBin as a guard with extra environment, has it run
// /bin/true, and returns the CPU it used in ms.
func guardCPU(b *testing.B, extra ...string) float64 {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	defer ours.Close()
	cmd := &exec.Cmd{
		Path: octetBin, Args: []string{"octet-guard"},
		Env:        append([]string{"OCTET_PROC_GUARD=v1", "PATH=/usr/bin:/bin"}, extra...),
		ExtraFiles: []*os.File{theirs},
		// Its own process group, which the command joins.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		b.Fatal(err)
	}
	spec := `{"path":"/bin/true","args":["true"],"env":[],"grace":1000000000,"dir":"/"}`
	if _, err := fmt.Fprintf(ours, "spec %d\n%s", len(spec), spec); err != nil {
		b.Fatal(err)
	}
	reports, _ := io.ReadAll(ours) // its reports, until it exits
	if err := cmd.Wait(); err != nil {
		b.Fatalf("guard: %v (it reported %q)", err, reports)
	}
	return cpuMS(cmd.ProcessState)
}

// cpuMS is the user and system time a process (and the children it
// reaped) used, in ms.
func cpuMS(ps *os.ProcessState) float64 {
	return float64(ps.UserTime()+ps.SystemTime()) / float64(time.Millisecond)
}
