// The environment a function instance starts with, the same for every program the node starts
// (ProcessHost, gshare bench function): what the node sets, then the command's own variables, and
// nothing else of the node's environment. The node sets
//   PATH                     /usr/local/bin:/usr/bin:/bin
//   GSHARE_CONTROL_FD        3: the instance's end of its control channel (fn/control_channel.h)
//   GSHARE_DEVICE_BASE       where its device memory is mapped, and
//   GSHARE_DEVICE_RESERVE    the size of that range (fn/runtime.h)
//   GSHARE_SOCKET            the Unix socket it serves the function protocol on (when it has one)
//   OPENBLAS_NUM_THREADS     1: its compute runs on the core it is given
// A command's variable may not override these (the spec parser refuses names that start with
// GSHARE_; a later PATH or OPENBLAS_NUM_THREADS of the command's wins).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gshare {

struct InstanceChannel {
  // Whether the instance has a control channel (the function library, the CUDA shim); without
  // one (the driver's checkpoint API switches it) neither it nor the device range is set.
  bool control = true;
  std::uintptr_t device_base = 0;
  std::uint64_t device_reserve_bytes = 0;
  std::string socket_path;  // empty: none is set
};

std::vector<std::pair<std::string, std::string>> InstanceEnvironment(
    const InstanceChannel& channel, const std::map<std::string, std::string>& command_env);

}  // namespace gshare
