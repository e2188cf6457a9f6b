// GSharePolicy: gShare's online algorithm, dual-queue lazy scheduling over elastic vGPUs.
//
// A GPU is cut into slices: a function's slice reserves its GPU memory rounded up to the slice
// granularity (PolicyOptions::slice_granularity), is created by a restore, grows to hold a
// batch (batch_memory) while the GPU has memory free (in place, or moved where slices hold
// contiguous ranges; a refused growth runs a smaller batch) and shrinks back after it, and is
// released by an eviction. The policy:
//  - predicts each request's restore time (zero where its model has a slice on the GPU; plus an
//    instance's cold start where none is idle; times the measured mean ratio of restores to their
//    profile) and its execution time (a learned 99th percentile of runs over their profile,
//    ExecTimeEstimator::Quantile, x (1 + margin));
//  - keeps unbound requests per function; a GPU whose compute frees serves the waiting function
//    with the earliest deadline first (requests at risk are by construction the earliest: the
//    cache queue), among the functions that have a slice on it (locality first), but starts no
//    run that would end after the latest start of a function ahead of it whose slice is still
//    restoring and would be ready in time (runs are not preempted: the GPU idles instead);
//  - binds lazily: while a slice that holds the model is predicted to serve the request by its
//    deadline, the request waits for it (no swap), and a timer re-checks it when its slack runs
//    out; otherwise (at risk) it gets a new slice now, on the active GPU with the least free
//    memory that still meets the deadline (best fit), else on a GPU where idle slices can be
//    evicted, else on a new GPU;
//  - restores a function with no slice at its latest start (less a guard) where a request may
//    join it meanwhile (lazy first restore), else at once;
//  - holds an idle slice for the time that minimises its expected cost (HoldTime: priced by the
//    GPU, until its memory is needed; or by memory-time, over the function's recent gaps), one
//    release timer per slice;
//  - sizes the replicas of a function by its load, ahead of any backlog (SizeReplicas: a queueing
//    model over the peak rate of its recent bursts), each on a GPU whose recent compute load is
//    low, and cuts a batch to what its head request's deadline allows (unless the whole batch,
//    counting the batches behind it, has more requests predicted in time);
//  - evicts idle slices least recently used first; with fast swap an eviction discards the
//    device copy (the host snapshot is still valid) and costs no copy; below the pool's cap, a
//    protected slice (at risk, expected back within protect_horizon) is not evicted for another,
//    which gets a GPU, and keeps its GPU from the idle release;
//  - shares the pool's memory between tenants while it is contended (the pool at its cap, or a
//    GPU refused since one was last released; PolicyOptions::GShare::tenant_shares): each tenant
//    holding a slice, and the one asking, gets an equal share of the alive GPUs' memory; a tenant
//    may borrow beyond it what no one uses. A tenant within its share (or holding nothing) takes
//    a new slice's memory from borrowers first, even from a slice whose function has requests
//    waiting (it is not running: nothing is preempted; its requests are bound again); idle
//    slices otherwise go as without shares. An eviction is planned whole and made only when it
//    frees enough. Base slice bytes count, not a batch's growth;
//  - keeps its margin fixed (PolicyOptions::GShare::safety_margin), or, in the variant
//    gshare-adaptive-margin, adapts it toward a target SLO attainment: it grows when recent
//    attainment falls short and shrinks slowly otherwise;
//  - grows the pool by one GPU when no choice (starting GPUs included) meets a request's deadline
//    and a GPU asked for now would finish it sooner (PoolSizer);
//    releases a GPU idle for PolicyOptions::pool_idle (unless it holds a protected slice).
// Work per event: O(log G) in the number of GPUs, plus at most 65 candidate GPUs examined for a
// new slice (and their slices, on the eviction path) and 64 visited for a replica; a batch choice
// over at most two batches' requests; O(c^2) when a function's replica count c is sized again
// (its load moved by more than 5%); no scan over all functions or all GPUs.
//
// Failures: a refused GPU is treated as the pool being at its limit (the function waits for
// memory; with no GPU at all its requests are answered with the refusal). A run that fails, or an
// instance or GPU that dies, puts its requests back in the function's queue
// (RequestTable::kMaxAttempts attempts each); a slice whose restore fails or whose instance dies
// is dropped and the function bound again; after kMaxAttempts failed restores in a row with no
// slice left, the function's queue is answered with the failure. A function at its max_instances
// waits for its slices; slices whose restores wait for a copy engine count as its instances.
//
// Variants (PolicyOptions::GShare): `fifo` serves by arrival and binds every request at once;
// no-lazy binds at once but keeps deadline order; no-fast-swap checkpoints before evicting;
// no-cache-queue, no-timeslice and adaptive-margin change the part they name; mean-margin predicts
// from the learned mean, fixed-hold holds by the earlier rule, eager-restore restores at once,
// reactive-replicas makes a replica only once a backlog makes requests late, queue-batch batches
// a function's queue up to max_batch whatever the deadlines.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gshare/sched/exec_estimator.h"
#include "gshare/sched/log_stats.h"
#include "gshare/sched/policy_options.h"
#include "gshare/sched/pool_sizer.h"
#include "gshare/sched/request_table.h"
#include "gshare/sched/scheduler.h"

