// FaaSwapPolicy ("faaswap-fifo"): the proxy-and-swap baseline as first built (FaaSwap-like; Yu et
// al., "FaaSwap: SLO-Aware, GPU-Efficient Serverless Inference via Model Swapping",
// arXiv:2306.03622): early binding to one GPU's FIFO queue. "faaswap" is the same platform at its
// best (faaswap_edf.h): late binding, deadline order, batching of every queued request.
//
// A pool of GPUs shared by every function. Models live in host memory and are swapped onto a GPU
// on demand; a GPU keeps the models it has loaded until memory is needed (LRU eviction). Every
// request first crosses a GPU proxy, which delays it by PolicyOptions::proxy_overhead_fraction of
// the function's batch-1 execution latency. Placement prefers the GPU whose predicted finish for
// the request is earliest, where a GPU already holding the model saves the swap (so popular
// models stay resident and attract their requests). Each GPU serves its queue in FIFO order, one
// batch at a time (consecutive requests of one function form a batch); the copy engine restores
// the next queued model (within the next 8 requests) while the current batch runs. Where the
// executor pipelines loading (Executor::RunPipelined, FaaSwap's layer-wise loading), the queue
// head's batch starts while its model is still being copied. The pool grows
// by one GPU by the rule every pooled policy shares (PoolSizer); a GPU idle for
// PolicyOptions::pool_idle leaves the pool.
//
// Failures: a refused GPU stops the pool's growth (with no GPU at all, the request is answered
// with the refusal). A run that fails, or an instance that dies, puts its requests back at the
// head of the GPU's queue (RequestTable::kMaxAttempts attempts each); a lost GPU's queue is
// placed again. A model whose restore fails kMaxAttempts times in a row has its requests on that
// GPU answered with the failure. A function at its max_instances is placed only where its model
// is held.
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

class FaaSwapPolicy final : public Scheduler {
 public:
  FaaSwapPolicy(const SchedulerContext& context, const PolicyOptions& options);

  std::string_view name() const override { return "faaswap-fifo"; }
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

 private:
  // Where a GPU's entry for one model it holds sits in the per-function index.
  struct HolderEntry {
    bool idle = false;
    TimePoint busy_key{};
  };
  // The models it holds (GpuModelCache: gpu, capacity, memory_used, restoring, lru, resident,
  // evicting), and its queue and run.
  struct PoolGpu : GpuModelCache {
    bool alive = true;
    bool ready = false;
    TimePoint ready_at{};
    std::deque<RequestId> queue;
    std::unordered_map<FunctionId, int> queued;  // queued requests by function
    bool running = false;
    FunctionId running_function = 0;
    bool running_pipelined = false;  // the run overlaps its model's copy
    TimePoint predicted_free_at{};   // when the queued work is predicted to be done
    TimePoint indexed_key{};         // FreeKey when it was last indexed
    bool indexed_idle = false;       // indexed as free (its key has passed)
    std::unordered_map<FunctionId, HolderEntry> holder_entries;  // by model held
    std::uint32_t idle_generation = 0;
  };

  void Forward(RequestId id);
  // Fills batch_ from the head of the GPU's queue (requests of `function`).
  void TakeBatch(PoolGpu& gpu, FunctionId function);
  // A request of `function` left the GPU's queue (to run).
  static void Unqueued(PoolGpu& gpu, FunctionId function);
  // The pool slot for the request, or npos when there is no GPU and none can be had.
  std::size_t Place(const Request& request);
  void Requeue(std::size_t slot, std::span<const RequestId> requests, const Status& status);
  void Answer(RequestId id, const Status& status);
  // Answers the GPU's queued requests of `function` with `status`.
  void AnswerQueued(std::size_t slot, FunctionId function, const Status& status);
  // Evicts a resident model (already out of the LRU list), as the executor allows.
  void EvictModel(std::size_t slot, FunctionId function);
  void Unload(std::size_t slot, FunctionId function);
  // Moves the queue head's requests where their model is, when it cannot come here; true when
  // the head was dealt with (moved, or the GPU waits for an instance).
  bool Relocate(std::size_t slot);
  void RetryBlocked();
  void Retire(std::size_t slot);
  void Advance(std::size_t pool_index);
  // Evicts least recently used models until `bytes` fit: never the running one, and unless
  // `for_head`, none that a queued request needs. Evicts nothing and returns false when they
  // cannot fit.
  bool MakeRoom(std::size_t slot, std::uint64_t bytes, bool for_head);
  bool HasModel(const PoolGpu& gpu, FunctionId function) const;
  static TimePoint FreeKey(const PoolGpu& gpu);
  void IndexInsert(std::size_t slot);
  void IndexErase(std::size_t slot);
  void Promote(TimePoint now);
  void AddModel(std::size_t slot, FunctionId function);
  void DropModel(std::size_t slot, FunctionId function);
  void RepairModelIndex(FunctionId function);
  void SetPredictedFree(std::size_t slot, TimePoint predicted_free_at);
  void MaybeIdle(std::size_t pool_index);
  // Restore onto this GPU's type plus `bind_delay` (Instances(function).BindDelay(), which the
  // caller reads once per decision).
  Duration SwapTime(const PoolGpu& gpu, FunctionId function, Duration bind_delay) const;
  std::uint64_t ReserveBytes(FunctionId function) const;
  // How long a run takes from its model's copy to its end: swap then execution, or overlapped
  // where the executor pipelines loading.
  Duration ColdRun(Duration swap, Duration exec) const;

  SchedulerContext context_;
  PolicyOptions options_;
  ExecTimeEstimator estimator_;
  RequestTable requests_;  // requests not yet answered
  // Index: pool slot (never reused). A deque: PoolGpu holds iterators into its own list, so the
  // elements must never be copied or moved by growth.
  std::deque<PoolGpu> pool_;
  std::vector<std::size_t> alive_;  // pool slots in the pool now
  std::unordered_map<GpuId, std::size_t> slot_of_gpu_;
  // Placement index, O(log G) amortized per request. Alive GPUs whose predicted free time has
  // passed, by slot; the others by (predicted free time, slot). The same per function, for the
  // GPUs that hold its model (resident or being restored), repaired lazily (RepairModelIndex).
  std::set<std::size_t> idle_slots_;
  std::set<std::pair<TimePoint, std::size_t>> by_free_time_;
  struct ModelIndex {
    std::set<std::size_t> idle;
    std::set<std::pair<TimePoint, std::size_t>> busy;
  };
  // By function, while some GPU holds its model (an entry is dropped when it empties).
  std::unordered_map<FunctionId, ModelIndex> models_;
  PoolSizer sizer_;
  std::vector<std::size_t> blocked_;   // GPUs whose queue head waits for an instance
  std::vector<RequestId> batch_;       // scratch
  std::vector<FunctionId> evictable_;  // scratch
};

}  // namespace gshare
