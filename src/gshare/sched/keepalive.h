// KeepAlivePolicy: the "whole GPU per function instance" baseline.
//
// Stands for today's serverless GPU platforms (a function instance is a VM or container bound to
// a dedicated GPU, as in the gShare paper's keep-alive baseline). Each instance holds one whole
// GPU from its start until it has been idle for PolicyOptions::keep_alive. An instance serves one
// batch at a time (up to the function's max_batch), from the function's FIFO queue. When requests
// wait, a new instance starts if it would finish the newest one sooner than the instances there
// are (ready, or starting and ready soon) can, serving the queue in rounds; a cold start pays
// instance_start plus the model load. Whichever instance frees first serves the queue head.
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
  KeepAlivePolicy(const SchedulerContext& context, const PolicyOptions& options);

  std::string_view name() const override { return "keepalive"; }
  void OnFunctionAdded(FunctionId function) override;
  void OnFunctionRemoved(FunctionId function) override;
  void OnRequest(const Request& request) override;
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

 private:
  enum class State : std::uint8_t { kStarting, kLoading, kIdle, kBusy, kEvicting, kGone };
  struct Instance {
    FunctionId function = 0;
    GpuId gpu = 0;
    State state = State::kStarting;
    std::uint32_t idle_generation = 0;  // invalidates keep-alive timers of earlier idle periods
  };
  struct FunctionState {
    std::deque<RequestId> queue;
    std::vector<std::uint32_t> idle;       // idle instances, most recently used last
    int starting = 0;                      // instances starting or loading
    int ready = 0;                         // instances loaded (idle or busy)
    std::deque<TimePoint> starting_ready;  // when the starting instances are expected to be ready
    int restore_failures = 0;              // in a row, while no instance is ready
    bool starved = false;                  // a GPU was refused; retry when one is given back
  };

  void Dispatch(FunctionId function);
  void ScaleOut(FunctionId function);
  bool ColdStartIsFaster(FunctionId function) const;
  Duration ColdStart(FunctionId function) const;
  void BecomeIdle(std::uint32_t instance);
  // The instance's GPU was given back: it is gone.
  void Forget(std::uint32_t instance);
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
  ExecTimeEstimator estimator_;
  RequestTable requests_;
  std::vector<FunctionId> starved_;
  std::vector<FunctionState> functions_;
  std::vector<Instance> instances_;
  std::unordered_map<GpuId, std::uint32_t> instance_of_gpu_;
  std::vector<RequestId> batch_;  // scratch
};

}  // namespace gshare
