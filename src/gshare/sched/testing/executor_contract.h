// The Executor contract as tests: checks that every executor must pass (the simulated one, the
// fake one, and the live node's), written once against a harness that builds a small world.
//
// Each check is a function that runs a scripted scheduler on a fresh world and reports failures
// through GoogleTest assertions. A test file per executor calls them with its harness:
//
//   TEST(MyExecutorContract, RestoreThenRun) { MyHarness h; CheckRestoreThenRun(h); }
#pragma once

#include <memory>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/model/function_spec.h"
#include "gshare/model/gpu_type.h"
#include "gshare/model/request.h"
#include "gshare/sched/executor.h"
#include "gshare/sched/scheduler.h"

namespace gshare::testing {

// Builds a world and runs a scheduler in it to the end.
class ExecutorHarness {
 public:
  virtual ~ExecutorHarness() = default;
  // A world of GPUs of type `gpu`, with `functions` (ids 0..n-1) and `requests` (ids 0..n-1,
  // sorted by arrival) arriving.
  virtual void Build(const GpuType& gpu, std::vector<ResolvedFunction> functions,
                     std::vector<Request> requests) = 0;
  virtual Executor& executor() = 0;
  // Runs every event to the end. Errors: a contract violation by the scheduler (Internal), or a
  // request left unanswered.
  virtual Status Run(Scheduler& scheduler) = 0;
};

// The world the checks use: a 4 GiB GPU with a 1 GB/s link and 1 ms restore overhead; function
// 0 has a 100 MB model in 256 MiB and runs 10 ms (15 ms for a batch of two); function 1 has a
// 200 MB model in 512 MiB and runs 20 ms (30 ms).
GpuType ContractGpu();
std::vector<ResolvedFunction> ContractFunctions();
Request ContractRequest(RequestId id, FunctionId function, double seconds);

// A GPU acquired without startup takes a restore at once; one with a startup fires OnGpuReady
// after it and no earlier. A refused GPU is a ResourceExhausted error.
void CheckGpuStartup(ExecutorHarness& harness);
// Restore, then Run: OnRestoreDone (OK) no earlier than the GPU type's RestoreTime (the type the
// executor describes: TypeOf), OnRunDone (OK)
// with the batch and a positive elapsed time; the events never come from inside an action.
void CheckRestoreThenRun(ExecutorHarness& harness);
// An eviction hinted kDiscardIfClean of a clean slice discards (no event, memory free at once);
// kCheckpoint copies and fires OnEvictDone. The instance is idle again after either.
void CheckEvictions(ExecutorHarness& harness);
// FailRequest answers a request; running a request that is not resident is a violation.
void CheckFailRequestAndViolations(ExecutorHarness& harness);
// A request not started by its latest start is cancelled: the scheduler hears of it
// (OnRequestCancelled, DeadlineExceeded) at that time or later, it is answered and never runs,
// and running it afterwards is a violation; a request that started before its latest start runs
// to its end.
void CheckLatestStartAndCancellation(ExecutorHarness& harness);

}  // namespace gshare::testing
