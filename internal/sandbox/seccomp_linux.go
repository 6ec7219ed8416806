package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The no-network seccomp filter. Landlock ABI 4 to 7 restricts only TCP
// bind and connect (and not MPTCP), so without network every socket but
// a UNIX one is refused at socket(2) with EACCES, and io_uring (whose
// operations seccomp cannot see) is refused at setup. A system call made
// through another architecture's entry (a 32-bit int 0x80 on x86-64, or
// the x32 ABI) kills the process: its socketcall multiplexer would
// otherwise pass.

// seccompData offsets (struct seccomp_data).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits of args[0] on a little-endian machine
	x32Bit  = 0x40000000
)

// seccompArch returns the audit architecture of this binary and whether
// octet has a filter for it.
func seccompArch() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, true
	}
	return 0, false
}

// networkFilter is the BPF program.
func networkFilter(arch uint32) []unix.SockFilter {
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
	}
	const (
		ld    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		allow = unix.SECCOMP_RET_ALLOW
		kill  = unix.SECCOMP_RET_KILL_PROCESS
	)
	deny := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EACCES)
	return []unix.SockFilter{
		/* 0 */ stmt(ld, offArch),
		/* 1 */ jump(jeq, arch, 1, 0),
		/* 2 */ stmt(ret, kill),
		/* 3 */ stmt(ld, offNr),
		/* 4 */ jump(jset, x32Bit, 0, 1),
		/* 5 */ stmt(ret, kill),
		/* 6 */ jump(jeq, uint32(unix.SYS_IO_URING_SETUP), 0, 1),
		/* 7 */ stmt(ret, deny),
		/* 8 */ jump(jeq, uint32(unix.SYS_SOCKET), 0, 3),
		/* 9 */ stmt(ld, offArg0),
		/* 10 */ jump(jeq, unix.AF_UNIX, 1, 0),
		/* 11 */ stmt(ret, deny),
		/* 12 */ stmt(ret, allow),
	}
}

// installSeccomp installs the no-network filter on the calling thread
// (the one that starts the command, which inherits it).
func installSeccomp() error {
	arch, ok := seccompArch()
	if !ok {
		return nil // Probe reports that only Landlock's TCP rules apply
	}
	f := networkFilter(arch)
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("sandbox: install the no-network filter: %w", errno)
	}
	return nil
}
