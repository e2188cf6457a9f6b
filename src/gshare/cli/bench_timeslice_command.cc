// gshare bench timeslice: example functions sharing one emulated GPU's compute engine, measured
// against what the simulator's time-slicing model predicts.
//
//   gshare bench timeslice [--json] [--rounds 100] [--batch 1] [--weights DIR]
//
// For 1, 2 and 3 instances: a node of one emulated GPU starts that many `mlp` function processes
// (the bundled program, as `gshare node replay` does), restores each onto the GPU, and then, round
// after round, sends every instance --batch requests at the same moment, which it runs as one
// batch (one kernel), and waits for all answers (every answer checked against the reference). A
// request's latency is from its submission to its answer, as the live executor sees it. Figures are
// over --rounds rounds, after one untimed round. The control: the same processes and rounds with
// each instance on an emulated GPU of its own, so that they share the host's CPUs and the node's
// event loop but no compute engine.
//
// The prediction: a request's latency alone is its compute (the mlp's one kernel, its forward
// pass over the batch, timed in this process on one BLAS thread, median of 101 calls) plus the rest
// (the function protocol, the process's wake-ups), which the solo latency measured with one
// instance less that compute gives. For n instances, the simulator's compute model
// (sim/compute_sharing.h) is given n runs of that compute arriving together; each predicted latency
// is the rest plus a run's completion time. The rest is taken to overlap freely: on the node the
// processes also share the host's CPUs, which the model does not see. As a bound from the other
// side, the model is also given runs of the whole solo latency (everything a request does, shared
// as compute is).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "examples/models/forward.h"
#include "examples/models/model_layout.h"
#include "examples/runtime/example_weights.h"
#include "examples/runtime/output_checker.h"
#include "gshare/cli/bench_stats.h"
#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/program_folder.h"
#include "gshare/device/device_registry.h"
#include "gshare/model/compute_quantum.h"
#include "gshare/node/live_node.h"
#include "gshare/sim/compute_sharing.h"

