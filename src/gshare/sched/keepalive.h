// KeepAlivePolicy: the "whole GPU per function instance" baselines, keepalive and faascache.
//
// Stands for today's serverless GPU platforms (a function instance is a VM or container bound to
// a dedicated GPU, as in the gShare paper's keep-alive baseline). Each instance holds one whole
// GPU from its start until it has been idle for PolicyOptions::keep_alive. An instance serves one
// batch at a time from the function's FIFO queue, up to the batch cap: the largest batch whose
// estimated latency is within the function's SLO (at most max_batch), as an operator at its best
// configures a serving system's batcher; whichever instance frees first serves the queue head. A
// cold start pays instance_start plus the model load.
//
// The autoscaler is Knative's, at its best for latency: it adds instances
//  - while the function's concurrency (requests queued and running; queued ones only once an
//    instance is ready, so a cold start's backlog does not size the function), averaged over
//    Knative's 60-second stable window, exceeds PolicyOptions::concurrency_target x the batch cap
//    per instance;
//  - and at once when the backlog would make the newest request miss its deadline on the
//    instances there are (starting ones counted from when they will be ready) and an instance
//    started now would serve it sooner.
// A request that no cold start can save is left to the concurrency target: how much headroom
// the instances keep is that knob's (gshare compare sweeps it).
// Instances leave only by the keep-alive (no scale-down decision), or, under faascache, by
// eviction.
//
// faascache (Fuerst and Sharma, ASPLOS'21: keep-alive as caching): the same, and when a GPU is
// refused (the cluster is at its cap, gshare sim --max-gpus) the idle instance of another
// function with the lowest GreedyDual priority gives its GPU up: priority = clock + frequency x
// cost / size, with frequency the function's requests so far, cost its cold start (seconds) and
// size its GPU memory (GiB); the clock rises to each evicted priority. Without a cap nothing is
// evicted and faascache behaves as keepalive; PolicyOptions::gpus_per_function gives it a capacity
// of its own (a GPU beyond it counts as refused), which `gshare compare` sweeps.
//
// Failures: a refused GPU leaves the requests queued, and scaling out is tried again when another
// instance gives its GPU back; with no instance at all and none to be had, the queue is answered
// with the refusal. A run that fails, or an instance or GPU that dies, puts its requests back at
// the head of the queue (RequestTable::kMaxAttempts attempts each); a restore that fails gives the
// GPU back, and after kMaxAttempts failures in a row with no instance ready the queue is answered
// with the failure.
#pragma once

#include <cstdint>
#include <deque>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gshare/sched/exec_estimator.h"
#include "gshare/sched/policy_options.h"
#include "gshare/sched/request_table.h"
#include "gshare/sched/scheduler.h"

namespace gshare {

class KeepAlivePolicy final : public Scheduler {
 public:
  // `greedy_dual`: faascache (evict idle instances of other functions when a GPU is refused).
  KeepAlivePolicy(const SchedulerContext& context, const PolicyOptions& options,
                  bool greedy_dual = false);

  std::string_view name() const override { return greedy_dual_ ? "faascache" : "keepalive"; }
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

 private:
  enum class State : std::uint8_t { kStarting, kLoading, kIdle, kBusy, kEvicting };
  struct Instance {
    FunctionId function = 0;
    GpuId gpu = 0;
    State state = State::kStarting;
    std::uint32_t idle_generation = 0;  // invalidates keep-alive timers of earlier idle periods
    double priority = 0;                // faascache: GreedyDual priority while idle
    int batch = 0;                      // requests in its run now
    TimePoint busy_until{};             // the predicted end of its run (while busy)
  };
  struct FunctionState {
    std::deque<RequestId> queue;
    std::vector<std::uint32_t> idle;       // idle instances, most recently used last
    int starting = 0;                      // instances starting or loading
    int ready = 0;                         // instances loaded (idle or busy)
    std::deque<TimePoint> starting_ready;  // when the starting instances are expected to be ready
    int restore_failures = 0;              // in a row, while no instance is ready
    bool starved = false;                  // a GPU was refused; retry when one is given back
    int running = 0;                       // requests in runs now
    std::multiset<TimePoint> busy_ends;    // predicted ends of the busy instances' runs
    double average_concurrency = 0;        // queued + running, over the stable window
    int concurrency = 0;                   // queued + running when last sampled
    TimePoint sampled_at{};
    std::uint64_t frequency = 0;  // requests so far (faascache)
  };

  void Dispatch(FunctionId function);
  // Samples the concurrency and adds the instances the autoscaler asks for.
  void Autoscale(FunctionId function);
  // The largest batch whose estimate is within the function's SLO (1..max_batch).
  int BatchCap(FunctionId function) const;
  bool ShouldScaleOut(FunctionId function) const;
  // Starts one instance; false when no GPU or instance could be had (the function starves).
  bool ScaleOut(FunctionId function);
  // faascache: whether its instances hold all the GPUs its capacity allows, and that capacity.
  bool AtCapacity() const;
  std::size_t Capacity() const;
  // faascache: gives up the GPU of the idle instance (not of `function`) with the lowest
  // priority; false when there is none.
  bool EvictForGpu(FunctionId function);
  void SampleConcurrency(FunctionId function);
  void RemoveIdle(std::uint32_t instance);
  Duration ColdStart(FunctionId function) const;
  void BecomeIdle(std::uint32_t instance);
  // The instance's GPU was given back: it is gone.
  void Forget(std::uint32_t instance);
  // Takes a busy instance's predicted run end off its function's books.
  void EndBusy(std::uint32_t instance);
  // The instance died or its GPU was lost: out of the counts, gone.
  void Detach(std::uint32_t instance);
  // After a loss: the lost requests back in the queue, served or scaled out for.
  void Recover(FunctionId function, std::span<const RequestId> lost, const Status& status);
  void GiveBack(std::uint32_t instance);
  void Requeue(FunctionId function, std::span<const RequestId> requests, const Status& status);
  void FailQueue(FunctionId function, const Status& status);
  // A GPU or an instance was not to be had: retry when an instance gives its GPU back.
  void Starve(FunctionId function);
  void RetryStarved();
  void Answered(std::span<const RequestId> batch);

  SchedulerContext context_;
  PolicyOptions options_;
  bool greedy_dual_;
  double clock_ = 0;                                        // faascache: GreedyDual's clock
  std::set<std::pair<double, std::uint32_t>> by_priority_;  // faascache: idle instances
  ExecTimeEstimator estimator_;
  RequestTable requests_;
  std::vector<FunctionId> starved_;
  // By function, from OnFunctionAdded (or its first request) to OnFunctionDrained.
  std::unordered_map<FunctionId, FunctionState> functions_;
  // By instance id, until the instance is gone (its GPU given back, or lost).
  std::unordered_map<std::uint32_t, Instance> instances_;
  std::uint32_t next_instance_ = 0;
  std::unordered_map<GpuId, std::uint32_t> instance_of_gpu_;
  std::vector<RequestId> batch_;  // scratch
};

}  // namespace gshare
