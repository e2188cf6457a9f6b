// The seccomp filter of a sandboxed function process (sandbox.h), as a classic BPF program for
// SECCOMP_SET_MODE_FILTER. It allows everything but what would let a tenant's code leave its
// sandbox or reach the kernel's larger attack surfaces:
//   - EPERM: ptrace and its kind (process_vm_readv/writev, kcmp), mount and the new mount API,
//     umount2, pivot_root, chroot, unshare, setns, bpf, perf_event_open, userfaultfd, io_uring,
//     the key calls, module and kexec loading, reboot, swap, syslog, acct, quotactl,
//     open_by_handle_at, and clone with any namespace flag (CLONE_NEW*);
//   - ENOSYS: clone3, whose flags sit in memory a filter cannot read (glibc then falls back to
//     clone, which the filter checks);
//   - EAFNOSUPPORT: socket of any family but AF_UNIX (the network namespace has no route out;
//     this also keeps netlink and raw sockets away);
//   - the process is killed for a system call of another architecture (x86_64's x32 and i386
//     entries), so that no numbering slips past the checks.
#pragma once

#include <linux/filter.h>

#include <vector>

#include "gshare/common/status.h"

namespace gshare {

// FailedPrecondition on an architecture other than x86_64 and aarch64.
Result<std::vector<sock_filter>> SandboxSeccompFilter();

}  // namespace gshare
