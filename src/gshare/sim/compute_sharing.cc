#include "gshare/sim/compute_sharing.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "gshare/sim/sim_executor.h"

namespace gshare {
namespace {

// Every run is its own function with one request; the scheduler runs each request on GPU 0 when
// it arrives.
class RunOnArrival final : public Scheduler {
 public:
  explicit RunOnArrival(SimulatedExecutor& executor) : executor_(executor) {}
  std::string_view name() const override { return "run-on-arrival"; }
  void OnFunctionAdded(FunctionId) override {}
  void OnFunctionRemoved(FunctionId) override {}
  void OnFunctionDrained(FunctionId) override {}
  void OnRequestCancelled(RequestId, const Status&) override {}
  void OnRequest(const Request& request) override {
    executor_.Run(0, request.function, std::span(&request.id, 1));
  }
  void OnGpuReady(GpuId) override {}
  void OnRestoreDone(GpuId, FunctionId, const Status&) override {}
  void OnRunDone(GpuId, FunctionId, std::span<const RequestId>, const RunResult&) override {}
  void OnEvictDone(GpuId, FunctionId, const Status&) override {}
  void OnInstanceDied(GpuId, FunctionId, std::span<const RequestId>, const Status&) override {}
  void OnGpuLost(GpuId, std::span<const RequestId>, const Status&) override {}
  void OnTimer(std::uint64_t) override {}
  std::size_t RequestsHeld() const override { return 0; }
  std::size_t FunctionsHeld() const override { return 0; }

 private:
  SimulatedExecutor& executor_;
};

}  // namespace

Result<std::vector<Duration>> SimulateComputeSharing(std::span<const ComputeRun> runs,
                                                     Duration quantum) {
  for (const ComputeRun& run : runs) {
    if (run.arrival < Duration::zero() || run.compute <= Duration::zero()) {
      return InvalidArgument(
          "SimulateComputeSharing: arrivals must not be negative and compute times positive");
    }
  }
  // The restores (one byte each, no overhead) end long before the scenario starts.
  const TimePoint start = AtSeconds(1);
  constexpr std::uint64_t kSliceBytes = 1 << 20;
  Workload workload;
  workload.gpu.name = "compute-sharing";
  workload.gpu.memory_bytes = kSliceBytes * std::max<std::uint64_t>(runs.size(), 1);
  workload.gpu.h2d_bytes_per_second = 1e9;
  std::vector<std::size_t> by_arrival(runs.size());
  std::iota(by_arrival.begin(), by_arrival.end(), 0);
  std::stable_sort(by_arrival.begin(), by_arrival.end(),
                   [&](std::size_t a, std::size_t b) { return runs[a].arrival < runs[b].arrival; });
  for (std::size_t i = 0; i < runs.size(); ++i) {
    ResolvedFunction function;
    function.name = fmt::format("run{}", i);
    function.tenant = "scenario";
    function.model_bytes = 1;
    function.gpu_memory_bytes = kSliceBytes;
    function.exec_by_batch = {runs[i].compute};
    function.slo = std::chrono::hours(1);
    workload.functions.push_back(std::move(function));
  }
  // Requests sorted by arrival, ids dense; request k is run by_arrival[k] (its function).
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const std::size_t run = by_arrival[k];
    Request request;
    request.id = k;
    request.function = static_cast<FunctionId>(run);
    request.arrival = start + runs[run].arrival;
    request.deadline = request.arrival + workload.functions[run].slo;
    workload.requests.push_back(request);
  }

  SimulatedExecutor::Options options;
  options.quantum = quantum;
  SimulatedExecutor executor(workload, options);
  RunOnArrival scheduler(executor);
  executor.set_scheduler(&scheduler);
  GSHARE_ASSIGN_OR_RETURN(const GpuId gpu, executor.AcquireGpu(0, Duration::zero()));
  for (std::size_t i = 0; i < runs.size(); ++i) {
    executor.Restore(gpu, static_cast<FunctionId>(i), kSliceBytes);
  }
  GSHARE_RETURN_IF_ERROR(executor.RunToEnd(nullptr));
  std::vector<Duration> completion(runs.size());
  for (std::size_t k = 0; k < runs.size(); ++k) {
    completion[by_arrival[k]] = executor.completion_times()[k] - start;
  }
  return completion;
}

}  // namespace gshare
