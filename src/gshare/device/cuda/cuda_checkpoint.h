// The NVIDIA driver's process checkpoint API, as gshare uses it: another process's GPU state moved
// into its host memory and back, with no change to that process.
//
// The driver (R570 and later) checkpoints an unmodified CUDA process by its pid: Lock waits for
// its work in flight and blocks its further CUDA calls; Checkpoint moves its device memory into
// its own host memory and releases its GPU (device memory, contexts); Restore brings it back,
// onto the same GPU or, given GPU pairs (driver R580 and later; a GPU of the same chip type),
// onto another; Unlock lets it run again. States: running -> locked -> checkpointed -> locked ->
// running; a process the driver cannot bring back is left failed (or checkpointed: see Restore).
//
// This header has no CUDA types, so the node's switch drivers and their tests use it on any build;
// only the implementation sees the driver. Where gshare was built without CUDA,
// OpenProcessCheckpointApi returns Unavailable ("built without CUDA").
//
// Errors: a driver error is a Status naming the call, the pid and the driver's error name and
// string ("cuCheckpointProcessRestore (pid 4242): CUDA_ERROR_OUT_OF_MEMORY (out of memory)").
// Codes: out of memory ResourceExhausted; a lock that ran out of time DeadlineExceeded; a process
// in the wrong state (CUDA_ERROR_ILLEGAL_STATE) FailedPrecondition; an API the driver refuses here
// (CUDA_ERROR_NOT_SUPPORTED, as under a sandbox runtime without support for it, such as gVisor)
// Unavailable; an invalid pid or one with no CUDA state InvalidArgument; anything else Internal.
//
// Threading: every call blocks, for up to seconds (a state query of a process holding 2 GiB has
// been reported at 0.4-7 s): keep them off event loops. Methods may be called from any thread,
// for different processes at once.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gshare/common/status.h"
#include "gshare/device/gpu_uuid.h"

namespace gshare {

enum class ProcessCheckpointState { kRunning, kLocked, kCheckpointed, kFailed };
std::string_view ProcessCheckpointStateName(ProcessCheckpointState state);  // "running", ...

// Restore remapping: the process's memory on GPU `from` comes back on GPU `to`.
struct GpuPair {
  GpuUuidBytes from{};
  GpuUuidBytes to{};
};

class ProcessCheckpointApi {
 public:
  virtual ~ProcessCheckpointApi() = default;

  // Running -> locked, once the process's work in flight is done. `timeout` bounds the wait (0:
  // none); when it runs out (DeadlineExceeded) the process is left running.
  virtual Status Lock(int pid, std::chrono::milliseconds timeout) = 0;
  // Locked -> checkpointed: its device memory into its host memory, its GPU released.
  virtual Status Checkpoint(int pid) = 0;
  // Checkpointed -> locked. `pairs` empty: onto the GPUs it was on; otherwise it must name every
  // GPU it was on. A failed restore may leave the process checkpointed for good (a restore that
  // ran out of device memory has been reported to fail every later attempt): query its state.
  virtual Status Restore(int pid, std::span<const GpuPair> pairs) = 0;
  // Locked -> running.
  virtual Status Unlock(int pid) = 0;
  virtual Result<ProcessCheckpointState> GetState(int pid) = 0;
};

// The driver's API, its entry points resolved at run time (libcuda is never linked). Unavailable,
// saying why, where gshare was built without CUDA, where there is no NVIDIA driver, where the
// driver cannot initialize, or where the driver lacks the API (older than R570).
Result<std::unique_ptr<ProcessCheckpointApi>> OpenProcessCheckpointApi();

// One line for people (`gshare node info`, the GPU check): "supported (...)",
// "unsupported: <why>", or "unknown: <why>" when the driver does not answer within 5 s. Opens the
// API and asks the driver for this process's own state (on a thread of its own, waited for a
// bounded time), which is how a driver that exports the API but refuses it here (a sandbox
// runtime) shows.
std::string ProbeProcessCheckpointApi();

}  // namespace gshare
