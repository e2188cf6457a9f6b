// Executor: the actions a scheduler can take, carried out by one of two worlds.
//
// The simulator's executor (sim/) models GPUs as discrete events; the live node's executor
// (node/) drives real or emulated devices and function processes. A scheduler never knows which
// one it talks to. docs/architecture.md walks through the lifecycles below.
//
// Objects:
//  - a GPU is acquired (AcquireGpu, which may be refused), becomes ready, and is released or lost;
//    each GPU has its own type (TypeOf), one of gpu_types();
//  - a slice is GPU memory bound to one function on one GPU: Restore creates it (memory reserved
//    now, model bytes copied in), Resize changes it, Evict removes it;
//  - an instance is a function's process. A slice binds one instance; the executor binds an idle
//    warm instance, or starts one (its cold start delays the restore) while the function is below
//    its max_instances, and stops instances idle for its keep time, down to min_instances. A
//    second slice of a function on another GPU is a second instance (a replica). Instances(f)
//    tells a policy what it needs to predict and to stay within the bound.
//
// Failures come back as events with a Status (scheduler.h): a restore that fails, a run that
// fails, an instance that dies, a GPU that is lost. Every action's completion is an event, never
// a call back from inside the action.
//
// Preconditions (a call that breaks one is a scheduler bug: the executor records it and the run
// fails with an Internal status naming the call): the GPU id was returned by AcquireGpu, is ready,
// and was neither released nor lost; the function id is in the registry.
//
// Threading: every call is made from the scheduler's event loop, one at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/model/gpu_type.h"
#include "gshare/model/request.h"

namespace gshare {

using GpuTypeId = std::uint32_t;  // index into Executor::gpu_types()

// How a slice leaves a GPU. A hint: the executor keeps a write generation per host snapshot and
// decides whether the device copy must be copied back.
enum class EvictHint : std::uint8_t {
  // Fast swap: free the memory at once when the host snapshot still holds what the device holds;
  // copy it back first only when the function wrote device state since its last snapshot.
  kDiscardIfClean,
  // Always copy the device state back to the host first (no fast swap).
  kCheckpoint,
};

// What Evict did.
enum class EvictOutcome : std::uint8_t {
  kDiscarded,  // the memory is free now; no event fires
  kCopying,    // the state is being copied back; OnEvictDone fires when the memory is free
};

// A function's instances (processes) as the executor sees them now.
struct InstanceView {
  int bound = 0;          // instances bound to a slice (restoring, resident or evicting)
  int idle = 0;           // warm instances without a slice: a restore binds one at no cost
  int max_instances = 0;  // the function's bound on bound + idle; 0: no bound
  Duration cold_start{};  // time to start an instance, paid by a restore that finds none idle

  // Whether a new slice can get an instance (idle, or a new one within the bound).
  bool CanBind() const { return idle > 0 || max_instances == 0 || bound + idle < max_instances; }
  // What a new slice waits for before its copy can start: nothing, or a cold start.
  Duration BindDelay() const { return idle > 0 ? Duration::zero() : cold_start; }
};

class Executor {
 public:
  virtual ~Executor() = default;

  // The executor's clock: simulated or steady.
  virtual TimePoint Now() const = 0;

  // The kinds of GPU this world can hand out, by GpuTypeId; never empty. The first is the
  // default.
  virtual std::span<const GpuType> gpu_types() const = 0;
  // The type of a GPU that AcquireGpu returned (valid until it is released or lost).
  virtual const GpuType& TypeOf(GpuId gpu) const = 0;

  // A new GPU of `type`, counted as held from now. ResourceExhausted when none can be had (the
  // node has no free GPU, the cluster is at its cap); the caller keeps its requests and may try
  // again later. With a zero `startup` it is usable at once and no event fires; otherwise it
  // accepts actions after `startup` (a VM or container start), when Scheduler::OnGpuReady fires.
  virtual Result<GpuId> AcquireGpu(GpuTypeId type, Duration startup) = 0;
  // Gives the GPU back. Precondition: no slice on it.
  virtual void ReleaseGpu(GpuId gpu) = 0;

  // Creates a slice of `function` on the GPU: reserves `reserve_bytes` (>= its GPU memory) now,
  // binds an instance, and queues a copy of its model on the GPU's host-to-device copy engine
  // (FIFO). OnRestoreDone fires when the model is on the GPU or the restore failed (the slice is
  // then gone and its memory free). Preconditions: the reservation fits in free memory; the
  // function has no slice on this GPU; Instances(function).CanBind().
  virtual void Restore(GpuId gpu, FunctionId function, std::uint64_t reserve_bytes) = 0;
  // Removes the function's slice from the GPU and unbinds its instance, as `hint` asks and the
  // snapshot allows (EvictHint). Precondition: the slice is resident (restore done) and idle.
  virtual EvictOutcome Evict(GpuId gpu, FunctionId function, EvictHint hint) = 0;

