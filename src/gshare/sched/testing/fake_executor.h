// FakeExecutor: a small deterministic world for testing schedulers against the Executor
// contract, with failures injected on a fixed plan.
//
// Timing is simple and exact: a GPU is ready after its startup, a restore takes the GPU type's
// RestoreTime, a run takes the function's profiled latency for its batch (runs on one GPU do not
// slow each other), a copying eviction takes the model bytes over the link. Every action is
// checked against the contract's preconditions (executor.h); a violation is recorded, and
// RunToEnd then fails with an Internal status naming it. Every answer is recorded, so a test can
// check that each request is answered exactly once.
//
// Not thread-safe; single-threaded like the simulator.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/timer_queue.h"
#include "gshare/sched/executor.h"
#include "gshare/sched/function_registry.h"
#include "gshare/sched/scheduler.h"

namespace gshare::testing {

// Which actions fail. Counters are global and deterministic: "every Nth" counts from the start.
struct FaultPlan {
  int max_gpus = 0;                // AcquireGpu refuses beyond this many held; 0: no cap
  bool refuse_all_gpus = false;    // AcquireGpu always refuses
  bool refuse_first_type = false;  // AcquireGpu refuses GPUs of type 0 (others may be had)
  int fail_restore_every = 0;      // every Nth restore fails (the slice is gone)
  int fail_restores_of = -1;       // every restore of this function fails; -1: none
  int fail_run_every = 0;          // every Nth run ends with an error (the slice stays)
  int kill_instance_every = 0;     // every Nth run's instance dies before it ends
  int lose_gpu_every = 0;          // every Nth run's GPU is lost before it ends
  int kill_restoring_every = 0;    // every Nth restore's instance dies while it loads
  int fail_copy_back_every = 0;    // every Nth copy back fails (the memory is freed all the same)
  // Runs write device state (a cache, say): a slice that ran since its function's last snapshot
  // is dirty, and an eviction hinted kDiscardIfClean must copy it back.
  bool runs_write_state = false;
  Duration cold_start{};  // an instance's start when none is idle
};

class FakeExecutor final : public Executor {
 public:
  // `gpu_types` (non-empty) are the kinds AcquireGpu hands out. `functions` outlives this.
  FakeExecutor(std::vector<GpuType> gpu_types, FunctionRegistry* functions, FaultPlan plan);

  void set_scheduler(Scheduler* scheduler) { scheduler_ = scheduler; }

  // The script: `request` arrives at its arrival time; its id must be new. A function is added
  // to (or removed from) the registry at `at`, and the scheduler is told. A request's client
  // withdraws it at `at` (CancelAt): the same path as a latest start that passes.
  void Arrive(const Request& request);
  void AddFunctionAt(TimePoint at, ResolvedFunction function);
  void RemoveFunctionAt(TimePoint at, FunctionId function);
  void CancelAt(TimePoint at, RequestId request);

  // Runs every event to the end (at most `max_events`; more is reported as a livelock). Fails
  // with Internal on a contract violation, a livelock, or a request left unanswered. `check`
  // (may be empty) runs after every event.
  Status RunToEnd(std::uint64_t max_events, const std::function<void()>& check = {});

  // Executor interface.
  TimePoint Now() const override { return now_; }
  std::span<const GpuType> gpu_types() const override { return gpu_types_; }
  const GpuType& TypeOf(GpuId gpu) const override;
  Result<GpuId> AcquireGpu(GpuTypeId type, Duration startup) override;
  void ReleaseGpu(GpuId gpu) override;
  void Restore(GpuId gpu, FunctionId function, std::uint64_t reserve_bytes) override;
  EvictOutcome Evict(GpuId gpu, FunctionId function, EvictHint hint) override;
  bool Resize(GpuId gpu, FunctionId function, std::uint64_t new_bytes) override;
  void Run(GpuId gpu, FunctionId function, std::span<const RequestId> batch) override;
  void FailRequest(RequestId request, const Status& status) override;
  InstanceView Instances(FunctionId function) const override;
  void SetTimer(TimePoint at, std::uint64_t token) override;

  // What happened.
  struct Answer {
    int times = 0;  // answers given: exactly one is right
    bool ok = false;
    StatusCode code = StatusCode::kOk;
  };
  const std::map<RequestId, Answer>& answers() const { return answers_; }
  std::size_t arrived() const { return arrived_; }
  // Requests delivered to the scheduler and not answered yet.
  std::size_t unanswered() const { return arrived_ - answers_.size(); }
  // Requests cancelled before they started (a latest start passed, a client withdrew).
  std::size_t never_ran() const { return never_ran_; }
  // Removed functions reported drained (OnFunctionDrained) and forgotten by the registry.
  std::size_t drained() const { return drained_; }
  int gpus_held() const { return gpus_held_; }
  int peak_gpus_held() const { return peak_gpus_held_; }  // the most held at once
  Duration max_latency() const { return max_latency_; }   // arrival to answer, the longest
  // GPUs released without a restore ever issued on them: acquired for nothing.
  int gpus_never_used() const { return gpus_never_used_; }
  std::size_t slices() const;  // slices on held GPUs
  const std::vector<std::string>& violations() const { return violations_; }
  std::uint64_t restores() const { return restores_; }
  std::uint64_t copies_back() const { return copies_back_; }
  std::set<GpuTypeId> types_acquired() const { return types_acquired_; }
  // Failures that struck: restores failed, runs failed, instances killed, GPUs lost.
  struct Injected {
    int restores = 0, runs = 0, instances = 0, gpus = 0, copies_back = 0;
  };
  const Injected& injected() const { return injected_; }
  int gpus_refused() const { return gpus_refused_; }