namespace gshare {

class GSharePolicy final : public Scheduler {
 public:
  GSharePolicy(std::string name, const SchedulerContext& context, const PolicyOptions& options);

  std::string_view name() const override { return name_; }
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
  std::size_t FunctionsHeld() const override { return functions_.size(); }

  double margin() const { return margin_; }

 private:
  struct Slice {
    std::uint64_t bytes = 0;
    bool ready = false;    // restore done
    TimePoint ready_at{};  // predicted (restoring) or actual (ready) time the model is on the GPU
    TimePoint last_used{};
    std::uint64_t charged = 0;  // bytes counted to its tenant's share
    // When its release timer fires (one at a time per slice); max: none is set.
    TimePoint release_at = TimePoint::max();
  };
  struct GpuState {
    GpuId gpu = 0;
    std::uint64_t memory_bytes = 0;  // the device's, counted in pool_bytes_ while alive
    bool alive = true;
    bool ready = false;
    TimePoint ready_at{};
    std::uint64_t free_bytes = 0;
    std::unordered_map<FunctionId, Slice> slices;
    // Functions with unbound requests and a slice here, by the key of their first request.
    std::set<std::pair<TimePoint, FunctionId>> waiting;
    // Runs in flight (at most two: a second only by time slicing): function, and whether it shares
    // the GPU's compute (its elapsed time then says nothing about its execution time).
    struct Run {
      FunctionId function = 0;
      bool shared = false;
    };
    std::vector<Run> runs;
    TimePoint busy_until{};    // predicted end of the runs in flight
    TimePoint copy_free_at{};  // predicted end of the copies queued on its copy engine
    std::vector<FunctionId> deferred_restores;  // wait for the copy engine, the GPU's start or
                                                // checkpoints in flight; issued in order
    bool restoring = false;                     // a restore is on the copy engine
    FunctionId restoring_function = 0;
    TimePoint restore_issued{};  // when it went to the copy engine
    Duration restore_profile{};  // its profile's time (restore_ratio_ learns elapsed over it)
    // Evictions copying back (OnEvictDone frees them): function, bytes.
    std::vector<std::pair<FunctionId, std::uint64_t>> evicting;
    std::uint64_t copying_bytes = 0;  // their bytes, not yet free on the device
    bool retiring = false;            // released once its evictions end
    std::uint32_t idle_generation = 0;
    // Its recent compute load: run seconds per second, decayed over kLoadWindowSeconds (LoadOf).
    double load = 0.0;
    TimePoint load_at{};
  };
  struct FunctionState {
    std::deque<RequestId> pending;   // unbound requests, by arrival
    std::vector<std::size_t> slots;  // GPUs with a slice of this function
    TimePoint key{};                 // key of the first pending request in the waiting sets
    bool keyed = false;
    std::uint32_t check_generation = 0;
    int restore_failures = 0;  // in a row
    int deferred = 0;          // slices whose restore waits in a GPU's deferred_restores
    // Observed inter-arrival gaps, the last kGapHistory (HoldTime).
    static constexpr std::uint8_t kGapHistory = 8;
    std::array<Duration, kGapHistory> gaps{};
    std::uint8_t gap_count = 0;
    std::uint8_t gap_next = 0;
    bool seen = false;
    TimePoint last_arrival{};
    bool unplaced = false;  // in unplaced_
    int tenant = -1;        // TenantOf, interned on first use
    // Load-sized replicas: exponentially weighted means of the gaps and of their squares, how
    // many gaps they have seen, the arrival rate over the last kBurstRuns runs and its peak
    // (decayed over RateWindow), both per second as of the last arrival, and the replica count
    // last sized with the offered load it was sized for (ReplicaTarget).
    double gap_mean = 0.0;
    double gap_square = 0.0;
    std::uint32_t gaps_seen = 0;  // up to kGapsToSize
    double burst_rate = 0.0;
    double peak_rate = 0.0;
    int replicas = 1;
    double sized_load = 0.0;
  };

