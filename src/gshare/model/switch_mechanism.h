// SwitchMechanism: how a live node moves one function's instances between host memory and a GPU
// (a function spec's `switch:`; node/switch/switch_factory.h makes the driver for each).
//
//   shim        the node's slice memory is the function's device memory, handed over its control
//               channel: on emulated GPUs the function library maps it; on CUDA GPUs the
//               allocator shim preloaded into the function's program does. The default.
//   checkpoint  the NVIDIA driver's process checkpoint API on the function's pid: an unmodified
//               CUDA program, no preload (CUDA GPUs only).
#pragma once

#include <fmt/format.h>

#include <string_view>

#include "gshare/common/status.h"

namespace gshare {

enum class SwitchMechanism { kShim, kCheckpoint };

inline std::string_view SwitchMechanismName(SwitchMechanism mechanism) {
  return mechanism == SwitchMechanism::kShim ? "shim" : "checkpoint";
}

inline Result<SwitchMechanism> ParseSwitchMechanism(std::string_view text) {
  if (text == "shim") return SwitchMechanism::kShim;
  if (text == "checkpoint") return SwitchMechanism::kCheckpoint;
  return InvalidArgument(
      fmt::format("unknown switch mechanism '{}' (use shim or checkpoint)", text));
}

}  // namespace gshare
