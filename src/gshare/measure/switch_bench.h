// SwitchBench: switching each example function between host memory and emulated GPUs, against the
// raw copy limit measured in the same run (docs/node.md, "bench switch"). `gshare bench switch` is
// its command line.
//
// For each example function (mlp, cnn, echo), on a live node of two emulated GPUs: the function
// runs in this process on the function library, exactly as a function process does (its device
// memory at a fixed address, its kernels under the node's compute grants); the node side is the
// ChannelSwitch and the restore engine.
//   checkpoint  lock, copy the function's image into its host snapshot (a copy is forced: no fast
//               swap), unmap: from the call to its completion on the node's event loop;
//   restore     copy the snapshot onto the other GPU, map it back at the same addresses, unlock;
//   raw         the image's bytes copied by the best raw method of this machine, timed the same
//               way (docs/node.md, "bench restore"): what a restore cannot beat;
//   outputs_identical  whether an inference after the last restore (onto another GPU than the
//               first) answers exactly the bytes it answered before the first checkpoint.
// Figures are medians over `repetitions` rounds, after one untimed round; times on the steady
// clock. A function that answers differently after its restore is in the result, not an error.
//
// Errors: InvalidArgument for a link bandwidth that does not parse; another code when the node
// or a switch failed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gshare/common/status.h"

namespace gshare::measure {

struct SwitchBenchOptions {
  std::string link_bandwidth = "0";   // the emulated links' pace ("12GB/s"); "0": unpaced
  std::filesystem::path weights_dir;  // mlp.safetensors and cnn.safetensors; seed 1 if empty
  int repetitions = 11;
};

struct SwitchResult {
  std::string function;
  std::uint64_t model_bytes = 0;
  double checkpoint_ms = 0;
  double restore_ms = 0;
  double raw_ms = 0;
  bool outputs_identical = false;
};

// One result per example function: mlp, cnn, echo.
Result<std::vector<SwitchResult>> RunSwitchBench(const SwitchBenchOptions& options);

}  // namespace gshare::measure
