#include "gshare/measure/node_replay.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "examples/runtime/example_weights.h"
#include "examples/runtime/output_checker.h"
#include "gshare/measure/replay_window.h"
#include "gshare/node/launch_plan.h"
#include "gshare/node/live_node.h"
#include "gshare/node/memory_sampler.h"
#include "gshare/node/process/init_protocol.h"
#include "gshare/sched/meter.h"
#include "gshare/sim/report.h"
#include "gshare/sim/simulator.h"

namespace gshare::measure {
namespace {

using std::chrono::milliseconds;

// Growth after warm-up compares means of this many samples (MemorySampler's header), so that one
// sample does not decide it.
constexpr std::size_t kMemoryGrowthWindow = 3;

Status BadInput(const std::string& message) { return InvalidArgument(message); }
Status Failed(const std::string& message) { return Unavailable(message); }

// Inputs and answers of the replay's requests, every answer checked where a reference exists.
class ReplayRequests final : public RequestSource {
 public:
  // The reference checker and the bundled runtime of each function, by FunctionId; before the
  // first request.
  void Set(examples::OutputChecker& checker, std::vector<std::string> models) {
    checker_ = &checker;
    models_ = std::move(models);
  }

  Status Add(RequestId id, FunctionId function) {
    auto input = checker_->InputFor(ModelOf(function), id);
    if (!input.ok()) return input.status();
    InferRequest request;
    request.id = std::to_string(id);
    request.inputs.push_back(std::move(input).value());
    inputs_[id] = {function, std::move(request)};
    return Status::Ok();
  }
  const InferRequest* Input(RequestId id) override {
    auto it = inputs_.find(id);
    return it == inputs_.end() ? nullptr : &it->second.second;
  }
  void Answer(RequestId id, InferResponse response) override {
    auto it = inputs_.find(id);
    if (it == inputs_.end()) return Stray(id, "an answer");
    ++answered;
    const Status right =
        response.outputs.size() == 1
            ? checker_->Check(ModelOf(it->second.first), id, response.outputs.front())
            : InvalidArgument("an answer without exactly one output");
    if (!right.ok()) {
      ++wrong;
      if (wrong <= 5)
        std::fprintf(stderr, "wrong answer to request %llu: %s\n",
                     static_cast<unsigned long long>(id), right.ToString().c_str());
    }
    inputs_.erase(it);
  }
  void Fail(RequestId id, const Status& status) override {
    if (!inputs_.contains(id)) return Stray(id, "a failure");
    Failed(id, status);
  }
  // A request whose input could not be made: it fails without reaching the node.
  void NotMade(RequestId id, const Status& status) { Failed(id, status); }
  void Failed(RequestId id, const Status& status) {
    if (++failed <= 3) {
      std::fprintf(stderr, "request %llu failed: %s\n", static_cast<unsigned long long>(id),
                   status.ToString().c_str());
    }
    inputs_.erase(id);
  }

  // An answer or failure for a request already answered (or never made): a second answer.
  void Stray(RequestId id, const char* what) {
    if (++stray <= 3) {
      std::fprintf(stderr, "%s for request %llu, which was already answered\n", what,
                   static_cast<unsigned long long>(id));
    }
  }

  std::uint64_t answered = 0;
  std::uint64_t failed = 0;
  std::uint64_t wrong = 0;
  std::uint64_t stray = 0;  // answers beyond the first

 private:
  const std::string& ModelOf(FunctionId function) const { return models_[function]; }

