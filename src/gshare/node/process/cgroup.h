// cgroup v2 for function instances, where the host delegates the controllers.
//
// DecideCgroups looks at the node's own cgroup v2 directory: the memory and pids controllers must
// be offered there (cgroup.controllers) and enabled for its children (cgroup.subtree_control; the
// node enables them if it can). The node does not move itself: where its cgroup holds processes,
// enabling fails (the kernel's no-internal-processes rule) and the node runs functions without a
// cgroup; running the node in a delegated cgroup of its own (systemd Delegate=yes) fixes that.
// Every "no" comes with one reason line for the log.
//
// InstanceCgroup is one child cgroup per instance (memory.max, pids.max), removed when destroyed
// (what is still in it is killed through cgroup.kill first, where the kernel has it);
// ProcessSpec::cgroup_procs_path points the child at it (the child moves itself in before exec).
// Not thread-safe; file errors are Status values naming the file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gshare/common/status.h"

namespace gshare {

// The mount point of the cgroup v2 hierarchy in /proc/self/mountinfo's text, if mounted.
std::optional<std::string> FindCgroup2Mount(std::string_view mountinfo);
// This process's path in the v2 hierarchy ("0::/path" in /proc/self/cgroup), if any.
std::optional<std::string> OwnCgroup2Path(std::string_view proc_self_cgroup);

struct CgroupDecision {
  bool enabled = false;
  std::string parent_dir;  // where instance cgroups go, when enabled
  std::string reason;      // one line: why enabled or not
};

// Decides for the cgroup directory `node_cgroup_dir` (writes its cgroup.subtree_control when the
// controllers are offered but not yet enabled).
CgroupDecision DecideCgroups(const std::string& node_cgroup_dir);
// The same for this process, from /proc/self/mountinfo and /proc/self/cgroup.
CgroupDecision DecideCgroupsForThisProcess();

struct CgroupLimits {
  std::optional<std::uint64_t> memory_max_bytes;
  std::optional<std::uint64_t> pids_max;
};

class InstanceCgroup {
 public:
  static Result<std::unique_ptr<InstanceCgroup>> Create(const std::string& parent_dir,
                                                        const std::string& name,
                                                        const CgroupLimits& limits);
  ~InstanceCgroup();  // rmdir; the instance's processes must be gone (the kernel refuses otherwise)
  InstanceCgroup(const InstanceCgroup&) = delete;
  InstanceCgroup& operator=(const InstanceCgroup&) = delete;

  const std::string& dir() const { return dir_; }
  std::string procs_path() const { return dir_ + "/cgroup.procs"; }

 private:
  explicit InstanceCgroup(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace gshare
