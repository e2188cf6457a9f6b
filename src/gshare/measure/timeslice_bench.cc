#include "gshare/measure/timeslice_bench.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "examples/models/forward.h"
#include "examples/models/model_layout.h"
#include "examples/runtime/example_weights.h"
#include "examples/runtime/output_checker.h"
#include "gshare/device/device_registry.h"
#include "gshare/measure/scratch_folder.h"
#include "gshare/measure/stats.h"
#include "gshare/model/compute_quantum.h"
#include "gshare/node/live_node.h"
#include "gshare/node/process/init_protocol.h"
#include "gshare/sim/compute_sharing.h"

namespace gshare::measure {
namespace {

using std::chrono::milliseconds;

constexpr std::uint64_t kSliceBytes = 64 * kMiB;

// The requests' inputs; every answer checked against the reference.
class CheckedMlpRequests final : public RequestSource {
 public:
  explicit CheckedMlpRequests(examples::OutputChecker& checker) : checker_(checker) {}

  Status Add(RequestId id) {
    auto input = checker_.InputFor("mlp", id);
    if (!input.ok()) return input.status();
    InferRequest request;
    request.id = std::to_string(id);
    request.inputs.push_back(std::move(input).value());
    inputs_[id] = std::move(request);
    return Status::Ok();
  }
  const InferRequest* Input(RequestId id) override {
    auto it = inputs_.find(id);
    return it == inputs_.end() ? nullptr : &it->second;
  }
  void Answer(RequestId id, InferResponse response) override {
    if (response.outputs.size() != 1 || !checker_.Check("mlp", id, response.outputs.front()).ok()) {
      ++wrong;
    }
    inputs_.erase(id);
  }
  void Fail(RequestId id, const Status& status) override {
    if (error.ok()) error = status;
    inputs_.erase(id);
  }

  std::uint64_t wrong = 0;
  Status error;

 private:
  examples::OutputChecker& checker_;
  std::map<RequestId, InferRequest> inputs_;
};

// Restores every function once, all onto one GPU or each onto a GPU of its own, then runs each
// function's requests of a round as one batch on its GPU once they are all in; records when each
// run ends.
class RunWhereRestored final : public Scheduler {
 public:
  RunWhereRestored(LiveExecutor& executor, std::size_t functions, bool own_gpus, int batch)
      : executor_(executor),
        functions_(functions),
        own_gpus_(own_gpus),
        batch_(static_cast<std::size_t>(batch)),
        pending_(functions) {}

  Status Start() {
    for (FunctionId f = 0; f < functions_; ++f) {
      if (f == 0 || own_gpus_) {
        GSHARE_ASSIGN_OR_RETURN(const GpuId gpu, executor_.AcquireGpu(0, Duration::zero()));
        gpus_.push_back(gpu);
      } else {
        gpus_.push_back(gpus_.front());
      }
      executor_.Restore(gpus_.back(), f, kSliceBytes);
    }
    return Status::Ok();
  }
  bool ready() const { return restored_ == functions_; }

  std::string_view name() const override { return "run-where-restored"; }
  void OnFunctionAdded(FunctionId) override {}
  void OnFunctionRemoved(FunctionId) override {}
  void OnFunctionDrained(FunctionId) override {}
  void OnRequestCancelled(RequestId, const Status&) override {}
  void OnRequest(const Request& request) override {
    std::vector<RequestId>& pending = pending_[request.function];
    pending.push_back(request.id);
    if (pending.size() < batch_) return;
    executor_.Run(gpus_[request.function], request.function, pending);
    pending.clear();
  }
  void OnGpuReady(GpuId) override {}
  void OnRestoreDone(GpuId, FunctionId, const Status& status) override {
    if (!status.ok()) return Failed(status);
    ++restored_;
  }
  void OnRunDone(GpuId, FunctionId, std::span<const RequestId> batch,
                 const RunResult& result) override {
    if (!result.status.ok()) return Failed(result.status);
    for (RequestId id : batch) ended[id] = executor_.Now();
  }
  void OnEvictDone(GpuId, FunctionId, const Status&) override {}
  void OnInstanceDied(GpuId, FunctionId, std::span<const RequestId>,
                      const Status& status) override {
    Failed(status.WithContext("an instance died"));
  }
  void OnGpuLost(GpuId, std::span<const RequestId>, const Status& status) override {
    Failed(status.WithContext("the GPU was lost"));
  }
  void OnTimer(std::uint64_t) override {}
  std::size_t RequestsHeld() const override {
    std::size_t held = 0;
    for (const auto& pending : pending_) held += pending.size();
    return held;
  }
  std::size_t FunctionsHeld() const override { return functions_; }

  std::map<RequestId, TimePoint> ended;
  Status error;

 private:
  void Failed(const Status& status) {
    if (error.ok()) error = status;
  }

