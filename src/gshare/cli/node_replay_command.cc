// gshare node replay: a trace replayed against real function processes on emulated GPUs, under
// the same policy code as the simulator, every answer checked, and the simulator's prediction of
// the same run measured.
//
//   gshare node replay --catalog C --trace T [--trace-format F] [--policy P]
//                      [--device emulated|auto|cuda] [--gpus 2] [--gpu-memory 16Gi]
//                      [--link-bandwidth 12GB/s] [--speedup 1] [--duration 2m]
//                      [--slice-granularity 128Mi] [--memory-interval 10s] --out DIR
//
// --slice-granularity is the program's one granularity, as in gshare sim: the policy, the node's
// vGPU manager and the simulator's prediction all get it.
//
// Writes DIR/summary.json (the layout of gshare sim, plus "wrong_outputs"), DIR/fidelity.json
// (docs/live-node.md, "Replay and fidelity") and DIR/memory.json (the resident memory of the node
// and its function processes, sampled every --memory-interval, and its growth after the warm-up:
// docs/live-node.md, "Memory over a 10-minute replay"). Exit status: 0; 1 when an answer was wrong
// or the run failed; 2 for bad input.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "examples/runtime/example_weights.h"
#include "examples/runtime/output_checker.h"
#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/program_folder.h"
#include "gshare/common/slice_granularity.h"
#include "gshare/device/device_registry.h"
#include "gshare/model/catalog.h"
#include "gshare/node/launch_plan.h"
#include "gshare/node/live_node.h"
#include "gshare/node/memory_sampler.h"
#include "gshare/sched/meter.h"
#include "gshare/sched/policy_registry.h"
#include "gshare/sim/fidelity.h"
#include "gshare/sim/report.h"
#include "gshare/sim/simulator.h"
#include "gshare/sim/workload/trace_reader.h"

namespace gshare::cli {
namespace {

using std::chrono::milliseconds;

struct ReplayFlags {
  std::string catalog;
  std::string trace;
  std::string trace_format = "invocations";
  std::string policy = "gshare";
  std::string device = "emulated";
  int gpus = 2;
  std::string gpu_memory = "16Gi";
  std::string link_bandwidth = "12GB/s";
  double speedup = 1;
  std::string duration = "2m";
  std::string slice_granularity = SliceGranularity().ToText();
  std::string memory_interval = "10s";
  std::string out;
};

// Growth after warm-up compares means of this many samples (MemorySampler's header), so that one
// sample does not decide it.
constexpr std::size_t kMemoryGrowthWindow = 3;

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "gshare node replay: %s\n", message.c_str());
  return code;
}

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

