// CheckpointApiSwitch: the SwitchDriver (switch_driver.h) for an unmodified CUDA process, through
// the NVIDIA driver's process checkpoint API (device/cuda/cuda_checkpoint.h) on its pid.
//
// The process makes its own CUDA context on the GPU the node gave it and never knows it moves:
//  - Attach records the slice and its GPU; the process is already there: resident at once;
//  - Checkpoint locks the process (its work in flight ends, its next CUDA call blocks), then has
//    the driver move its device memory into the process's own host memory and release its GPU.
//    It is always a full checkpoint: the driver keeps no clean copy, so `force_copy` changes
//    nothing. Afterwards the caller may free the slice's buffer, which is only the node's
//    accounting of the memory the process holds (the driver never touches it);
//  - Restore has the driver bring the memory back, onto the GPU of the new slice's buffer (a GPU
//    pair, old UUID -> new UUID, when it differs from the GPU the process was on), then unlocks.
// Compute is shared by the GPU's own time slicing between contexts: the arbiter is not used.
// Quotas are recorded, not enforced: nothing stands between an unmodified process and its driver.
//
// Cost: the driver calls block for up to seconds (restore plus unlock has been reported at 8.6 s
// for a small model), so they run on `context.workers`, never on the loop, and the switch is the
// node's migration path, not its per-request one. Transfers report times only: the bytes moved are
// the driver's and unknown here (TransferReport::bytes is 0); last_timings() splits them by call.
//
// Failures:
//  - A lock that runs out of time: unlock is attempted, the process stays resident (it was never
//    locked), and the checkpoint fails with DeadlineExceeded.
//  - An API the driver refuses (CUDA_ERROR_NOT_SUPPORTED, as under a sandbox runtime without
//    support for it): the checkpoint fails with FailedPrecondition naming it; the process stays
//    resident.
//  - Any other failed lock or checkpoint: unlock is attempted; the process stays resident when it
//    runs again (unlocked, or found running by a state query); otherwise the switch fails.
//  - A failed restore (out of device memory, say) or unlock after it: the process's state is
//    queried and the switch fails; the restore completes with Unavailable naming the call that
//    failed, the driver's error and the state the process was left in. A process left
//    checkpointed cannot run, and a restore that ran out of memory has been reported to fail
//    every later attempt: the caller must kill the process and start another instance.
//  - Close during an operation: the driver call in flight finishes (it cannot be interrupted),
//    then the operation completes with Unavailable; the process is left as that call left it
//    (possibly locked or checkpointed): the caller kills it.
// There is no channel to the process: its death is the process host's to see.
//
// Threading: every method on `context.loop`; the driver calls on `context.workers`. Created
// through Create as a shared_ptr: calls in flight keep it alive.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gshare/common/clock.h"
#include "gshare/device/cuda/cuda_checkpoint.h"
#include "gshare/node/switch/switch_driver.h"