  // Where a new slice of a function could go, and when a request would finish there.
  struct Placement {
    bool found = false;
    std::size_t slot = 0;
    bool needs_eviction = false;
    TimePoint finish = TimePoint::max();
  };

  void Bind(FunctionId function);
  // Whether a new slice of the function can get an instance, counting the slices whose restores
  // wait for a copy engine (the executor does not know of them yet).
  bool CanBind(FunctionId function) const;
  // `exec`: the work the new slice does until `head` is done.
  Placement FindNewSlice(FunctionId function, const Request& head, Duration exec);
  // `exec`: the work a new slice does until `request` is done.
  // Adds a GPU when one asked for now, where a slice runs `exec` after its restore, would finish
  // `request` sooner than `best_finish` (PoolSizer), and the unused GPUs leave room.
  bool GrowPoolIfShort(const Request& request, Duration exec, TimePoint best_finish);
  void SetCheck(FunctionId function, TimePoint at);
  void EvictSlice(std::size_t slot, FunctionId function);
  // Evicts idle slices of the GPU, least recently used first, until a free range holds `bytes`
  // (Executor::LargestFreeRange) or a copy back is in flight; nothing when evicting every idle
  // slice would not leave such a range (Executor::LargestFreeRangeWithout).
  void MakeContiguous(std::size_t slot, std::uint64_t bytes, FunctionId asker);
  // Whether one free range of the GPU holds `bytes` (always, where memory is mapped in pages).
  bool OneRangeHolds(const GpuState& gpu, std::uint64_t bytes) const;
  // How likely a function seen once is called again within `wait`, by the pool: the share of the
  // functions seen that were called again, times the chance of a first gap (exponential at the
  // mean of theirs) within `wait`.
  double JoinLikelihood(Duration wait) const;
  void IssueRestore(std::size_t slot);
  // Sets the slice's release timer `hold` (HoldTime) from now, unless one fires sooner.
  void MaybeRelease(std::size_t slot, FunctionId function, Duration hold);
  // How long an idle slice of the function is held before it is released.
  Duration HoldTime(FunctionId function) const;
  // The earlier rule (gshare-fixed-hold): the longest recent gap, else one restore time.
  Duration FixedHoldTime(FunctionId function) const;
  // A new pool GPU's slot, or nullopt when the executor refused one.
  std::optional<std::size_t> AcquireGpu(FunctionId function);
  void Dispatch(std::size_t slot);
  void StartRestore(std::size_t slot, FunctionId function);
  // Frees `bytes` on the GPU for a new slice of `asker` (EvictableFor); whether it could.
  bool MakeRoom(std::size_t slot, std::uint64_t bytes, FunctionId asker);
  void MaybeIdle(std::size_t slot);
  void Release(std::size_t slot);
  void UpdateKey(FunctionId function);
  void SetFree(std::size_t slot, std::uint64_t free_bytes);
  void Observe(const Request& request, TimePoint completion);
  void RetryUnplaced();
  void Unplaced(FunctionId function);
  // Takes the function's slice off the GPU's books (it is gone or going).
  void DropSlice(std::size_t slot, FunctionId function);
  // Puts requests whose run failed back at the head of their function's queue, or answers them.
  void Requeue(std::span<const RequestId> requests, const Status& status);
  void FailPending(FunctionId function, const Status& status);
  void FinishEviction(std::size_t slot, FunctionId function);

