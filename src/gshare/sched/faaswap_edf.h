// FaaSwapEdfPolicy: the proxy-and-swap baseline at its best ("faaswap"; the early-binding FIFO
// version is "faaswap-fifo", faaswap.h).
//
// The same platform as faaswap-fifo: a pool of GPUs shared by every function, models swapped in
// from host memory on demand and kept until memory is needed (LRU), every request delayed by the
// GPU proxy (PolicyOptions::proxy_overhead_fraction of its batch-1 execution), one batch at a time
// per GPU, layer-wise loading where the executor pipelines it, fixed reservations sized for
// max_batch, the pool grown by the rule every pooled policy shares (PoolSizer) and a GPU idle for
// pool_idle released. What it does better, so that the comparison is with FaaSwap at its best:
//  - late binding: a request waits in its function's queue, not in a GPU's; a GPU takes work
//    when it can start it;
//  - deadline order: a free GPU serves the function whose oldest request has the earliest
//    deadline, among the first kLookAhead by deadline;
//  - model affinity: a free GPU leaves a function to a GPU that holds its model when that one
//    frees (or finishes restoring it) before this one could restore it and in time for the
//    deadline;
//  - batching: a batch takes the function's oldest queued requests, up to max_batch, however
//    they arrived (not only back-to-back ones);
//  - learned estimates (ExecTimeEstimator) for every prediction.
//
// Failures: a refused GPU stops the pool's growth (with no GPU at all, the request is answered
// with the refusal). A run that fails, or an instance that dies, puts its requests back at the
// head of their function's queue (RequestTable::kMaxAttempts attempts each); a lost GPU's runs
// likewise. A model whose restore fails kMaxAttempts times in a row on a GPU has its function's
// queued requests answered with the failure. A function at its max_instances runs only where its
// model is held.
//
// Threading: the scheduler's event loop only.
#pragma once

#include <cstdint>
#include <deque>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gshare/sched/exec_estimator.h"
#include "gshare/sched/model_cache.h"
#include "gshare/sched/policy_options.h"
#include "gshare/sched/pool_sizer.h"
#include "gshare/sched/request_table.h"
#include "gshare/sched/scheduler.h"

namespace gshare {

class FaaSwapEdfPolicy final : public Scheduler {
 public:
  FaaSwapEdfPolicy(const SchedulerContext& context, const PolicyOptions& options);

  std::string_view name() const override { return "faaswap"; }
  void OnFunctionAdded(FunctionId function) override;
  void OnFunctionRemoved(FunctionId function) override;
  void OnFunctionDrained(FunctionId function) override;
  void OnRequest(const Request& request) override;
  void OnRequestCancelled(RequestId request, const Status& status) override;
  void OnGpuReady(GpuId gpu) override;
  void OnRestoreDone(GpuId gpu, FunctionId function, const Status& status) override;
  void OnRunDone(GpuId gpu, FunctionId function, std::span<const RequestId> batch,
                 const RunResult& result) override;
  void OnEvictDone(GpuId gpu, FunctionId function, const Status& status) override;
  void OnInstanceDied(GpuId gpu, FunctionId function, std::span<const RequestId> lost,
                      const Status& status) override;
  void OnGpuLost(GpuId gpu, std::span<const RequestId> lost, const Status& status) override;
  void OnTimer(std::uint64_t token) override;
  std::size_t RequestsHeld() const override { return requests_.size(); }
  std::size_t FunctionsHeld() const override;

  // Functions a free GPU looks at, in deadline order, before it stays idle.
  static constexpr std::size_t kLookAhead = 16;

 private:
  // The models it holds (GpuModelCache: gpu, capacity, memory_used, restoring, lru, resident,
  // evicting), and its run.
  struct PoolGpu : GpuModelCache {
    bool alive = true;
    bool ready = false;
    TimePoint ready_at{};
    bool running = false;
    FunctionId running_function = 0;
    bool running_pipelined = false;
    TimePoint running_ends{};  // predicted
    std::vector<RequestId> running_batch;
    TimePoint restore_ends{};  // predicted
    std::uint32_t idle_generation = 0;
  };
  // A function's requests waiting for a GPU, oldest first (its deadlines are in that order).
  struct Queue {
    std::deque<RequestId> requests;
    TimePoint key{};  // the head's deadline, as indexed in edf_
  };

  void Forward(RequestId id);
  // Puts requests of one function back at the head of its queue (a failed run), or answers
  // them when they have no attempt left or their function is gone.
  void Requeue(std::span<const RequestId> requests, const Status& status);
  void Enqueue(RequestId id, bool front);
  void Dequeue(FunctionId function, std::size_t count);
  void Reindex(FunctionId function);
  void Answer(RequestId id, const Status& status);
  void AnswerQueue(FunctionId function, const Status& status);
  // Gives free GPUs work: those holding the earliest functions' models first, then the lowest
  // numbered free ones. With work queued and no GPU left, asks for one (or answers the work with
  // the refusal).
  void Kick();
  // Gives the GPU the work it should take now; false when it takes none.
  bool StartWork(std::size_t slot);
  void RunBatch(std::size_t slot, FunctionId function, bool pipelined);
  // When `slot` (holding the model) is predicted to be able to start a run of it.
  TimePoint HolderStart(std::size_t slot, FunctionId function) const;
  // Whether a GPU other than `slot` that holds the model will serve the function's head in time
  // and sooner than `slot` could restore it.
  bool LeaveToHolder(std::size_t slot, FunctionId function, TimePoint here) const;
  bool MakeRoom(std::size_t slot, std::uint64_t bytes);
  void EvictModel(std::size_t slot, FunctionId function);
  void AddHolder(std::size_t slot, FunctionId function);
  void DropHolder(std::size_t slot, FunctionId function);
  void Unload(std::size_t slot, FunctionId function);
  void MaybeGrow(const Request& request);
  void AddGpu(GpuId id);
  void Retire(std::size_t slot);
  void MaybeIdle(std::size_t slot);
  void SetFree(std::size_t slot, bool free);
  std::uint64_t ReserveBytes(FunctionId function) const;
  Duration SwapTime(FunctionId function) const;
  Duration ColdRun(Duration swap, Duration exec) const;

  SchedulerContext context_;
  PolicyOptions options_;
  ExecTimeEstimator estimator_;
  RequestTable requests_;  // requests not yet answered
  std::unordered_map<FunctionId, Queue> queues_;
  std::set<std::pair<TimePoint, FunctionId>> edf_;  // functions with queued requests
  std::size_t queued_ = 0;                          // requests in queues_
  Duration queued_work_{};                          // their batch-1 estimates, summed (for growth)
  std::vector<PoolGpu> pool_;                       // by slot (never reused)
  std::unordered_map<GpuId, std::size_t> slot_of_gpu_;
  std::set<std::size_t> free_;  // alive, ready, not running
  std::size_t alive_count_ = 0;
  // Slots that hold each function's model (resident or being restored).
  std::unordered_map<FunctionId, std::vector<std::size_t>> holders_;
  PoolSizer sizer_;
  std::vector<RequestId> batch_;       // scratch
  std::vector<FunctionId> evictable_;  // scratch
};

}  // namespace gshare