int RunReplay(const ReplayFlags& flags) {
  if (flags.device == "cuda") {
    return Fail(2,
                "--device cuda: the live node's executor starts functions on emulated GPUs only "
                "(one CUDA function: gshare bench function); use --device emulated");
  }
  auto duration = ParseDuration(flags.duration);
  if (!duration.ok() || *duration <= Duration::zero() || *duration > std::chrono::hours(24)) {
    return Fail(2, "--duration: a duration in (0, 24h] such as 2m");
  }
  auto memory_interval = ParseDuration(flags.memory_interval);
  if (!memory_interval.ok() || *memory_interval < milliseconds(100) ||
      *memory_interval > std::chrono::hours(1)) {
    return Fail(2, "--memory-interval: a duration from 100ms to 1h such as 10s");
  }
  auto gpu_memory = ParseBytes(flags.gpu_memory);
  if (!gpu_memory.ok() || *gpu_memory < 256 * kMiB || *gpu_memory > 1024 * kGiB) {
    return Fail(2, "--gpu-memory: a size from 256Mi to 1Ti");
  }
  auto granularity = SliceGranularity::Parse(flags.slice_granularity);
  if (!granularity.ok()) {
    return Fail(2, granularity.status().WithContext("--slice-granularity").ToString());
  }
  if (*gpu_memory < granularity->bytes()) {
    return Fail(2, fmt::format("--gpu-memory {} is less than one slice (--slice-granularity {})",
                               FormatBytes(*gpu_memory), FormatBytes(granularity->bytes())));
  }
  auto devices = MakeDeviceOptions(flags.device, fmt::format("{}x{}", flags.gpus, *gpu_memory),
                                   flags.link_bandwidth);
  if (!devices.ok()) return Fail(2, devices.status().ToString());
  if (devices->emulated.front().link_bytes_per_second <= 0) {
    return Fail(2,
                "--link-bandwidth: the live node needs a paced link (12GB/s, say), which the "
                "simulator can describe");
  }

  auto catalog = LoadCatalog(flags.catalog);
  if (!catalog.ok()) return Fail(2, catalog.status().ToString());
  auto format = ParseTraceFormat(flags.trace_format);
  if (!format.ok()) return Fail(2, format.status().ToString());
  TraceOptions trace_options;
  auto raw = ReadTrace(flags.trace, *format, *catalog, trace_options);
  if (!raw.ok()) return Fail(2, raw.status().ToString());

  if (std::find(PolicyNames().begin(), PolicyNames().end(), flags.policy) == PolicyNames().end()) {
    return Fail(2, fmt::format("unknown policy '{}'", flags.policy));
  }
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(flags.out) / "run", error);
  if (error) return Fail(1, fmt::format("cannot create {}: {}", flags.out, error.message()));
  const Result<std::filesystem::path> folder = ProgramFolder();
  if (!folder.ok()) return Fail(1, folder.status().ToString());

  ReplayRequests replay;
  ProfileLearner learner;
  LiveNode* node_view = nullptr;  // set once the node exists; its runs before then are none
  TimePoint third{};              // the end of the warm-up: the learner's window
  LiveNodeOptions node_options;
  node_options.devices = std::move(devices).value();
  node_options.snapshot_pool_bytes = 2 * kGiB;
  // The policy's knobs, the same live and in the simulator's prediction.
  PolicyOptions policy_options;
  policy_options.instance_start = Duration::zero();  // the node's GPUs are there
  policy_options.slice_granularity = *granularity;   // as the node's vGPU manager
  node_options.policy = flags.policy;
  node_options.policy_options = policy_options;
  node_options.host.run_dir = (std::filesystem::path(flags.out) / "run").string();
  node_options.executor.on_run_observed = [&](FunctionId function, int batch, Duration elapsed,
                                              bool alone) {
    if (node_view != nullptr && node_view->clock().Now() < third) {
      learner.Observe(function, batch, elapsed, alone);
    }
  };
  LiveNodeParts parts;
  parts.requests = &replay;
  auto created = LiveNode::Create(std::move(node_options), std::move(parts));
  if (!created.ok()) return Fail(1, created.status().ToString());
  LiveNode& node = **created;
  node_view = &node;
  const GpuType& gpu = node.gpu_type();

  auto built = BuildWorkload(*catalog, *raw, gpu);
  if (!built.ok()) return Fail(2, built.status().ToString());
  Workload workload = std::move(built).value();
  // The first --duration of trace time, at --speedup.
  const Duration horizon = *duration;
  std::vector<Request> requests;
  for (const Request& r : workload.requests) {
    if (r.arrival - TimePoint{} >= horizon) break;
    Request scaled = r;
    scaled.id = requests.size();
    scaled.arrival =
        TimePoint{} + Duration(static_cast<Duration::rep>(
                          static_cast<double>((r.arrival - TimePoint{}).count()) / flags.speedup));
    scaled.deadline = scaled.arrival + (r.deadline - r.arrival);
    requests.push_back(scaled);
  }
  if (requests.empty()) return Fail(2, "the trace has no request in the replayed window");
  workload.requests = requests;
  workload.exec_times.clear();
  workload.exec_factors.clear();
  const Duration span =
      Duration(static_cast<Duration::rep>(static_cast<double>(horizon.count()) / flags.speedup));
  third = TimePoint{} + span / 3;

  // The functions, in the workload's order (ids 0..n-1 on a fresh node, as the simulator's):
  // the bundled runtimes, whose answers the replay can check.
  std::vector<std::string> models;
  for (const ResolvedFunction& function : workload.functions) {
    const FunctionSpec* spec = nullptr;
    for (const FunctionSpec& candidate : catalog->functions) {
      if (candidate.name == function.name) spec = &candidate;
    }
    if (spec == nullptr || spec->runtime.empty()) {
      return Fail(2, fmt::format("function '{}': node replay runs the bundled runtimes (runtime: "
                                 "mlp, cnn or echo), whose answers it can check",
                                 function.name));
    }
    auto launch = PlanLaunch(*spec, gpu, {.function_program = *folder / "gshare-function"});
    if (!launch.ok()) return Fail(2, launch.status().ToString());
    launch->function = function;  // exactly what the simulator's prediction runs
    const FunctionId id = node.AddFunction(std::move(launch).value());
    if (id != models.size()) return Fail(1, "the node numbered the functions out of order");
    models.push_back(spec->runtime);
  }
  // The reference needs the bundled weights where the catalog names them: written from the seed
  // when missing.
  const std::filesystem::path weights_dir =
      std::filesystem::path(flags.catalog).parent_path() / "weights";
  auto written = examples::EnsureExampleWeights(weights_dir);
  if (!written.ok()) return Fail(1, written.status().ToString());
  for (const std::string& path : *written) {
    std::fprintf(stderr, "wrote %s (seed %llu)\n", path.c_str(),
                 static_cast<unsigned long long>(examples::kDefaultWeightSeed));
  }
  auto checker = examples::OutputChecker::Create(weights_dir.string());
  if (!checker.ok()) return Fail(1, checker.status().ToString());
  replay.Set(**checker, std::move(models));
  // The whole replay, and its last two thirds (the fidelity window).
  const std::vector<GpuType> gpu_types = {gpu};
  Meter meter(gpu_types, TimePoint{});
  Meter window_meter(gpu_types, third);
  node.executor().AddMeter(meter);
  node.executor().AddMeter(window_meter);
  LiveExecutor& executor = node.executor();
  LoopClock& clock = node.clock();

  std::size_t submitted = 0;
  // Resident memory on the loop, every --memory-interval, on the replay's clock. The warm-up is the
  // first third, the window the profiles are learned in.
  MemorySampler memory(clock, *memory_interval, [&node] { return node.process_host()->pids(); });
  memory.Start();
  // Arrivals on the node's clock: one timer at a time, re-armed for the next. A request's input
  // is made as it arrives and dropped once answered, so the client (in the node's process) holds
  // only the requests in flight and the node's memory figures are not those of the whole trace.
  std::function<void()> arm;
  LoopTimer arrival;
  arm = [&] {
    if (submitted == requests.size()) return;
    arrival = clock.At(requests[submitted].arrival, [&] {
      while (submitted < requests.size() && requests[submitted].arrival <= clock.Now()) {
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
  std::fprintf(stderr, "replaying %zu requests over %.0f s on %d emulated GPUs (%s)\n",
               requests.size(), ToSeconds(span), flags.gpus, flags.policy.c_str());
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
      std::fprintf(stderr, "  %.0f s: %zu submitted, %llu answered\n",
                   ToSeconds(executor.Now() - TimePoint{}), submitted,
                   static_cast<unsigned long long>(replay.answered));
    }
    if (wall.Now() > give_up) {
      const std::string state = executor.DebugState();
      node.Shutdown();
      std::string hint;
      if (flags.policy == "keepalive") {
        hint = fmt::format(
            "\nkeepalive never takes an idle instance's GPU from another function: with more "
            "functions waiting than the {} GPUs, they wait for a keep-alive to end; faascache "
            "evicts, or give more --gpus",
            flags.gpus);
      }
      return Fail(
          1, fmt::format("the replay did not finish: {} of {} requests unanswered after {:.0f} "
                         "s\n{}{}",
                         requests.size() - replay.answered - replay.failed, requests.size(),
                         ToSeconds(clock.Now() - TimePoint{}), state, hint));
    }
    if (!executor.violation().ok()) {
      const Status violation = executor.violation();
      node.Shutdown();
      return Fail(1, violation.ToString());
    }
  }
  const TimePoint end = clock.Now();
  memory.Stop();
  arrival.Cancel();
  if (!executor.violation().ok()) {
    const Status violation = executor.violation();
    node.Shutdown();
    return Fail(1, violation.ToString());
  }
  const Duration cold_start = executor.Instances(0).cold_start;
  meter.Freeze(end);
  window_meter.Freeze(end);
  PolicyReport live = MakePolicyReport(flags.policy, meter, meter.Totals(end), workload.functions,
                                       gpu, TimePoint{}, 0);
  PolicyReport live_window = MakePolicyReport(flags.policy, window_meter, window_meter.Totals(end),
                                              workload.functions, gpu, third, 0);
  node.Shutdown();

  // The simulator on the last two thirds, with the profiles learned in the first.
  FidelityReport fidelity;
  fidelity.policy = flags.policy;
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
                  [&](const Request& r) { return r.arrival >= third; })) {
    SimulationOptions sim_options;
    sim_options.policy = policy_options;
    sim_options.executor.accounting_start = third;
    sim_options.executor.max_gpus = flags.gpus;             // the node's GPUs, as live
    sim_options.executor.instance_cold_start = cold_start;  // as observed live
    auto simulated = Simulate(predicted, flags.policy, sim_options);
    if (!simulated.ok()) return Fail(1, simulated.status().ToString());
    fidelity.sim = FiguresOf(*simulated);
  }

  RunInfo info;
  info.trace_path = flags.trace;
  info.trace_format = flags.trace_format;
  info.gpu_type = gpu.name;
  auto summary = nlohmann::json::parse(SummaryJson(info, workload, {live}));
  summary["wrong_outputs"] = replay.wrong;
  summary["answered"] = replay.answered;
  summary["failed"] = replay.failed;
  summary["answered_twice"] = replay.stray;
  const double warmup_end_s = ToSeconds(third - TimePoint{});
  const MemoryReport memory_report = MakeMemoryReport(memory, warmup_end_s);
  const auto out = std::filesystem::path(flags.out);
  const std::vector<std::pair<std::string, std::string>> files = {
      {"summary.json", summary.dump(2) + "\n"},
      {"fidelity.json", FidelityJson(fidelity)},
      {"memory.json", memory_report.json.dump(2) + "\n"}};
  for (const auto& [name, text] : files) {
    std::ofstream file(out / name);
    file << text;
    file.close();
    if (!file) return Fail(1, fmt::format("cannot write {}", (out / name).string()));
  }
  std::printf(
      "%s: %llu requests, %llu answered, %llu failed, %llu wrong; SLO attainment %.4f, "
      "%.1f GPU-seconds, p50 %.2f ms, p99 %.2f ms\n",
      flags.policy.c_str(), static_cast<unsigned long long>(requests.size()),
      static_cast<unsigned long long>(replay.answered),
      static_cast<unsigned long long>(replay.failed), static_cast<unsigned long long>(replay.wrong),
      live.slo_attainment, live.gpu_seconds, live.latency.p50_ms, live.latency.p99_ms);
  std::printf(
      "fidelity (last two thirds): GPU-seconds live %.2f sim %.2f; p50 live %.2f sim %.2f "
      "ms; SLO live %.4f sim %.4f\n",
      fidelity.live.gpu_seconds, fidelity.sim.gpu_seconds, fidelity.live.p50_ms,
      fidelity.sim.p50_ms, fidelity.live.slo_attainment, fidelity.sim.slo_attainment);
  std::printf("%s\n", memory_report.summary.c_str());
  if (!memory.error().ok()) {
    std::fprintf(stderr, "memory sampling: %s\n", memory.error().ToString().c_str());
  }
  if (replay.wrong > 0) return Fail(1, fmt::format("{} wrong answers", replay.wrong));
  if (replay.stray > 0) {
    return Fail(1, fmt::format("{} answers to requests already answered", replay.stray));
  }
  if (replay.failed > 0) {
    return Fail(1, fmt::format("{} requests failed; the functions' logs are in {}/run/logs",
                               replay.failed, flags.out));
  }
  return 0;
}

}  // namespace