  // The slice a batch of `batch` needs: its memory rounded up to the slice granularity.
  std::uint64_t SliceBytes(FunctionId function, std::size_t batch = 1) const;
  Duration PredictExec(FunctionId function, std::size_t batch) const;
  Duration PredictRestore(FunctionId function) const;
  // The restore time of the function's profile (plus an instance's cold start where none is idle).
  Duration ProfileRestore(FunctionId function) const;
  Duration QueuedAhead(const GpuState& gpu, FunctionId function, TimePoint key) const;
  TimePoint PredictFinishOnSlice(const GpuState& gpu, const Slice& slice, FunctionId function,
                                 TimePoint key, Duration exec) const;
  // `restore`: PredictRestore(function), computed once by the caller for all candidates.
  TimePoint PredictFinishNewSlice(const GpuState& gpu, FunctionId function, Duration restore,
                                  TimePoint key, Duration exec) const;
  TimePoint KeyOf(const Request& request) const;
  bool Evictable(const GpuState& gpu, FunctionId function, const Slice& slice) const;
  // Whether `slice` of `function` may go to make room for `bytes` of a new slice of `asker`:
  // Evictable, and with memory contended the tenants' shares (the class comment).
  bool EvictableFor(const GpuState& gpu, FunctionId function, const Slice& slice, FunctionId asker,
                    std::uint64_t bytes) const;
  // The same with the victim's tenant holding `victim_bytes` (MakeRoom's plan).
  bool EvictableAt(const GpuState& gpu, FunctionId function, const Slice& slice, FunctionId asker,
                   std::uint64_t bytes, std::uint64_t victim_bytes) const;
  // Tenants' shares of memory.
  int TenantOf(FunctionId function);
  void Charge(FunctionId function, Slice& slice);
  void Uncharge(FunctionId function, Slice& slice);
  bool MemoryContended() const;
  // The share of each tenant holding memory, counting `asker`'s tenant among them.
  std::uint64_t TenantShare(int asker) const;
  bool Borrowing(int tenant, std::uint64_t share) const {
    return tenant_bytes_[static_cast<std::size_t>(tenant)] > share;
  }
  static bool IsRunning(const GpuState& gpu, FunctionId function);
  // Requests of the function are at risk (the cacheQueue): a fresh restore plus the predicted
  // execution does not fit in its SLO, so they are served only where the model is resident.
  bool AtRisk(FunctionId function) const;
  // At risk and expected back within PolicyOptions::GShare::protect_horizon, below the pool's cap:
  // its slices are not evicted for others, and their GPU is not released when idle.
  bool Protected(FunctionId function) const;
  // Seconds spanned by the function's recent gaps and the one still open (since its last call).
  double ObservedSeconds(FunctionId function) const;
  // The function's recent arrival rate (per second): its recent gaps over ObservedSeconds.
  double RecentRate(FunctionId function) const;
  // Load-sized replicas (PolicyOptions::GShare::load_sized_replicas): starts one more slice of
  // the function when it has fewer than ReplicaTarget, on the least loaded of the ready GPUs
  // visited whose load is under replica_gpu_load (none: no replica; the pool grows by its own
  // rule); none while the pool is at its cap or a GPU was refused.
  void SizeReplicas(FunctionId function);
  // The slices the function's offered load needs: the fewest c with P(wait > slack) at most half
  // of 1 - target_attainment, by the Erlang C probability of waiting for a = peak burst rate x
  // the learned mean run, with the Allen-Cunneen correction for the spread of the gaps (the wait
  // beyond zero taken exponential with mean (ca^2 + cs^2) / 2 x run / (c - a), cs^2 = 0, ca^2 at
  // least kMinGapSpread), the slack being the SLO less the run's learned high quantile; sized
  // again only when the load moves by kResizeFraction. O(c^2) when sized, O(1) otherwise.
  int ReplicaTarget(FunctionId function);
  // The GPU's compute load decayed to now, the runs in flight counted for what is left of them.
  double LoadOf(const GpuState& gpu) const;
  // The load of the runs ended (GpuState::load) decayed to now.
  double DecayedLoad(const GpuState& gpu) const;
  // Learns an inter-arrival gap of the function: its spread and burst rate (ReplicaTarget) and
  // the last kGapHistory gaps (HoldTime).
  void LearnGap(FunctionId function, Duration gap);
  // The batch to run now out of the first `batch` pending requests of the function: cut to the
  // largest whose predicted run meets the head's deadline, unless the whole batch has more of the
  // first batch + max_batch requests predicted in time, batches after it running one after the
  // other on this slice (or the head misses either way).
  std::size_t DeadlineBatch(FunctionId function, TimePoint now, std::size_t batch) const;
  // The window (seconds) over which the peak of a function's burst rate decays:
  // kRateWindowRestores of its restores, at least kMinRateWindowSeconds.
  double RateWindow(FunctionId function) const;
  // Time slicing: starts a second run on a busy GPU for the first waiting function that would
  // miss its deadline behind the run in flight but not when sharing the compute.
  void DispatchShared(std::size_t slot);
  // Takes the function's run off the GPU's books; whether it shared the compute.
  bool EndRun(GpuState& gpu, FunctionId function);

