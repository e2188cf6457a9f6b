// FunctionBench: one function process, switched out and back by a switch driver, timed, with the
// GPU memory the driver reports and the function's answers compared (docs/live-node.md, "bench
// function"). `gshare bench function` is its command line.
//
// The program is started as a function process: its socket in GSHARE_SOCKET, its control channel
// and device range in GSHARE_CONTROL_FD, GSHARE_DEVICE_BASE and GSHARE_DEVICE_RESERVE, on GPU 0 of
// a live node of its own, with `environment` less what the node sets itself.
//   shim        (CUDA) with LD_PRELOAD of the CUDA shim: the function runs unmodified; the node
//               gives it a slice of `slice_bytes` and the shim keeps its allocations there;
//               checkpoint and restore move the bytes in use through the node's restore engine.
//               (Emulated GPUs: the program links the function library itself, as gshare-function
//               does, and nothing is preloaded.)
//   checkpoint  (CUDA) the driver's process checkpoint API on the function's pid.
// Once the function answers ready, one inference is the reference; then `repetitions` rounds each
// checkpoint (forced, timed from the call to its completion), free the slice and let the device
// return cached memory to the driver, read the driver's free memory, restore onto a new slice
// (timed), checkpoint again at once (not forced: the fast swap of an unchanged image, timed),
// restore onto the same slice (untimed) and infer again: the answer must be exactly the
// reference's. Then `requests` inferences are timed one
// after another, each answer again the reference's. Times are on the node's steady clock; every
// wait is bounded by `ready_timeout`.
//
// Threading: RunFunctionBench runs on the calling thread; the node's loop on a thread of its own.
// Failures are in the report (status "fail" and why), not errors: a report is always returned.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gshare/device/device_registry.h"
#include "gshare/node/switch/switch_factory.h"

namespace gshare::measure {

struct FunctionBenchOptions {
  DeviceOptions devices;
  SwitchMechanism mechanism = SwitchMechanism::kShim;
  std::string model;                      // the model name the function serves
  std::vector<std::int64_t> input_shape;  // the FP32 input's; empty: the model's metadata
  std::uint64_t slice_bytes = 4 * kGiB;   // the function's slice (the shim); at most 64 GiB
  int repetitions = 3;
  // Inferences timed one after another once the rounds are done (the function resident); 0: none.
  int requests = 0;
  // Called (on the calling thread) before each block of `request_block` timed inferences, so that
  // a comparison measured elsewhere alternates with them under the same load; 0: one block.
  int request_block = 0;
  std::function<void()> before_block{};
  std::chrono::seconds ready_timeout{600};
  // On emulated GPUs, let the GPU's segment preparer make slices ahead with the live node's budget
  // and rules (a slice larger than the budget is never prepared; nothing waits for it); false:
  // every slice a fresh segment, whose page faults the restore then pays (a GPU's memory has
  // none).
  bool prepared_slices = true;
  std::vector<std::string> program;                // argv; the program a path
  std::filesystem::path shim_library;              // the CUDA shim, for the shim mechanism on CUDA
  std::map<std::string, std::string> environment;  // the function's, before the node's variables
};

struct FunctionBenchReport {
  std::string function;
  std::string mechanism;
  std::string device;
  std::string status = "fail";  // "pass", "fail" or "unsupported"
  std::string why;              // what failed, or why the mechanism is unsupported
  std::uint64_t slice_bytes = 0;
  std::uint64_t allocated_bytes = 0;
  double checkpoint_ms = 0;  // a full checkpoint (forced: every byte copied)
  // A checkpoint right after a restore, nothing run in between, not forced: the fast swap of an
  // unchanged image (the shim: chunk digests compared on the GPU; an emulated function that froze
  // its image: skipped). Its median, and the most bytes one copied. 0 for the checkpoint API,
  // which copies everything whatever changed: that round is not run for it.
  double fast_swap_ms = 0;
  std::uint64_t fast_swap_copied_bytes = 0;
  std::uint64_t fast_swap_compared_bytes = 0;  // the most whose chunk digests one compared
  double restore_ms = 0;
  // The share of a restore the switch spent moving bytes (the restore engine's copy for the shim,
  // the driver's restore and unlock calls for the checkpoint API); the rest is mapping and the
  // protocol.
  double restore_copy_ms = 0;
  // Handing out the next slice before each restore (untimed in restore_ms): on a CUDA GPU a fresh
  // exportable allocation, mapped and cleared, for exported memory is never reused.
  double slice_alloc_ms = 0;
  int prepared_restores = 0;  // restores whose slice the preparer had made ahead (emulated GPUs)
  double restore_gbps = 0;
  std::uint64_t free_before_start_bytes = 0;
  std::uint64_t free_resident_bytes = 0;
  std::uint64_t free_after_checkpoint_bytes = 0;
  std::uint64_t freed_bytes = 0;
  std::uint64_t context_bytes = 0;
  bool outputs_identical = false;
  int rounds = 0;
  // The `requests` timed inferences: each from the request's send to its answer, on the node's
  // steady clock (the function's socket, no front).
  int requests = 0;
  double infer_p50_ms = 0;
  double infer_p90_ms = 0;
  // The inference that follows each round's restores (after the fast swap's restore), median:
  // a request's time right after the function was handed its memory again (on emulated GPUs its
  // page mappings are made anew and its first touches fault them in).
  double after_restore_infer_ms = 0;
  std::string note;  // what opening the GPUs had to say (a fallback), or empty
};

FunctionBenchReport RunFunctionBench(const FunctionBenchOptions& options);

}  // namespace gshare::measure