namespace gshare::cli {
namespace {

using std::chrono::milliseconds;

struct BenchTimesliceFlags {
  std::string weights_dir;
  int rounds = 100;
  int batch = 1;
  bool json = false;
};

constexpr std::uint64_t kSliceBytes = 64 * kMiB;

double Ms(Duration d) { return ToSeconds(d) * 1e3; }

double Mean(const std::vector<double>& values) {
  return values.empty() ? 0.0
                        : std::accumulate(values.begin(), values.end(), 0.0) /
                              static_cast<double>(values.size());
}

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
                                             const std::string& weights_dir,
                                             examples::OutputChecker& checker) {
  auto devices =
      MakeDeviceOptions("emulated", fmt::format("{}x1Gi", own_gpus ? instances : 1), "12GB/s");
  if (!devices.ok()) return devices.status();
  const std::filesystem::path run_dir =
      std::filesystem::temp_directory_path() /
      fmt::format("gshare-timeslice-{}-{}{}", ::getpid(), instances, own_gpus ? "-own" : "");
  std::error_code error;
  std::filesystem::create_directories(run_dir, error);
  if (error) {
    return Internal(fmt::format("cannot create {}: {}", run_dir.string(), error.message()));
  }
  struct RemoveDir {
    std::filesystem::path dir;
    ~RemoveDir() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } remove_dir{run_dir};

  CheckedMlpRequests requests(checker);
  LiveNodeOptions node_options;
  node_options.devices = std::move(devices).value();
  node_options.snapshot_pool_bytes = 256 * kMiB;
  node_options.prepared_bytes_per_gpu = 256 * kMiB;
  node_options.policy = "";  // its own scheduler below
  node_options.host.run_dir = run_dir.string();
  LiveNodeParts parts;
  parts.requests = &requests;
  GSHARE_ASSIGN_OR_RETURN(auto node, LiveNode::Create(node_options, std::move(parts)));

  GSHARE_ASSIGN_OR_RETURN(const std::filesystem::path folder, ProgramFolder());
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
    command.argv = {(folder / "gshare-function").string(), "--model", "mlp", "--weights",
                    weights_dir + "/mlp.safetensors"};
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
Result<Duration> MlpKernelTime(const std::string& weights_dir, int batch,
                               examples::OutputChecker& checker) {
  GSHARE_ASSIGN_OR_RETURN(
      const std::vector<float> weights,
      examples::LoadExampleWeights(examples::ModelKind::kMlp, weights_dir + "/mlp.safetensors"));
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

struct TimesliceRow {
  int instances = 0;
  double live_median_ms = 0;
  double live_mean_ms = 0;
  double own_gpus_median_ms = 0;   // each instance on a GPU of its own: the host's share alone
  double sim_median_ms = 0;        // the kernel shared, the rest overlapping
  double sim_whole_median_ms = 0;  // the whole solo latency shared
};

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "gshare bench timeslice: %s\n", message.c_str());
  return code;
}

int RunBenchTimeslice(const BenchTimesliceFlags& flags) {
  std::string weights_dir = flags.weights_dir;
  std::filesystem::path scratch;
  if (weights_dir.empty()) {  // the bundled seed's weights, in a scratch folder
    scratch = std::filesystem::temp_directory_path() /
              fmt::format("gshare-bench-timeslice-{}", ::getpid());
    std::filesystem::create_directories(scratch);
    weights_dir = scratch.string();
    // The reference checker reads both bundled models' weights.
    if (auto written = examples::EnsureExampleWeights(scratch); !written.ok()) {
      return Fail(1, written.status().ToString());
    }
  }
  auto checker = examples::OutputChecker::Create(weights_dir);
  if (!checker.ok()) return Fail(1, checker.status().ToString());

  auto kernel = MlpKernelTime(weights_dir, flags.batch, **checker);
  if (!kernel.ok()) return Fail(1, kernel.status().ToString());
  std::vector<TimesliceRow> rows;
  double solo_ms = 0;
  for (int instances = 1; instances <= 3; ++instances) {
    auto latencies =
        MeasureLatencies(instances, false, flags.batch, flags.rounds, weights_dir, **checker);
    // The control: the same processes and requests, each instance on a GPU of its own.
    auto own_gpus = instances == 1 ? latencies
                                   : MeasureLatencies(instances, true, flags.batch, flags.rounds,
                                                      weights_dir, **checker);
    for (const auto* measured : {&latencies, &own_gpus}) {
      if (!measured->ok()) {
        if (!scratch.empty()) std::filesystem::remove_all(scratch);
        return Fail(1, fmt::format("{} instances: {}", instances, measured->status().ToString()));
      }
    }
    TimesliceRow row;
    row.instances = instances;
    row.live_median_ms = Median(*latencies);
    row.live_mean_ms = Mean(*latencies);
    row.own_gpus_median_ms = Median(*own_gpus);
    if (instances == 1) solo_ms = row.live_median_ms;
    const double rest_ms = std::max(0.0, solo_ms - Ms(*kernel));
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
    auto kernel_shared = predict(*kernel, rest_ms);
    auto whole_shared = predict(FromSeconds(solo_ms / 1e3), 0.0);
    if (!kernel_shared.ok()) return Fail(1, kernel_shared.status().ToString());
    if (!whole_shared.ok()) return Fail(1, whole_shared.status().ToString());
    row.sim_median_ms = *kernel_shared;
    row.sim_whole_median_ms = *whole_shared;
    rows.push_back(row);
  }
  if (!scratch.empty()) std::filesystem::remove_all(scratch);

  if (flags.json) {
    nlohmann::json out = {{"rounds", flags.rounds},
                          {"batch", flags.batch},
                          {"kernel_ms", Ms(*kernel)},
                          {"solo_ms", solo_ms},
                          {"quantum_ms", Ms(kDefaultComputeQuantum)},
                          {"results", nlohmann::json::array()}};
    for (const TimesliceRow& r : rows) {
      out["results"].push_back({{"instances", r.instances},
                                {"live_median_ms", r.live_median_ms},
                                {"live_mean_ms", r.live_mean_ms},
                                {"own_gpus_median_ms", r.own_gpus_median_ms},
                                {"sim_median_ms", r.sim_median_ms},
                                {"sim_over_live", r.sim_median_ms / r.live_median_ms},
                                {"sim_whole_median_ms", r.sim_whole_median_ms},
                                {"sim_whole_over_live", r.sim_whole_median_ms / r.live_median_ms}});
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf(
        "mlp on one emulated GPU, %d rounds of batches of %d: kernel %.3f ms, solo latency %.3f "
        "ms (medians)\n",
        flags.rounds, flags.batch, Ms(*kernel), solo_ms);
    std::printf("%-10s %12s %12s %13s %11s %9s %13s %11s\n", "instances", "live p50 ms",
                "live mean ms", "own GPUs p50", "sim p50 ms", "sim/live", "sim whole ms",
                "whole/live");
    for (const TimesliceRow& r : rows) {
      std::printf("%-10d %12.3f %12.3f %13.3f %11.3f %9.2f %13.3f %11.2f\n", r.instances,
                  r.live_median_ms, r.live_mean_ms, r.own_gpus_median_ms, r.sim_median_ms,
                  r.sim_median_ms / r.live_median_ms, r.sim_whole_median_ms,
                  r.sim_whole_median_ms / r.live_median_ms);
    }
  }
  return 0;
}

}  // namespace

void AddBenchTimesliceCommand(CLI::App& bench, CommandContext& context) {
  auto flags = std::make_shared<BenchTimesliceFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "timeslice",
      "1, 2 and 3 mlp processes sharing one emulated GPU, against the simulator's time slicing");
  cmd->add_option("--rounds", flags->rounds, "Timed rounds (after one untimed)")
      ->check(WholeIn(1, 1000))
      ->capture_default_str();
  cmd->add_option("--batch", flags->batch,
                  "Requests each instance gets per round, run as one batch (one kernel)")
      ->check(WholeIn(1, 256))
      ->capture_default_str();
  cmd->add_option("--weights", flags->weights_dir,
                  "Folder of mlp.safetensors and cnn.safetensors (default: written from seed 1)");
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->callback([flags, &context] { context.exit_code = RunBenchTimeslice(*flags); });
}

}  // namespace gshare::cli