void AddNodeReplayCommand(CLI::App& node, CommandContext& context) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* cmd = node.add_subcommand(
      "replay", "Replay a trace against real function processes on emulated GPUs");
  cmd->add_option("--catalog", flags->catalog, "Catalog of live functions")->required();
  cmd->add_option("--trace", flags->trace, "Trace file")->required();
  cmd->add_option("--trace-format", flags->trace_format, "Trace format")->capture_default_str();
  cmd->add_option("--policy", flags->policy, "Scheduling policy")->capture_default_str();
  cmd->add_option("--device", flags->device, "emulated, auto or cuda")->capture_default_str();
  cmd->add_option("--gpus", flags->gpus, "Emulated GPUs")
      ->check(WholeIn(1, 64))
      ->capture_default_str();
  cmd->add_option("--gpu-memory", flags->gpu_memory, "Memory of each emulated GPU")
      ->capture_default_str();
  cmd->add_option("--link-bandwidth", flags->link_bandwidth, "Host-to-GPU link of each GPU")
      ->capture_default_str();
  cmd->add_option("--speedup", flags->speedup, "Replay this many times faster than the trace")
      ->check(FiniteIn(0.01, 1000))
      ->capture_default_str();
  cmd->add_option("--duration", flags->duration, "Replay the first DURATION of the trace")
      ->capture_default_str();
  cmd->add_option("--slice-granularity", flags->slice_granularity,
                  "Slices are multiples of this: a multiple of 2Mi, at most 64Gi (the policy and "
                  "the node's vGPU manager get the same)")
      ->capture_default_str();
  cmd->add_option("--memory-interval", flags->memory_interval,
                  "Sample resident memory this often (100ms to 1h)")
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "Folder for summary.json, fidelity.json, memory.json, run/")
      ->required();
  cmd->callback([flags, &context] { context.exit_code = RunReplay(*flags); });
}

}  // namespace gshare::cli
