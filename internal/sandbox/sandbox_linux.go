package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// probeEnv marks the child Probe starts to learn whether this host lets
// octet make the namespaces and read-only mounts that protect .git: the
// child tries one such mount (of /, in its own namespace) and exits with
// its outcome.
const probeEnv = "OCTET_SANDBOX_PROBE"

func init() {
	if os.Getenv(probeEnv) == "1" {
		if protect([]string{"/"}) != nil {
			syscall.Exit(1)
		}
		syscall.Exit(0)
	}
}

// configs are go-landlock's full configurations per ABI version, so a
// ruleset restricts everything the kernel can restrict.
var configs = []landlock.Config{
	{}, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6,
	landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11,
}

// Access rights, as Landlock names them.
const (
	readRights = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	// writeRights never include making device nodes or device ioctls.
	writeRights = ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSym | ll.AccessFSMakeFifo |
		ll.AccessFSMakeSock | ll.AccessFSRefer | ll.AccessFSTruncate | ll.AccessFSResolveUnix
	// fileRights are the rights that apply to a file (not a directory).
	fileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
		ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

var (
	probeOnce sync.Once
	probed    Status
)

// Probe reports what this host enforces. It is computed once; learning
// whether namespaces are available starts one short-lived child.
func Probe() Status {
	probeOnce.Do(func() { probed = probe() })
	return probed
}

// abiVersion is the Landlock ABI in use: the kernel's, downgraded to 5
// when the kernel's signal scoping has a known bug (as go-landlock does),
// capped at what go-landlock knows; 0 without Landlock.
func abiVersion() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 1 {
		return 0
	}
	if v >= 6 {
		if errata, err := ll.LandlockGetErrata(); err != nil || errata&0x2 == 0 {
			v = 5
		}
	}
	return min(v, len(configs)-1)
}

func probe() Status {
	abi := abiVersion()
	if abi == 0 {
		return Status{Mechanism: "unavailable", Reason: "Landlock is not enabled in this kernel: commands are not sandboxed, only admitted"}
	}
	st := Status{Mechanism: "landlock", ABI: abi, Scoped: abi >= 6}
	_, filter := seccompArch()
	st.Network = filter
	st.Namespaces = namespacesWork()
	var gaps []string
	if !st.Network {
		if abi >= 4 {
			gaps = append(gaps, "only TCP is blocked, not UDP (no seccomp filter for "+runtime.GOARCH+")")
		} else {
			gaps = append(gaps, "network is not blocked")
		}
	}
	if !st.Scoped {
		gaps = append(gaps, "signals to processes outside are not blocked (Landlock ABI < 6)")
	}
	if !st.Namespaces {
		gaps = append(gaps, ".git and .octet are writable under workspace-write (no user namespaces)")
	}
	if len(gaps) > 0 {
		st.Reason = joinSemi(gaps)
	}
	return st
}

func joinSemi(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}

// namespacesWork starts this binary in the namespaces a workspace-write
// guard gets (see NamespaceAttr), where it tries a read-only mount (init
// above): a host may allow the namespaces but not the mounts.
func namespacesWork() bool {
	exe, err := os.Executable()
	if err != nil {
		exe = "/proc/self/exe"
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Path = "/proc/self/exe"
	cmd.Args = []string{exe}
	cmd.Env = []string{probeEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	NamespaceAttr(cmd.SysProcAttr)
	return cmd.Run() == nil
}

// NamespaceAttr sets attr up to start a guard in a private mount
// namespace: in a new user namespace mapping the user to itself for an
// ordinary user (unprivileged; the guard keeps CAP_SYS_ADMIN and
// CAP_SETPCAP within it, as ambient capabilities, only to make its mounts
// and drop every capability before the command starts), in the caller's user namespace for root (who keeps root's
// view of file ownership; the command gets no capabilities anyway).
func NamespaceAttr(attr *syscall.SysProcAttr) {
	attr.Cloneflags |= syscall.CLONE_NEWNS
	if os.Geteuid() == 0 {
		return
	}
	attr.Cloneflags |= syscall.CLONE_NEWUSER
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
	attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
}

// Apply confines the calling thread to s: the command the guard starts
// next from the same goroutine, forked from this thread, inherits the
// confinement (Landlock domain, no_new_privs, seccomp filter, empty
// capability sets); the guard's other threads, which start nothing, keep
// supervising unconfined, and no other thread has to be signalled (as
// confining every thread would). It locks the calling goroutine to its
// thread and leaves it locked, so the runtime ends the thread rather
// than reuse it. An error means the thread may be partly confined: the
// command must not be started.
func Apply(s *Spec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	abi := abiVersion()
	if abi == 0 {
		return errors.New("sandbox: Landlock is not available in this kernel")
	}
	runtime.LockOSThread()
	if s.NeedsNamespace() {
		if err := protect(s.protectedPaths()); err != nil {
			return err
		}
	}
	if err := restrict(s, abi); err != nil {
		return err
	}
	if !s.Network {
		if err := installSeccomp(); err != nil {
			return err
		}
	}
	return dropCapabilities()
}

// restrict applies the Landlock ruleset for s.
func restrict(s *Spec, abi int) error {
	cfg := configs[abi]
	if s.Network {
		cfg.HandledAccessNet = 0
	}
	handled := cfg.HandledAccessFS
	var rules []landlock.Rule
	add := func(paths []string, rights landlock.AccessFSSet) error {
		for _, p := range paths {
			fi, err := os.Stat(p)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				return fmt.Errorf("sandbox: %w", err)
			}
			r := rights & handled
			if !fi.IsDir() {
				r &= fileRights
			}
			if r != 0 {
				rules = append(rules, landlock.PathAccess(r, p).IgnoreIfMissing())
			}
		}
		return nil
	}
	devRights := landlock.AccessFSSet(ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev)
	if err := add(s.readPaths(), readRights); err != nil {
		return err
	}
	if err := add(devWriteFiles, devRights); err != nil {
		return err
	}
	if err := add(s.writePaths(), readRights|writeRights); err != nil {
		return err
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("sandbox: build Landlock ABI %d rules: %w", abi, err)
	}
	if fd < 0 {
		return errors.New("sandbox: the Landlock ruleset restricts nothing")
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("sandbox: enforce Landlock ABI %d rules: %w", abi, err)
	}
	return nil
}

// protect makes each existing path (a directory or a file, never a
// symbolic link) read-only by mounting a read-only copy of it over
// itself, in the private mount namespace the guard was started in.
// Mounts are first made private, so nothing propagates to the host.
func protect(paths []string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("sandbox: make mounts private: %w", err)
	}
	for _, p := range paths {
		if err := protectOne(p); err != nil {
			return fmt.Errorf("sandbox: keep %s read-only: %w", p, err)
		}
	}
	return nil
}

func protectOne(p string) error {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if m := st.Mode & unix.S_IFMT; m != unix.S_IFDIR && m != unix.S_IFREG {
		// A link or a special file: the sandbox's own rules decide
		// what reaching through it allows.
		return nil
	}
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// dropCapabilities leaves a command started by root with no
// capabilities: the calling thread's bounding and inheritable sets are
// emptied (no_new_privs, set with Landlock, keeps them empty across
// setuid programs). A process without capabilities has nothing to drop.
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: capget: %w", err)
	}
	if data[0].Effective == 0 && data[1].Effective == 0 && data[0].Permitted == 0 && data[1].Permitted == 0 {
		return nil
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("sandbox: drop capability %d: %w", c, err)
		}
	}
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: capset: %w", err)
	}
	return nil
}