  std::string name_;
  SchedulerContext context_;
  PolicyOptions options_;
  PolicyOptions::GShare knobs_;
  ExecTimeEstimator estimator_;
  RequestTable requests_;
  // By function, from OnFunctionAdded (or its first request) to OnFunctionDrained.
  std::unordered_map<FunctionId, FunctionState> functions_;
  std::deque<GpuState> gpus_;  // by slot; a deque so references stay valid as it grows
  std::unordered_map<GpuId, std::size_t> slot_of_;
  std::set<std::pair<std::uint64_t, std::size_t>> by_free_;  // (free bytes, slot) of alive GPUs
  PoolSizer pool_;
  std::size_t retiring_ = 0;  // GPUs out of the pool whose copies back still run
  Status last_refusal_;       // the executor's answer when it last refused a GPU
  double margin_;
  double z_ = 0.0;           // NormalQuantile(exec_quantile), when it is set
  LogStats restore_ratio_;   // restores: elapsed over the profile's time
  Duration blocking_run_{};  // a decaying maximum of the runs dispatched (lazy first restore)
  double recent_attainment_ = 1.0;     // exponentially weighted
  std::vector<RequestId> batch_;       // scratch
  std::vector<FunctionId> evictable_;  // scratch
  // Functions with requests but no slice, waiting for memory because the pool is at max_gpus.
  std::vector<FunctionId> unplaced_;
  // Tenants' shares: tenants by name (interned ids, kept for the policy's life: a node has few),
  // the base slice bytes each holds, how many hold any, the alive GPUs' memory, and whether the
  // executor refused a GPU since one was last released.
  std::unordered_map<std::string, int> tenant_ids_;
  std::vector<std::uint64_t> tenant_bytes_;
  int tenants_holding_ = 0;
  std::uint64_t pool_bytes_ = 0;
  bool gpus_refused_ = false;
  // JoinLikelihood: the functions seen, those called again, and the sum of their first gaps (s).
  std::uint64_t functions_seen_ = 0;
  std::uint64_t called_again_ = 0;
  double first_gaps_ = 0.0;
};

}  // namespace gshare