namespace gshare {

struct CheckpointApiSwitchContext {
  boost::asio::io_context& loop;
  boost::asio::thread_pool& workers;  // where the driver's blocking calls run
  ProcessCheckpointApi& api;          // must outlive every switch
  const Clock& clock;                 // times the calls
};

struct CheckpointApiSwitchOptions {
  // How long a checkpoint waits for the process's work in flight to end (0: no limit).
  std::chrono::milliseconds lock_timeout{10'000};
  // Take slices of emulated GPUs as if they were CUDA GPUs' (their UUIDs' bytes name them): for
  // tests that drive a scripted API through a node of emulated GPUs. Never set by the node.
  bool accept_emulated_gpus = false;
};

// The last operation's driver calls, each from call to return (zero: not made).
// In the message of a checkpoint that the driver refused because it does not allow the API here
// (a sandbox runtime): the process was never touched and stays resident.
inline constexpr std::string_view kCheckpointApiRefused =
    "the process checkpoint API is not supported here";

struct CheckpointApiTimings {
  Duration lock{};
  Duration checkpoint{};
  Duration restore{};
  Duration unlock{};
  Duration state_query{};
};

class CheckpointApiSwitch final : public SwitchDriver,
                                  public std::enable_shared_from_this<CheckpointApiSwitch> {
 public:
  // `name` names the instance in messages; `pid` is its process's.
  static std::shared_ptr<CheckpointApiSwitch> Create(CheckpointApiSwitchContext context,
                                                     std::string name, int pid,
                                                     CheckpointApiSwitchOptions options = {});

  // `buffer` must be a CUDA GPU's (its device's UUID "GPU-..."): the GPU the process runs on.
  void Attach(DeviceBuffer& buffer, std::uint64_t quota_bytes, ComputeArbiter* gpu,
              Done done) override;
  // `force_copy` is ignored: every checkpoint is a full one.
  void Checkpoint(bool force_copy, Done done) override;
  // `buffer` may be on any CUDA GPU of the same chip type (another than the last needs driver
  // R580); `quota_bytes` <= its size.
  void Restore(DeviceBuffer& buffer, std::uint64_t quota_bytes, ComputeArbiter* gpu,
               Done done) override;
  // Recorded only (see above).
  void SetQuota(std::uint64_t quota_bytes) override;
  void Close() override;
  bool uses_buffer() const override { return buffer_ != nullptr; }

  SwitchState state() const override { return state_; }
  std::int64_t pid() const override { return pid_; }
  // Their `elapsed` is the driver's calls' (lock and checkpoint; restore and unlock), without the
  // waits for a worker thread; `bytes` is 0: the driver does not say what it moved.
  const TransferReport& last_checkpoint() const override { return last_checkpoint_; }
  const TransferReport& last_restore() const override { return last_restore_; }
  std::uint64_t quota_exceeded_count() const override { return 0; }

  std::uint64_t quota_bytes() const { return quota_bytes_; }
  // The driver calls of the last operation (checkpoint or restore, with the calls of its
  // recovery when it failed).
  const CheckpointApiTimings& last_timings() const { return timings_; }

 private:
  CheckpointApiSwitch(CheckpointApiSwitchContext context, std::string name, int pid,
                      CheckpointApiSwitchOptions options);

  // Runs `call` on a worker, then `then` on the loop with its result and duration, unless the
  // switch failed meanwhile (then the pending operation completes with the failure).
  template <typename Call, typename Then>
  void OnWorker(Call call, Then then);
  // OK when the switch is in `expected` with no operation pending; otherwise why `operation` is
  // refused.
  Status CheckState(SwitchState expected, std::string_view operation) const;
  // Posts `refused` to `done` when it is an error (false); otherwise makes `done` the pending
  // operation's and starts its timings (true).
  bool Begin(const Status& refused, Done& done);
  // The UUID of the slice's GPU, when the buffer and quota fit.
  Result<GpuUuidBytes> CheckBuffer(const DeviceBuffer& buffer, std::uint64_t quota_bytes) const;
  // Attach's and Restore's start: in `expected`, with a buffer and quota that fit, it begins the
  // operation (Begin), takes the buffer and quota on and returns the slice's GPU; otherwise it
  // posts why to `done` and returns nullopt.
  std::optional<GpuUuidBytes> BeginWithSlice(SwitchState expected, std::string_view operation,
                                             DeviceBuffer& buffer, std::uint64_t quota_bytes,
                                             Done& done);
  void OnLocked(Status locked);
  void OnCheckpointed(Status checkpointed);
  void OnRestored(Status restored);
  void OnRestoreUnlocked(Status unlocked);
  // After a failed lock or checkpoint: unlock, and stay resident if the process runs again.
  void Recover(Status error);
  // Queries the process's state, then fails the switch with `error` and that state.
  void FailWithState(Status error);
  // Fails the switch; `why` names the instance (Context).
  void Fail(Status why);
  // "instance-7 (pid 4242): restore".
  std::string Context(std::string_view operation) const;
  void Complete(Status status);

  CheckpointApiSwitchContext context_;
  const std::string name_;
  const std::int64_t pid_;
  const CheckpointApiSwitchOptions options_;

  SwitchState state_ = SwitchState::kStarting;
  bool closed_ = false;
  bool call_in_flight_ = false;
  DeviceBuffer* buffer_ = nullptr;  // the slice (borrowed) while the switch may use it
  std::uint64_t quota_bytes_ = 0;
  GpuUuidBytes gpu_{};     // the GPU the process is on, or was on when checkpointed
  GpuUuidBytes target_{};  // a restore's GPU
  Done pending_;
  Status failure_;
  TransferReport last_checkpoint_;
  TransferReport last_restore_;
  CheckpointApiTimings timings_;
};

}  // namespace gshare