  // Changes the slice's memory to `new_bytes`, at once: an elastic slice grows or shrinks in
  // place. Where slices occupy contiguous ranges (the simulator's fragmentation model) a slice
  // that cannot grow in place moves to a free range that holds it (a copy on the GPU's memory,
  // which delays its next run), and growth is refused when no free range holds it: then it
  // returns false and changes nothing. Shrinking always succeeds. Preconditions: the slice is
  // resident; `new_bytes` is at least the function's GPU memory and what its runs in flight
  // need; growth fits in free memory.
  [[nodiscard]] virtual bool Resize(GpuId gpu, FunctionId function, std::uint64_t new_bytes) = 0;

  // The largest contiguous free range of the GPU's memory, where slices occupy contiguous ranges
  // (the simulator's fragmentation model: a Restore or a growth that no free range holds fails
  // although the memory is free in total); UINT64_MAX where memory is mapped in pages, so that
  // any free memory holds a slice (the live node). Precondition: the GPU is held.
  virtual std::uint64_t LargestFreeRange(GpuId gpu) const {
    (void)gpu;
    return UINT64_MAX;
  }
  // The largest contiguous free range there would be if the resident slices of `released` were
  // gone (UINT64_MAX where memory is mapped in pages): lets a policy check that evicting them
  // makes room before it evicts anything. Precondition: the GPU is held.
  virtual std::uint64_t LargestFreeRangeWithout(GpuId gpu,
                                                std::span<const FunctionId> released) const {
    (void)gpu;
    (void)released;
    return UINT64_MAX;
  }

  // Runs a batch of requests of `function` on its slice; the GPU's compute is time-sliced among
  // the runs in flight. OnRunDone fires with the same batch when it ends: with an OK status the
  // requests are answered; otherwise they are back in the scheduler's hands. Preconditions: the
  // slice is resident, holds the batch (MemoryForBatch), and the batch is non-empty.
  virtual void Run(GpuId gpu, FunctionId function, std::span<const RequestId> batch) = 0;

  // Pipelined loading (FaaSwap): whether RunPipelined can overlap a run with its slice's restore.
  // The simulator's executor can; the live node cannot (a function process loads its model whole).
  virtual bool pipelines_loading() const { return false; }
  // Runs a batch on a slice whose restore is in flight, its layers executing as their bytes
  // arrive: the model is copied in kPipelineGroups equal groups and a group runs once its bytes
  // are on the GPU, so a run alone on the GPU ends max(load, exec) + min(load, exec) /
  // kPipelineGroups after the copy starts. OnRestoreDone fires first, then OnRunDone. Preconditions
  // as Run, except that the slice's restore is in flight; pipelines_loading().
  static constexpr int kPipelineGroups = 10;
  virtual void RunPipelined(GpuId gpu, FunctionId function, std::span<const RequestId> batch) {
    (void)gpu;
    (void)function;
    (void)batch;
  }

  // Answers a request that the scheduler gives up on with `status` (not OK): the function was
  // removed, no GPU could be had, it failed too often. A request is answered once: by a run that
  // ended OK, or here. Precondition: the request arrived and is not answered yet.
  virtual void FailRequest(RequestId request, const Status& status) = 0;

  // The function's instances now (see InstanceView).
  virtual InstanceView Instances(FunctionId function) const = 0;

  // Fires Scheduler::OnTimer(token) at `at` (now, if `at` is in the past).
  virtual void SetTimer(TimePoint at, std::uint64_t token) = 0;
};

// A GPU of the first type in gpu_types() with at least `min_memory_bytes` that the executor
// grants, trying them in order; the last refusal when none is, ResourceExhausted when no type is
// large enough.
inline Result<GpuId> AcquireFirstAvailable(Executor& executor, Duration startup,
                                           std::uint64_t min_memory_bytes) {
  const std::span<const GpuType> types = executor.gpu_types();
  Result<GpuId> gpu = ResourceExhausted("no GPU type has the " + std::to_string(min_memory_bytes) +
                                        " bytes of memory needed");
  for (GpuTypeId type = 0; type < types.size(); ++type) {
    if (types[type].memory_bytes < min_memory_bytes) continue;
    gpu = executor.AcquireGpu(type, startup);
    if (gpu.ok()) break;
  }
  return gpu;
}

}  // namespace gshare
