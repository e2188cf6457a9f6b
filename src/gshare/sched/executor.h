// Executor: the actions a scheduler can take, carried out by one of two worlds.
//
// The simulator's executor (sim/) models GPUs as discrete events; the live node's executor
// (node/) drives real or emulated devices. A scheduler never knows which one it talks to.
//
// Contract for every call: the GPU id was returned by AcquireGpu and not yet released; the
// function id indexes the run's function table. A call that breaks a precondition is a scheduler
// bug: the executor records it and the run fails with an Internal status naming the call.
// Completions come back as Scheduler events (scheduler.h), never from inside the call itself.
#pragma once

#include <cstdint>
#include <span>

#include "gshare/common/units.h"
#include "gshare/model/request.h"

namespace gshare {

enum class EvictMode {
  kDiscard,     // the host snapshot is still valid ("fast swap"): free the memory, copy nothing
  kCheckpoint,  // copy the function's state device-to-host first, then free the memory
};

class Executor {
 public:
  virtual ~Executor() = default;

  // The executor's clock: simulated or steady.
  virtual TimePoint Now() const = 0;

  // A new GPU of the run's type. It counts as held from now. With a zero `startup` it is usable
  // at once and no event fires; otherwise it accepts restores and runs after `startup` (an
  // instance or VM start), when Scheduler::OnGpuReady fires.
  virtual GpuId AcquireGpu(Duration startup) = 0;
  // Gives the GPU back. Precondition: no function reserved on it, no copy or run in flight.
  virtual void ReleaseGpu(GpuId gpu) = 0;

  // Reserves `reserve_bytes` (>= the function's GPU memory) of the GPU's memory for `function`
  // now, and queues a copy of its model bytes on the GPU's host-to-device copy engine (FIFO).
  // OnRestoreDone fires when the model is on the GPU. Preconditions: the reservation fits in
  // free memory; the function is not already reserved on this GPU.
  virtual void Restore(GpuId gpu, FunctionId function, std::uint64_t reserve_bytes) = 0;
  // Removes `function` from the GPU. kDiscard frees its memory now and fires nothing;
  // kCheckpoint copies its state to the host and fires OnEvictDone when the memory is free.
  // Precondition: the function is resident (restore done) and not running.
  virtual void Evict(GpuId gpu, FunctionId function, EvictMode mode) = 0;

  // Changes the memory reserved for `function` on the GPU to `new_bytes`, at once: an elastic
  // slice grows or shrinks in place. Preconditions: the function is resident; `new_bytes` is at
  // least its GPU memory and at least what its runs in flight need; growth fits in free memory.
  virtual void Resize(GpuId gpu, FunctionId function, std::uint64_t new_bytes) = 0;

  // Runs a batch of requests of `function` on the GPU; the GPU's compute is time-sliced among
  // the runs in flight. OnRunDone fires with the same batch when it finishes. Preconditions: the
  // function is resident on the GPU, its reservation holds the batch (MemoryForBatch), and the
  // batch is non-empty.
  virtual void Run(GpuId gpu, FunctionId function, std::span<const RequestId> batch) = 0;

  // Fires Scheduler::OnTimer(token) at `at` (now, if `at` is in the past).
  virtual void SetTimer(TimePoint at, std::uint64_t token) = 0;
};

}  // namespace gshare
