// Scheduler: a policy that turns events into Executor actions.
//
// Every policy (gshare, keepalive, faaswap, ...) implements this interface over the same events
// and actions, so comparisons are fair: same trace, same GPUs, same profiles, same accounting.
// Time comes only from the executor's clock. Callbacks run one at a time (never concurrently),
// and a scheduler may call executor actions from inside any callback.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/model/function_spec.h"
#include "gshare/model/gpu_type.h"
#include "gshare/model/request.h"
#include "gshare/sched/executor.h"

namespace gshare {

// What a scheduler is given at construction. The pointed-to objects outlive the scheduler.
struct SchedulerContext {
  const std::vector<ResolvedFunction>* functions = nullptr;  // indexed by FunctionId
  const GpuType* gpu = nullptr;                              // the type of every GPU
  Executor* executor = nullptr;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  virtual std::string_view name() const = 0;

  // A request arrived (now == request.arrival). The scheduler owns its fate: it must eventually
  // run it (requests are never dropped).
  virtual void OnRequest(const Request& request) = 0;
  // A GPU acquired with a startup delay is ready.
  virtual void OnGpuReady(GpuId gpu) = 0;
  // The function's model is on the GPU.
  virtual void OnRestoreDone(GpuId gpu, FunctionId function) = 0;
  // A batch finished; its requests are complete now.
  virtual void OnRunDone(GpuId gpu, FunctionId function, std::span<const RequestId> batch) = 0;
  // A kCheckpoint eviction finished; the memory is free.
  virtual void OnEvictDone(GpuId /*gpu*/, FunctionId /*function*/) {}
  // A timer set with Executor::SetTimer fired.
  virtual void OnTimer(std::uint64_t token) = 0;
};

}  // namespace gshare
