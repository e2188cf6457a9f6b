// Scheduler: a policy that turns events into Executor actions.
//
// Every policy (gshare, keepalive, faaswap, ...) implements this interface over the same events
// and actions, so comparisons are fair: same trace, same GPUs, same profiles, same accounting.
// Time comes only from the executor's clock. Callbacks run one at a time (never concurrently),
// and a scheduler may call executor actions from inside any callback.
//
// A scheduler owns the fate of every request it was given: it runs it (OnRunDone with an OK
// status answers it) or answers it with an error (Executor::FailRequest). It never drops one.
// It keeps state for a request only until the request is answered (RequestsHeld counts it).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "gshare/common/status.h"
#include "gshare/model/request.h"
#include "gshare/sched/executor.h"
#include "gshare/sched/function_registry.h"

namespace gshare {

// What a scheduler is given at construction. The pointed-to objects outlive the scheduler.
struct SchedulerContext {
  const FunctionRegistry* functions = nullptr;  // read on every event; grows at run time
  Executor* executor = nullptr;
};

// How a run ended.
struct RunResult {
  Status status;     // OK: the batch's requests are answered
  Duration elapsed;  // from Run to the end, as the executor observed it (time slicing included)
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  virtual std::string_view name() const = 0;

  // A function was added to the registry (its first request comes after this).
  virtual void OnFunctionAdded(FunctionId function) = 0;
  // A function was removed: no new request of it will come. Its requests not yet running are
  // answered with NotFound by the scheduler; runs in flight finish; its idle slices are evicted
  // (one that is restoring or running when it goes may stay until the policy's usual eviction).
  virtual void OnFunctionRemoved(FunctionId function) = 0;
  // A removed function has nothing left with the executor: no slice, no instance, no request.
  // No event names it again; the scheduler forgets everything it keeps about it (FunctionsHeld
  // falls back), and the owner then frees its registry entry (FunctionRegistry::Forget). The
  // live executor reports it; the simulator never removes functions.
  virtual void OnFunctionDrained(FunctionId function) = 0;

  // A request arrived (now == request.arrival).
  virtual void OnRequest(const Request& request) = 0;
  // The executor cancelled a request the scheduler holds and has not started: its latest start
  // passed (Request::latest_start), or its client withdrew it (the owner asked the executor). It
  // is answered with `status` already; the scheduler forgets it and never runs it (a later Run
  // naming it is a violation). Never for a request in a run in flight. An event of its own
  // (fired by the executor's timer or the owner's call), never from inside an action.
  virtual void OnRequestCancelled(RequestId request, const Status& status) = 0;
  // A GPU acquired with a startup delay is ready.
  virtual void OnGpuReady(GpuId gpu) = 0;
  // The function's restore onto the GPU ended. Not OK: the slice is gone and its memory free.
  virtual void OnRestoreDone(GpuId gpu, FunctionId function, const Status& status) = 0;
  // A batch ended. Not OK: its requests are not answered and are back in the scheduler's hands;
  // the slice is still resident.
  virtual void OnRunDone(GpuId gpu, FunctionId function, std::span<const RequestId> batch,
                         const RunResult& result) = 0;
  // An eviction that copied (EvictOutcome::kCopying) finished; the memory is free. Not OK: the
  // copy failed (the host snapshot keeps its previous state).
  virtual void OnEvictDone(GpuId gpu, FunctionId function, const Status& status) = 0;
  // The instance bound to the function's slice on the GPU died: the slice is gone and its memory
  // free, any restore, run or copy back in flight on it is cancelled (no further event for this
  // slice: no OnRestoreDone, OnRunDone or OnEvictDone), and the requests of its cancelled runs
  // are listed in `lost`, back in the scheduler's hands.
  virtual void OnInstanceDied(GpuId gpu, FunctionId function, std::span<const RequestId> lost,
                              const Status& status) = 0;
  // The GPU is gone with everything on it: it is no longer held, no further event for it fires,
  // and the requests of its runs in flight are listed in `lost`, back in the scheduler's hands.
  virtual void OnGpuLost(GpuId gpu, std::span<const RequestId> lost, const Status& status) = 0;
  // A timer set with Executor::SetTimer fired.
  virtual void OnTimer(std::uint64_t token) = 0;

  // Requests the scheduler holds state for: given to it and not yet answered. Tests check that
  // this falls back to zero, so per-request state cannot grow over a long run.
  virtual std::size_t RequestsHeld() const = 0;
  // Functions the scheduler keeps state for: added and not yet drained. Tests check that it
  // falls back as functions come and go, so per-function state cannot grow over a long run.
  virtual std::size_t FunctionsHeld() const = 0;
};

}  // namespace gshare