  LiveExecutor& executor_;
  const std::size_t functions_;
  const bool own_gpus_;
  const std::size_t batch_;
  std::vector<GpuId> gpus_;                      // by function
  std::vector<std::vector<RequestId>> pending_;  // by function
  std::size_t restored_ = 0;
};

// Latencies (ms) of the timed rounds' requests with `instances` mlp instances, all on one GPU or
// (`own_gpus`) each on its own.
Result<std::vector<double>> MeasureLatencies(int instances, bool own_gpus, int batch, int rounds,
                                             const std::filesystem::path& weights_dir,
                                             const std::filesystem::path& program,
                                             examples::OutputChecker& checker) {
  auto devices =
      MakeDeviceOptions("emulated", fmt::format("{}x1Gi", own_gpus ? instances : 1), "12GB/s");
  if (!devices.ok()) return devices.status();
  ScratchFolder run_dir;
  GSHARE_RETURN_IF_ERROR(run_dir.Create(
      std::filesystem::temp_directory_path() /
      fmt::format("gshare-timeslice-{}-{}{}", ::getpid(), instances, own_gpus ? "-own" : "")));

  CheckedMlpRequests requests(checker);
  LiveNodeOptions node_options;
  node_options.devices = std::move(devices).value();
  node_options.snapshot_pool_bytes = 256 * kMiB;
  node_options.prepared_bytes_per_gpu = 256 * kMiB;
  node_options.policy = "";  // its own scheduler below
  node_options.host.run_dir = run_dir.path().string();
  node_options.host.init_program = (program.parent_path() / init_protocol::kProgramName).string();
  LiveNodeParts parts;
  parts.requests = &requests;
  GSHARE_ASSIGN_OR_RETURN(auto node, LiveNode::Create(node_options, std::move(parts)));

  std::vector<ResolvedFunction> functions;
  for (int i = 0; i < instances; ++i) {
    ResolvedFunction spec;
    spec.name = fmt::format("mlp{}", i);
    spec.tenant = "bench";
    spec.model_bytes = kSliceBytes / 2;
    spec.gpu_memory_bytes = kSliceBytes;
    spec.max_batch = batch;
    spec.exec_by_batch.assign(static_cast<std::size_t>(batch), milliseconds(5));
    spec.slo = std::chrono::seconds(10);
    functions.push_back(spec);
    InstanceCommand command;
    command.argv = {program.string(), "--model", "mlp", "--weights",
                    (weights_dir / "mlp.safetensors").string()};
    command.model = "mlp";
    command.name = spec.name;
    command.tenant = spec.tenant;
    node->AddFunction({.function = spec, .command = command, .run_timeout = Duration::zero()});
  }
  LiveExecutor& executor = node->executor();
  RunWhereRestored scheduler(executor, functions.size(), own_gpus, batch);
  executor.set_scheduler(&scheduler);

  // A bound on a bench that does not finish, in wall time.
  const SteadyClock& wall = SteadyClock::Shared();
  const TimePoint give_up = wall.Now() + std::chrono::minutes(2);
  const auto run_until = [&](const std::function<bool()>& done) -> Status {
    while (!done()) {
      node->loop().run_one_for(milliseconds(100));
      if (!scheduler.error.ok()) return scheduler.error;
      if (!requests.error.ok()) return requests.error;
      if (!executor.violation().ok()) return executor.violation();
      if (wall.Now() > give_up) {
        return DeadlineExceeded("the bench did not finish:\n" + executor.DebugState());
      }
    }
    return Status::Ok();
  };
  GSHARE_RETURN_IF_ERROR(scheduler.Start());
  GSHARE_RETURN_IF_ERROR(run_until([&] { return scheduler.ready(); }));

  std::vector<double> latencies;
  RequestId next = 0;
  for (int round = 0; round <= rounds; ++round) {
    // Every instance's requests at the same moment: one loop step submits them all.
    std::vector<Request> sent;
    for (int i = 0; i < instances; ++i) {
      for (int b = 0; b < batch; ++b) {
        GSHARE_RETURN_IF_ERROR(requests.Add(next));
        Request request;
        request.id = next++;
        request.function = static_cast<FunctionId>(i);
        request.arrival = executor.Now();
        request.deadline = request.arrival + functions[static_cast<std::size_t>(i)].slo;
        sent.push_back(request);
      }
    }
    for (const Request& request : sent) executor.Submit(request);
    GSHARE_RETURN_IF_ERROR(run_until([&] { return executor.unanswered() == 0; }));
    if (round == 0) continue;  // untimed: first touches
    for (const Request& request : sent) {
      latencies.push_back(Ms(scheduler.ended.at(request.id) - request.arrival));
    }
  }
  if (requests.wrong > 0) {
    return Internal(fmt::format("{} answers were wrong", requests.wrong));
  }
  return latencies;
}

// The mlp's kernel alone (its forward pass on a batch of `batch` examples, one BLAS thread),
// median of 101 calls after one untimed.
Result<Duration> MlpKernelTime(const std::filesystem::path& weights_dir, int batch,
                               examples::OutputChecker& checker) {
  GSHARE_ASSIGN_OR_RETURN(
      const std::vector<float> weights,
      examples::LoadExampleWeights(examples::ModelKind::kMlp, weights_dir / "mlp.safetensors"));
  std::vector<float> values;
  for (int b = 0; b < batch; ++b) {
    GSHARE_ASSIGN_OR_RETURN(const Tensor input,
                            checker.InputFor("mlp", static_cast<std::uint64_t>(b)));
    GSHARE_ASSIGN_OR_RETURN(const auto example, input.Values<float>());
    values.insert(values.end(), example.begin(), example.end());
  }
  GSHARE_ASSIGN_OR_RETURN(const std::size_t workspace_floats,
                          examples::WorkspaceFloats(examples::ModelKind::kMlp, batch));
  std::vector<float> workspace(workspace_floats);
  std::vector<float> logits(static_cast<std::size_t>(batch * examples::MlpLayout().classes));
  examples::UseSingleBlasThread();
  std::vector<double> ms;
  const SteadyClock& wall = SteadyClock::Shared();  // the kernel's own time, on this core
  for (int call = 0; call <= 101; ++call) {
    const TimePoint start = wall.Now();
    GSHARE_RETURN_IF_ERROR(
        examples::Forward(examples::ModelKind::kMlp, weights, values, batch, workspace, logits));
    const Duration took = wall.Now() - start;
    if (call > 0) ms.push_back(Ms(took));
  }
  return FromSeconds(Median(ms) / 1e3);
}

}  // namespace

Result<TimesliceBenchResult> RunTimesliceBench(const TimesliceBenchOptions& options) {
  std::filesystem::path weights_dir = options.weights_dir;
  ScratchFolder scratch;
  if (weights_dir.empty()) {  // the bundled seed's weights, in a scratch folder
    GSHARE_RETURN_IF_ERROR(scratch.Create(std::filesystem::temp_directory_path() /
                                          fmt::format("gshare-bench-timeslice-{}", ::getpid())));
    weights_dir = scratch.path();
    // The reference checker reads both bundled models' weights.
    GSHARE_RETURN_IF_ERROR(examples::EnsureExampleWeights(weights_dir).status());
  }
  GSHARE_ASSIGN_OR_RETURN(auto checker, examples::OutputChecker::Create(weights_dir.string()));
  GSHARE_ASSIGN_OR_RETURN(const Duration kernel,
                          MlpKernelTime(weights_dir, options.batch, *checker));

  TimesliceBenchResult result;
  result.kernel_ms = Ms(kernel);
  result.quantum_ms = Ms(kDefaultComputeQuantum);
  for (int instances = 1; instances <= 3; ++instances) {
    const auto measure = [&](bool own_gpus) -> Result<std::vector<double>> {
      auto latencies = MeasureLatencies(instances, own_gpus, options.batch, options.rounds,
                                        weights_dir, options.function_program, *checker);
      if (!latencies.ok()) {
        return latencies.status().WithContext(fmt::format("{} instances", instances));
      }
      return latencies;
    };
    GSHARE_ASSIGN_OR_RETURN(const std::vector<double> latencies, measure(false));
    // The control: the same processes and requests, each instance on a GPU of its own.
    std::vector<double> own_gpus = latencies;
    if (instances > 1) {
      GSHARE_ASSIGN_OR_RETURN(own_gpus, measure(true));
    }
    TimesliceRow row;
    row.instances = instances;
    row.live_median_ms = Median(latencies);
    row.live_mean_ms = Mean(latencies);
    row.own_gpus_median_ms = Median(own_gpus);
    if (instances == 1) result.solo_ms = row.live_median_ms;
    const double rest_ms = std::max(0.0, result.solo_ms - result.kernel_ms);
    // The median latency the model predicts for `instances` runs of `compute` arriving together,
    // each followed by `rest_ms` that overlaps freely.
    const auto predict = [&](Duration compute, double rest) -> Result<double> {
      const std::vector<ComputeRun> runs(static_cast<std::size_t>(instances),
                                         ComputeRun{Duration::zero(), compute});
      GSHARE_ASSIGN_OR_RETURN(const std::vector<Duration> completions,
                              SimulateComputeSharing(runs, kDefaultComputeQuantum));
      std::vector<double> ms;
      for (const Duration d : completions) ms.push_back(rest + Ms(d));
      return Median(ms);
    };
    GSHARE_ASSIGN_OR_RETURN(row.sim_median_ms, predict(kernel, rest_ms));
    GSHARE_ASSIGN_OR_RETURN(row.sim_whole_median_ms,
                            predict(FromSeconds(result.solo_ms / 1e3), 0.0));
    result.rows.push_back(row);
  }
  return result;
}

}  // namespace gshare::measure
