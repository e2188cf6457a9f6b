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
//   restore     copy the snapshot onto the other GPU while the function maps it back at the same
//               addresses, then unlock; with its steps (ChannelSwitch's RestoreSteps): the copy
//               (from its start on the loop to its last piece's end on a copy stream, the
//               hand-off to the streams included), the map round trip (overlapping the copy),
//               the hand-off (the loop's own work before the copy starts, and the copy's end
//               back to the loop), and the fixed cost, the restore minus its copy;
//   raw         the image's bytes copied by the best raw method of this machine in this run: one
//               memcpy (paced as the link is), and where the host reaches the device memory
//               (unpaced emulated GPUs) memcpy and the copy engine's routine on as many threads as
//               the restore engine has streams, else the device's own copy streams (2, the
//               engine's count and twice it) each copying one part (docs/node.md, "bench
//               restore"): what a restore cannot beat;
//   wake        the median time from a post on another thread to the event loop running it, in
//               the same run: the floor of a hand-off between threads on this machine;
//   outputs_identical  whether an inference after the last restore (onto another GPU than the
//               first) answers exactly the bytes it answered before the first checkpoint.
// Checkpoints and restores are timed on the node's event loop, from the call to the completion
// callback, as the live executor sees them. Figures are medians over `repetitions` rounds (at
// least 11), after one untimed round, with quartiles as the spread; times on the steady clock. A
// function that answers differently after its restore is in the result, not an error.
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

// A median with its quartiles, in milliseconds.
struct MsSpread {
  double median = 0;
  double q1 = 0;
  double q3 = 0;
};

struct SwitchResult {
  std::string function;
  std::uint64_t model_bytes = 0;
  MsSpread checkpoint;
  MsSpread restore;
  // The restore's steps (medians): the copy, the map round trip that overlaps it, the hand-off
  // (the loop's work before the copy, the copy's end back to the loop), and the fixed cost (each
  // round's restore minus its copy).
  MsSpread copy;
  double map_ms = 0;
  double handoff_ms = 0;
  MsSpread fixed;
  double wake_ms = 0;      // a post from another thread to the loop (median)
  double raw_ms = 0;       // the best raw method's median
  std::string raw_method;  // which one
  bool outputs_identical = false;
};

// One result per example function: mlp, cnn, echo.
Result<std::vector<SwitchResult>> RunSwitchBench(const SwitchBenchOptions& options);

}  // namespace gshare::measure