  examples::OutputChecker* checker_ = nullptr;
  std::vector<std::string> models_;
  std::map<RequestId, std::pair<FunctionId, InferRequest>> inputs_;
};

struct MemoryReport {
  nlohmann::json json;  // DIR/memory.json
  std::string summary;  // the line printed at the end
};

std::string GrowthText(const std::optional<double>& growth) {
  return growth ? fmt::format("{:+.1f}%", *growth * 100) : std::string("n/a");
}

MemoryReport MakeMemoryReport(const MemorySampler& memory, double warmup_end_s) {
  const auto& samples = memory.samples();
  auto growth = [&](double (*value)(const MemorySample&)) {
    return GrowthAfterWarmup(samples, warmup_end_s, kMemoryGrowthWindow, value);
  };
  auto as_json = [](const std::optional<double>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  const auto node = growth([](const MemorySample& s) { return double(s.node_rss_bytes); });
  const auto total = growth(
      [](const MemorySample& s) { return double(s.node_rss_bytes + s.functions_rss_bytes); });
  MemoryReport report;
  nlohmann::json& json = report.json;
  json["interval_s"] = ToSeconds(memory.interval());
  json["warmup"] = {{"end_s", warmup_end_s},
                    {"definition",
                     "the first third of the replay, the window the execution profiles are "
                     "learned in"}};
  json["growth_window_samples"] = kMemoryGrowthWindow;
  json["growth"] = {
      {"definition",
       "(mean of the last W samples - mean of the last W samples at or before the end of the "
       "warm-up) / the latter"},
      {"node", as_json(node)},
      {"node_and_functions", as_json(total)},
      {"node_anon",
       as_json(growth([](const MemorySample& s) { return double(s.node_rss_anon_bytes); }))},
      {"node_shmem",
       as_json(growth([](const MemorySample& s) { return double(s.node_rss_shmem_bytes); }))},
      {"functions",
       as_json(growth([](const MemorySample& s) { return double(s.functions_rss_bytes); }))}};
  json["samples"] = nlohmann::json::array();
  for (const MemorySample& s : samples) {
    json["samples"].push_back({{"t_s", s.t_s},
                               {"node_rss_bytes", s.node_rss_bytes},
                               {"node_rss_anon_bytes", s.node_rss_anon_bytes},
                               {"node_rss_shmem_bytes", s.node_rss_shmem_bytes},
                               {"functions_rss_bytes", s.functions_rss_bytes},
                               {"functions_rss_anon_bytes", s.functions_rss_anon_bytes},
                               {"functions_rss_shmem_bytes", s.functions_rss_shmem_bytes},
                               {"processes", s.processes}});
  }
  if (samples.empty()) {
    report.summary = "memory: no sample";
    return report;
  }
  const MemorySample& last = samples.back();
  report.summary = fmt::format(
      "memory growth after warm-up ({:.0f} s): node {}, node and functions {}; at the end node "
      "{} ({} anon, {} shmem), functions {} in {} processes; {} samples every {:g} s",
      warmup_end_s, GrowthText(node), GrowthText(total), FormatBytes(last.node_rss_bytes),
      FormatBytes(last.node_rss_anon_bytes), FormatBytes(last.node_rss_shmem_bytes),
      FormatBytes(last.functions_rss_bytes), last.processes, samples.size(),
      ToSeconds(memory.interval()));
  return report;
}

}  // namespace

Result<NodeReplayResult> RunNodeReplay(const NodeReplayOptions& options) {
  std::error_code error;
  std::filesystem::create_directories(options.out / "run", error);
  if (error) {
    return Failed(fmt::format("cannot create {}: {}", options.out.string(), error.message()));
  }
  ReplayRequests replay;
  ProfileLearner learner;
  LiveNode* node_view = nullptr;  // set once the node exists; its runs before then are none
  // The replay's times are the trace's, shifted to start when the node is ready: its clock runs
  // from the node's creation, and writing weights or loading the checker may take seconds.
  TimePoint origin{};  // on the node's clock: trace time zero
  TimePoint third{};   // on the node's clock: the end of the warm-up, the learner's window
  LiveNodeOptions node_options;
  node_options.devices = options.devices;
  node_options.snapshot_pool_bytes = 2 * kGiB;
  // The policy's knobs, the same live and in the simulator's prediction.
  PolicyOptions policy_options;
  policy_options.instance_start = Duration::zero();        // the node's GPUs are there
  policy_options.slice_granularity = options.granularity;  // as the node's vGPU manager
  node_options.policy = options.policy;
  node_options.policy_options = policy_options;
  node_options.host.run_dir = (std::filesystem::path(options.out.string()) / "run").string();
  node_options.host.init_program =
      (options.function_program.parent_path() / init_protocol::kProgramName).string();
  node_options.executor.on_run_observed = [&](FunctionId function, int batch, Duration elapsed,
                                              bool alone) {
    if (node_view != nullptr && node_view->clock().Now() < third) {
      learner.Observe(function, batch, elapsed, alone);
    }
  };
  LiveNodeParts parts;
  parts.requests = &replay;
  auto created = LiveNode::Create(std::move(node_options), std::move(parts));
  if (!created.ok()) return Failed(created.status().ToString());
  LiveNode& node = **created;
  node_view = &node;
  const GpuType& gpu = node.gpu_type();

  auto built = BuildWorkload(options.catalog, options.trace, gpu);
  if (!built.ok()) return BadInput(built.status().ToString());
  Workload workload = std::move(built).value();
  // The first --duration of trace time, at --speedup.
  const Duration horizon = options.duration;
  std::vector<Request> requests = ReplayWindow(workload.requests, horizon, options.speedup);
  if (requests.empty()) return BadInput("the trace has no request in the replayed window");
  workload.requests = requests;
  workload.exec_times.clear();
  workload.exec_factors.clear();
  const Duration span =
      Duration(static_cast<Duration::rep>(static_cast<double>(horizon.count()) / options.speedup));
  const TimePoint trace_third = TimePoint{} + span / 3;  // the same instant in trace time

  // The functions, in the workload's order (ids 0..n-1 on a fresh node, as the simulator's):
  // the bundled runtimes, whose answers the replay can check.
  std::vector<std::string> models;
  for (const ResolvedFunction& function : workload.functions) {
    const FunctionSpec* spec = nullptr;
    for (const FunctionSpec& candidate : options.catalog.functions) {
      if (candidate.name == function.name) spec = &candidate;
    }
    if (spec == nullptr || spec->runtime.empty()) {
      return BadInput(
          fmt::format("function '{}': node replay runs the bundled runtimes (runtime: "
                      "mlp, cnn or echo), whose answers it can check",
                      function.name));
    }
    auto launch =
        PlanLaunch(*spec, gpu, {.function_program = options.function_program, .min_instances = 0});
    if (!launch.ok()) return BadInput(launch.status().ToString());
    launch->function = function;  // exactly what the simulator's prediction runs
    const FunctionId id = node.AddFunction(std::move(launch).value());
    if (id != models.size()) return Failed("the node numbered the functions out of order");
    models.push_back(spec->runtime);
  }
  // The reference needs the bundled weights where the catalog names them: written from the seed
  // when missing.
  const std::filesystem::path& weights_dir = options.weights_dir;
  auto written = examples::EnsureExampleWeights(weights_dir);
  if (!written.ok()) return Failed(written.status().ToString());
  for (const std::string& path : *written) {
    spdlog::info("wrote {} (seed {})", path, examples::kDefaultWeightSeed);
  }
  auto checker = examples::OutputChecker::Create(weights_dir.string());
  if (!checker.ok()) return Failed(checker.status().ToString());
  replay.Set(**checker, std::move(models));
  LiveExecutor& executor = node.executor();
  LoopClock& clock = node.clock();
  origin = clock.Now();
  third = origin + (trace_third - TimePoint{});
  // The whole replay, and its last two thirds (the fidelity window).
  const std::vector<GpuType> gpu_types = {gpu};
  Meter meter(gpu_types, origin);
  Meter window_meter(gpu_types, third);
  executor.AddMeter(meter);
  executor.AddMeter(window_meter);

  std::size_t submitted = 0;
  // Resident memory on the loop, every --memory-interval, on the replay's clock. The warm-up is the
  // first third, the window the profiles are learned in. Its samples are timed from the origin.
  MemorySampler memory(clock, options.memory_interval,
                       [&node] { return node.process_host()->pids(); });
  memory.Start();
  // Arrivals on the node's clock: one timer at a time, re-armed for the next. A request's input
  // is made as it arrives and dropped once answered, so the client (in the node's process) holds
  // only the requests in flight and the node's memory figures are not those of the whole trace.
  std::function<void()> arm;
  LoopTimer arrival;
  arm = [&] {
    if (submitted == requests.size()) return;
    arrival = clock.At(origin + (requests[submitted].arrival - TimePoint{}), [&] {
      while (submitted < requests.size() &&
             origin + (requests[submitted].arrival - TimePoint{}) <= clock.Now()) {
        Request live = requests[submitted];
        live.arrival = clock.Now();
        live.deadline = live.arrival + (requests[submitted].deadline - requests[submitted].arrival);
        ++submitted;
        if (const Status added = replay.Add(live.id, live.function); !added.ok()) {
          replay.NotMade(live.id, added);
          continue;
        }
        node.Submit(live);
      }
      arm();
    });
  };
  arm();
  if (options.progress) {
    options.progress(fmt::format("replaying {} requests over {:.0f} s on {} emulated GPUs ({})",
                                 requests.size(), ToSeconds(span), options.gpus, options.policy));
  }
  // Progress and the bound on a replay that does not finish are the operator's, in wall time.
  const SteadyClock& wall = SteadyClock::Shared();
  TimePoint last_report = wall.Now();
  const TimePoint give_up = wall.Now() + span * 2 + std::chrono::minutes(5);
  // Until every request is answered: the accounting ends at the last answer, as the simulator's
  // does (a pool's idle tail after it is not counted by either).
  while (replay.answered + replay.failed < requests.size()) {
    node.loop().run_one_for(milliseconds(200));
    if (wall.Now() - last_report > std::chrono::seconds(10)) {
      last_report = wall.Now();
      if (options.progress) {
        options.progress(fmt::format("  {:.0f} s: {} submitted, {} answered",
                                     ToSeconds(executor.Now() - origin), submitted,
                                     replay.answered));
      }
    }
    if (wall.Now() > give_up) {
      const std::string state = executor.DebugState();
      node.Shutdown();
      std::string hint;
      if (options.policy == "keepalive") {
        hint = fmt::format(
            "\nkeepalive never takes an idle instance's GPU from another function: with more "
            "functions waiting than the {} GPUs, they wait for a keep-alive to end; faascache "
            "evicts, or give more --gpus",
            options.gpus);
      }
      return Failed(
          fmt::format("the replay did not finish: {} of {} requests unanswered after "
                      "{:.0f} s\n{}{}",
                      requests.size() - replay.answered - replay.failed, requests.size(),
                      ToSeconds(clock.Now() - origin), state, hint));
    }
    if (!executor.violation().ok()) {
      const Status violation = executor.violation();
      node.Shutdown();
      return Failed(violation.ToString());
    }
  }
  const TimePoint end = clock.Now();
  memory.Stop();
  arrival.Cancel();
  if (!executor.violation().ok()) {
    const Status violation = executor.violation();
    node.Shutdown();
    return Failed(violation.ToString());
  }
  const Duration cold_start = executor.Instances(0).cold_start;
  meter.Freeze(end);
  window_meter.Freeze(end);
  PolicyReport live = MakePolicyReport(options.policy, meter, meter.Totals(end), workload.functions,
                                       gpu, origin, 0);
  PolicyReport live_window = MakePolicyReport(
      options.policy, window_meter, window_meter.Totals(end), workload.functions, gpu, third, 0);
  node.Shutdown();

  // The simulator on the last two thirds, with the profiles learned in the first.
  FidelityReport fidelity;
  fidelity.policy = options.policy;
  fidelity.requests = live_window.requests;
  fidelity.live = FiguresOf(live_window);
  Workload predicted = workload;
  for (FunctionId f = 0; f < predicted.functions.size(); ++f) {
    auto learned = learner.ExecByBatch(f, predicted.functions[f].max_batch);
    if (learned.ok()) {
      predicted.functions[f].exec_by_batch = std::move(learned).value();
    } else {
      fidelity.profiles_from_catalog.push_back(predicted.functions[f].name);
    }
  }
  // The whole replay is simulated, so that the simulated node is as warm as the live one when
  // the compared window starts; only the last two thirds are accounted (and compared).
  predicted.requests = requests;
  if (std::any_of(requests.begin(), requests.end(),
                  [&](const Request& r) { return r.arrival >= trace_third; })) {
    SimulationOptions sim_options;
    sim_options.policy = policy_options;
    sim_options.executor.accounting_start = trace_third;
    sim_options.executor.max_gpus = options.gpus;           // the node's GPUs, as live
    sim_options.executor.instance_cold_start = cold_start;  // as observed live
    auto simulated = Simulate(predicted, options.policy, sim_options);
    if (!simulated.ok()) return Failed(simulated.status().ToString());
    fidelity.sim = FiguresOf(*simulated);
  }

  RunInfo info;
  info.trace_path = options.trace_path;
  info.trace_format = options.trace_format;
  info.gpu_type = gpu.name;
  info.world = "live";  // a real node, not a simulated world
  auto summary = nlohmann::json::parse(SummaryJson(info, workload, {live}));
  summary["wrong_outputs"] = replay.wrong;
  summary["answered"] = replay.answered;
  summary["failed"] = replay.failed;
  summary["answered_twice"] = replay.stray;
  const double warmup_end_s = ToSeconds(trace_third - TimePoint{});
  const MemoryReport memory_report = MakeMemoryReport(memory, warmup_end_s);
  const auto out = std::filesystem::path(options.out.string());
  const std::vector<std::pair<std::string, std::string>> files = {
      {"summary.json", summary.dump(2) + "\n"},
      {"fidelity.json", FidelityJson(fidelity)},
      {"memory.json", memory_report.json.dump(2) + "\n"}};
  for (const auto& [name, text] : files) {
    std::ofstream file(out / name);
    file << text;
    file.close();
    if (!file) return Failed(fmt::format("cannot write {}", (out / name).string()));
  }
  NodeReplayResult result;
  result.requests = requests.size();
  result.answered = replay.answered;
  result.failed = replay.failed;
  result.wrong = replay.wrong;
  result.answered_twice = replay.stray;
  result.live = std::move(live);
  result.fidelity = std::move(fidelity);
  result.memory_summary = memory_report.summary;
  result.memory_error = memory.error();
  return result;
}

}  // namespace gshare::measure