 private:
  enum class Kind : std::uint8_t {
    kArrival,
    kAdd,
    kRemove,
    kGpuReady,
    kRestoreDone,
    kRunEnd,
    kEvictDone,
    kTimer,
    kCancel,  // a latest start or a client's withdrawal (value: the request)
    kDrained  // a removed function has nothing left (function)
  };
  struct Event {
    Kind kind;
    GpuId gpu = 0;
    FunctionId function = 0;
    std::uint64_t value = 0;  // request id, timer token, run id, or slice generation
  };
  enum class SliceState : std::uint8_t { kRestoring, kResident, kEvicting };
  struct Slice {
    std::uint64_t bytes = 0;
    SliceState state = SliceState::kRestoring;
    std::uint64_t generation = 0;        // events of an earlier slice are stale
    std::uint64_t write_generation = 0;  // of the device state: bumped by a run that writes
    bool fail_restore = false;
    bool kill_restore = false;
    int runs = 0;
    std::uint64_t batch_bytes = 0;  // memory of the runs in flight beyond their GPU memory
  };
  struct Gpu {
    GpuTypeId type = 0;
    bool held = false;
    bool ready = false;
    std::uint64_t used = 0;
    std::map<FunctionId, Slice> slices;
    bool restored = false;  // a restore was ever issued on it
  };
  struct RunRecord {
    GpuId gpu = 0;
    FunctionId function = 0;
    std::uint64_t slice_generation = 0;
    std::vector<RequestId> batch;
    std::uint64_t batch_bytes = 0;
    TimePoint started{};
    enum class End : std::uint8_t { kOk, kFail, kKill, kLose } end = End::kOk;
    bool live = true;
  };

  Gpu* Check(GpuId gpu, const char* call);
  void Violation(std::string what);
  void Dispatch(const Event& event);
  void EndRun(std::uint64_t run_id);
  void Give(RequestId id, bool ok, StatusCode code);
  // Cancels the runs of a slice (or of a GPU, with function == kAll): their requests, for `lost`.
  std::vector<RequestId> CancelRuns(GpuId gpu, FunctionId function, bool all);
  void Unbind(FunctionId function);
  // The cancellation path: a request held and not started is answered and the scheduler told.
  void Cancel(RequestId id, const Status& status);
  // Whether a removed function has nothing left: no slice, no instance bound, no request.
  bool Drained(FunctionId function) const;

  std::vector<GpuType> gpu_types_;
  FunctionRegistry* functions_;
  FaultPlan plan_;
  Scheduler* scheduler_ = nullptr;
  TimePoint now_{};
  TimerQueue<Event> events_;
  std::vector<Gpu> gpus_;
  int gpus_held_ = 0;
  int peak_gpus_held_ = 0;
  Duration max_latency_{};
  int gpus_never_used_ = 0;
  std::map<RequestId, Request> requests_;  // scripted
  std::set<RequestId> delivered_;          // arrived: given to the scheduler
  std::set<RequestId> running_;            // in a run in flight
  std::set<FunctionId> removed_;           // removed, not yet drained
  std::size_t never_ran_ = 0;
  std::size_t drained_ = 0;
  std::map<RequestId, Answer> answers_;
  std::size_t arrived_ = 0;
  std::vector<RunRecord> runs_;
  std::vector<ResolvedFunction> pending_adds_;
  std::map<FunctionId, int> bound_;  // instances bound to slices
  std::map<FunctionId, int> idle_;   // warm instances without a slice
  // Per function, the write generation its host snapshot holds; a slice restored from it starts
  // at that generation, and is clean while it stays there.
  std::map<FunctionId, std::uint64_t> snapshot_generation_;
  std::uint64_t next_write_ = 1;
  std::uint64_t next_generation_ = 1;
  std::uint64_t restore_count_ = 0;
  std::uint64_t copy_back_count_ = 0;
  std::uint64_t run_count_ = 0;
  std::uint64_t restores_ = 0;
  std::uint64_t copies_back_ = 0;
  std::set<GpuTypeId> types_acquired_;
  int gpus_refused_ = 0;
  Injected injected_;
  mutable std::vector<std::string> violations_;
};

}  // namespace gshare::testing
