// The sandbox a tenant's function process runs in: namespaces of its own made by the node as root
// (mount, network, IPC, UTS, PID; never a user namespace, whose uid map would make the tenant
// root of it), a root file system built of read-only binds, a private /tmp, no network, no new
// privileges, and a seccomp filter (seccomp_filter.h).
//
// The view inside: a tmpfs root, remounted read-only, holding
//   - the system folders (/usr, /etc, /lib*, /bin, /sbin; a symlink where the host has one) and
//     SandboxSpec::read_only (the runtime's programs, the tenant's model folder, the interpreter),
//     each bound read-only at its own path, without what is mounted below it;
//   - SandboxSpec::writable (the instance's socket folder) bound read-write at its own path;
//   - a fresh /proc of the PID namespace (only the sandbox's processes), /sys/devices/system/cpu
//     read-only (what thread pools read to count cores);
//   - /dev with null, zero, full, random, urandom, /dev/fd, a private /dev/shm (no GPU's device
//     node: CUDA functions are the CUDA-serve issue's); a private /tmp of SandboxSpec::tmp_bytes;
//   - nothing else of the host: not the node's data folder, not another tenant's files, no socket
//     of the host's (the network namespace has only its own loopback, down).
//
// Use: SandboxPlan::Prepare before fork (it allocates, resolves and checks the paths, builds the
// filter); in the child of clone(kSandboxNamespaces), as root, Enter (mounts, pivot_root,
// hostname); after the drop to the tenant's uid, Confine (PR_SET_NO_NEW_PRIVS and the filter),
// immediately before execve. Enter and Confine make only raw system calls (syscall(2): no C
// library function bound lazily in a child of a threaded node) and touch no memory but the
// plan's, which the child only reads.
#pragma once

#include <linux/filter.h>
#include <sched.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gshare/common/status.h"

namespace gshare {

// The namespaces a sandboxed child is cloned into.
inline constexpr int kSandboxNamespaces =
    CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID;

struct SandboxSpec {
  // An empty folder of the node's, owned by root, where the child builds the sandbox's root (a
  // tmpfs mounted there in the child's own mount namespace: the host sees the folder empty).
  std::string root_dir{};
  // Host paths (folders or files) shown at the same path, read-only, besides the system folders.
  std::vector<std::string> read_only{};
  // Host folders shown at the same path, read-write.
  std::vector<std::string> writable{};
  // Host folders that must stay out of view: Prepare refuses a bind of one of them or of a folder
  // above one (the node's data: a shown path inside one is fine).
  std::vector<std::string> hidden{};
  // Character devices of /dev (a GPU's: /dev/nvidia0, /dev/nvidiactl, ...) shown read-write at the
  // same path, besides the harmless ones every sandbox has.
  std::vector<std::string> devices{};
  std::uint64_t tmp_bytes = 256ull << 20;  // the private /tmp's and /dev/shm's size, each
  std::string hostname = "gshare";
};

// The system folders every sandbox shows read-only (those this host has).
std::vector<std::string> SandboxSystemPaths();

class SandboxPlan {
 public:
  // InvalidArgument for a path that is not absolute, is "/", does not exist, or would show a hidden
  // folder; FailedPrecondition on an architecture the filter does not know.
  static Result<SandboxPlan> Prepare(const SandboxSpec& spec);

  // In the child, as root, in its new namespaces: builds the view and pivots into it. 0, or the
  // errno of the failed call with `*step` naming it (StepName).
  int Enter(int* step) const;
  // After the drop to the tenant's uid, just before execve: no new privileges, then the filter.
  // 0 or the errno.
  int Confine() const;

  // What `step` of Enter was, in words.
  static const char* StepName(int step);

 private:
  enum class Kind { kDir, kFile, kSymlink, kBindReadOnly, kBindWritable, kTmpfs, kProc };
  struct Operation {
    Kind kind;
    std::string source;           // a bind's host path, a symlink's text, a tmpfs's options
    std::string target;           // under the root folder
    unsigned long remount_flags;  // a bind's
  };

  SandboxPlan() = default;
  int Build(int* step) const;  // Enter's mounts, before the pivot
  // Whether `path` is shown already by a bind or a symlink of the plan.
  bool Shown(const std::string& path) const;
  void AddParents(const std::string& path);
  void Add(Kind kind, std::string source, const std::string& path);

  std::string root_dir_;
  std::string hostname_;
  std::vector<Operation> operations_;
  std::vector<std::string> made_;  // folders of the tmpfs already in operations_ (Prepare only)
  std::vector<sock_filter> filter_;
};

}  // namespace gshare
