// ProcessSpec: what the node needs to start one function instance as a child process. The node
// fills it from the function spec; this folder never reads a FunctionSpec.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gshare/node/process/sandbox.h"

namespace gshare {

// A uid/gid the child switches to (setgroups({}), setgid, setuid) before exec. Only root can.
struct ProcessIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
};

// setrlimit values applied in the child. Core dumps are always off (RLIMIT_CORE 0): a dump would
// hold the function's memory outside its sandbox. No address-space limit: device memory is memfd
// segments mapped at fixed, reserved addresses and CUDA reserves large virtual ranges, so
// RLIMIT_AS would refuse those mappings; memory is bounded by a cgroup where one is delegated.
struct ProcessLimits {
  std::uint64_t open_files = 1024;  // RLIMIT_NOFILE
};

struct ProcessSpec {
  std::vector<std::string> argv;                         // argv[0] is the program path
  std::vector<std::pair<std::string, std::string>> env;  // the child's whole environment
  std::string working_dir;                               // empty: the node's own
  std::string log_path;  // stdout and stderr appended here; opened by the node, so the child
                         // needs no access to the file by name
  std::optional<ProcessIdentity> identity;  // absent: the node's own uid (same-uid fallback)
  ProcessLimits limits;
  std::string cgroup_procs_path;  // an InstanceCgroup's cgroup.procs; empty: no cgroup
  // Descriptors of the node the child receives, as 3, 4, ... in this order (open across its exec;
  // the node keeps its own copies). Every other descriptor is closed at exec.
  std::vector<int> pass_fds;
  // Starts the process as the init of a PID namespace of its own, where the kernel allows it
  // (ChildProcess): nothing it starts outlives it.
  bool pid_namespace = false;
  // gshare-init (init_protocol.h), the program's first process where set: it reaps what the
  // program leaves and ends it with the program (ChildProcess). Empty: the program runs itself.
  std::string init_program;
  // Runs the process in a sandbox (sandbox.h): cloned into namespaces of its own (PID included,
  // whatever pid_namespace says), its view of the files built before the drop to `identity`, the
  // seccomp filter set just before exec. Spawn fails rather than start it without them.
  std::optional<SandboxSpec> sandbox;
};

}  // namespace gshare
