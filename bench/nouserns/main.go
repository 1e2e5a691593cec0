// Command nouserns runs a command the way an unprivileged container's
// default seccomp profile (Docker's, containerd's, a Kubernetes pod's
// RuntimeDefault) would: unshare and clone asking for a new user
// namespace fail with EPERM, and clone3 fails with ENOSYS so that libc
// and Go fall back to clone, whose flags a filter can read. Everything
// else is allowed. For bench/unpriv-container.sh and
// scripts/test-ci-recipe.sh:
//
//	nouserns CMD [ARG...]
//
// It sets no_new_privs (needed to install a filter without
// CAP_SYS_ADMIN, and what container runtimes set too) and execs CMD,
// which inherits the filter, as do all its children.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "nouserns: give a command to run: nouserns CMD [ARG...]")
		os.Exit(2)
	}
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nouserns:", err)
		os.Exit(127)
	}
	// The filter goes on every thread (TSYNC), and the exec below runs on
	// the thread that installed it.
	runtime.LockOSThread()
	if err := install(); err != nil {
		fmt.Fprintln(os.Stderr, "nouserns: installing the seccomp filter:", err)
		os.Exit(1)
	}
	err = syscall.Exec(path, os.Args[1:], os.Environ())
	fmt.Fprintln(os.Stderr, "nouserns:", err)
	os.Exit(126)
}

func install() error {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("no audit arch known for %s", runtime.GOARCH)
	}
	const (
		offNr   = 0  // seccomp_data.nr
		offArch = 4  // seccomp_data.arch
		offArg0 = 16 // low 32 bits of args[0] (little endian)
	)
	ret := func(v uint32) unix.SockFilter { return stmt(unix.BPF_RET|unix.BPF_K, v) }
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	eperm := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EPERM)
	enosys := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
	prog := []unix.SockFilter{
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch),
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, arch, 1, 0),
		ret(eperm), // another ABI (x32, compat): refuse rather than let it pass unchecked
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr),
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.SYS_CLONE3, 0, 1),
		ret(enosys),
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.SYS_UNSHARE, 1, 0),
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.SYS_CLONE, 0, 3),
		// unshare(flags) and clone(flags, ...) on amd64 and arm64 both
		// take the flags as the first argument.
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArg0),
		jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, unix.CLONE_NEWUSER, 0, 1),
		ret(eperm),
		ret(allow),
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	return nil
}

var auditArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}
