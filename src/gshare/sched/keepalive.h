// KeepAlivePolicy: the "whole GPU per function instance" baseline.
//
// Stands for today's serverless GPU platforms (a function instance is a VM or container bound to
// a dedicated GPU, as in the gShare paper's keep-alive baseline). Each instance holds one whole
// GPU from its start until it has been idle for PolicyOptions::keep_alive. An instance serves one
// batch at a time (up to the function's max_batch), from the function's FIFO queue. When requests
// wait, a new instance starts if it would finish the newest one sooner than the instances there
// are (ready, or starting and ready soon) can, serving the queue in rounds; a cold start pays
// instance_start plus the model load. Whichever instance frees first serves the queue head.
#pragma once

#include <cstdint>
#include <deque>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gshare/sched/policy_options.h"
#include "gshare/sched/scheduler.h"

namespace gshare {

class KeepAlivePolicy final : public Scheduler {
 public:
  KeepAlivePolicy(const SchedulerContext& context, const PolicyOptions& options);

  std::string_view name() const override { return "keepalive"; }
  void OnRequest(const Request& request) override;
  void OnGpuReady(GpuId gpu) override;
  void OnRestoreDone(GpuId gpu, FunctionId function) override;
  void OnRunDone(GpuId gpu, FunctionId function, std::span<const RequestId> batch) override;
  void OnTimer(std::uint64_t token) override;

 private:
  enum class State : std::uint8_t { kStarting, kLoading, kIdle, kBusy, kGone };
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
  };

  void Dispatch(FunctionId function);
  bool ColdStartIsFaster(FunctionId function) const;
  Duration ColdStart(FunctionId function) const;
  void BecomeIdle(std::uint32_t instance);

  SchedulerContext context_;
  PolicyOptions options_;
  std::vector<FunctionState> functions_;
  std::vector<Instance> instances_;
  std::unordered_map<GpuId, std::uint32_t> instance_of_gpu_;
  std::vector<RequestId> batch_;  // scratch
};

}  // namespace gshare
