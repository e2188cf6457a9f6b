// NullScheduler: a Scheduler that ignores every event, for tests that script an executor by
// overriding only the events they need.
#pragma once

#include "gshare/sched/scheduler.h"

namespace gshare::testing {

class NullScheduler : public Scheduler {
 public:
  std::string_view name() const override { return "null"; }
  void OnFunctionAdded(FunctionId) override {}
  void OnFunctionRemoved(FunctionId) override {}
  void OnFunctionDrained(FunctionId) override {}
  void OnRequest(const Request&) override {}
  void OnRequestCancelled(RequestId, const Status&) override {}
  void OnGpuReady(GpuId) override {}
  void OnRestoreDone(GpuId, FunctionId, const Status&) override {}
  void OnRunDone(GpuId, FunctionId, std::span<const RequestId>, const RunResult&) override {}
  void OnEvictDone(GpuId, FunctionId, const Status&) override {}
  void OnInstanceDied(GpuId, FunctionId, std::span<const RequestId>, const Status&) override {}
  void OnGpuLost(GpuId, std::span<const RequestId>, const Status&) override {}
  void OnTimer(std::uint64_t) override {}
  std::size_t RequestsHeld() const override { return 0; }
  std::size_t FunctionsHeld() const override { return 0; }
};

}  // namespace gshare::testing
