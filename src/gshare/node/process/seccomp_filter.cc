#include "gshare/node/process/seccomp_filter.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <cstddef>
#include <cstdint>

namespace gshare {
namespace {

#if defined(__x86_64__)
constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
constexpr std::uint32_t kArch = 0;
#endif

// Namespace flags clone may not carry (CLONE_NEWTIME shares its bit with the exit signal in
// clone's flags, and only clone3 and unshare take it: both refused whole).
constexpr std::uint32_t kCloneNamespaceFlags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
                                               CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
                                               CLONE_NEWCGROUP;

constexpr std::uint32_t kNumber = offsetof(seccomp_data, nr);
constexpr std::uint32_t kArchitecture = offsetof(seccomp_data, arch);
// The low half of the first argument (little-endian on both architectures).
constexpr std::uint32_t kFirstArgument = offsetof(seccomp_data, args);

sock_filter Statement(std::uint16_t code, std::uint32_t k) { return {code, 0, 0, k}; }
sock_filter Jump(std::uint16_t code, std::uint32_t k, std::uint8_t jt, std::uint8_t jf) {
  return {code, jt, jf, k};
}

constexpr std::uint32_t Errno(int error) {
  return SECCOMP_RET_ERRNO | (static_cast<std::uint32_t>(error) & SECCOMP_RET_DATA);
}

// Refused with EPERM whole (those this build's headers know).
constexpr long kRefused[] = {
    SYS_ptrace,
    SYS_process_vm_readv,
    SYS_process_vm_writev,
    SYS_kcmp,
    SYS_mount,
    SYS_umount2,
    SYS_pivot_root,
    SYS_chroot,
    SYS_unshare,
    SYS_setns,
    SYS_bpf,
    SYS_perf_event_open,
    SYS_userfaultfd,
    SYS_keyctl,
    SYS_add_key,
    SYS_request_key,
    SYS_init_module,
    SYS_finit_module,
    SYS_delete_module,
    SYS_kexec_load,
    SYS_reboot,
    SYS_swapon,
    SYS_swapoff,
    SYS_syslog,
    SYS_acct,
    SYS_quotactl,
    SYS_open_by_handle_at,
#ifdef SYS_kexec_file_load
    SYS_kexec_file_load,
#endif
#ifdef SYS_io_uring_setup
    SYS_io_uring_setup,
    SYS_io_uring_enter,
    SYS_io_uring_register,
#endif
#ifdef SYS_open_tree
    SYS_open_tree,
    SYS_move_mount,
    SYS_fsopen,
    SYS_fsconfig,
    SYS_fsmount,
    SYS_fspick,
#endif
#ifdef SYS_mount_setattr
    SYS_mount_setattr,
#endif
#ifdef SYS_quotactl_fd
    SYS_quotactl_fd,
#endif
};

}  // namespace

Result<std::vector<sock_filter>> SandboxSeccompFilter() {
  if (kArch == 0) {
    return FailedPrecondition("the sandbox's seccomp filter knows x86_64 and aarch64 only");
  }
  std::vector<sock_filter> program;
  // Another architecture's entry point: killed.
  program.push_back(Statement(BPF_LD | BPF_W | BPF_ABS, kArchitecture));
  program.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0));
  program.push_back(Statement(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  program.push_back(Statement(BPF_LD | BPF_W | BPF_ABS, kNumber));
#if defined(__x86_64__)
  // x32 numbers (the same calls with bit 30 set).
  program.push_back(Jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
  program.push_back(Statement(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#endif
  for (const long number : kRefused) {
    program.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(number), 0, 1));
    program.push_back(Statement(BPF_RET | BPF_K, Errno(EPERM)));
  }
#ifdef SYS_clone3
  program.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1));
  program.push_back(Statement(BPF_RET | BPF_K, Errno(ENOSYS)));
#endif
  // clone: its flags are its first argument.
  program.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4));
  program.push_back(Statement(BPF_LD | BPF_W | BPF_ABS, kFirstArgument));
  program.push_back(Jump(BPF_JMP | BPF_JSET | BPF_K, kCloneNamespaceFlags, 0, 1));
  program.push_back(Statement(BPF_RET | BPF_K, Errno(EPERM)));
  program.push_back(Statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  // socket: its family is its first argument.
  program.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 4));
  program.push_back(Statement(BPF_LD | BPF_W | BPF_ABS, kFirstArgument));
  program.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 1, 0));
  program.push_back(Statement(BPF_RET | BPF_K, Errno(EAFNOSUPPORT)));
  program.push_back(Statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  program.push_back(Statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  return program;
}

}  // namespace gshare
