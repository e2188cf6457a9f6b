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

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/program_folder.h"
#include "gshare/common/slice_granularity.h"
#include "gshare/device/device_registry.h"
#include "gshare/measure/node_replay.h"
#include "gshare/model/catalog.h"
#include "gshare/sched/policy_registry.h"
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

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "gshare node replay: %s\n", message.c_str());
  return code;
}

int RunReplay(const ReplayFlags& flags) {
  if (flags.device == "cuda") {
    return Fail(2,
                "--device cuda: node replay runs the bundled runtimes, which run on emulated "
                "GPUs only (CUDA programs: gshare serve --device cuda); use --device emulated");
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
  const Result<std::filesystem::path> folder = ProgramFolder();
  if (!folder.ok()) return Fail(1, folder.status().ToString());

  measure::NodeReplayOptions options;
  options.catalog = std::move(catalog).value();
  options.trace = std::move(raw).value();
  options.trace_path = flags.trace;
  options.trace_format = flags.trace_format;
  options.weights_dir = std::filesystem::path(flags.catalog).parent_path() / "weights";
  options.function_program = *folder / "gshare-function";
  options.policy = flags.policy;
  options.devices = std::move(devices).value();
  options.gpus = flags.gpus;
  options.granularity = *granularity;
  options.duration = *duration;
  options.speedup = flags.speedup;
  options.memory_interval = *memory_interval;
  options.out = flags.out;
  options.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  auto replayed = measure::RunNodeReplay(options);
  if (!replayed.ok()) {
    return Fail(replayed.status().code() == StatusCode::kInvalidArgument ? 2 : 1,
                replayed.status().message());
  }
  const measure::NodeReplayResult& r = *replayed;
  std::printf(
      "%s: %zu requests, %llu answered, %llu failed, %llu wrong; SLO attainment %.4f, "
      "%.1f GPU-seconds, p50 %.2f ms, p99 %.2f ms\n",
      flags.policy.c_str(), r.requests, static_cast<unsigned long long>(r.answered),
      static_cast<unsigned long long>(r.failed), static_cast<unsigned long long>(r.wrong),
      r.live.slo_attainment, r.live.gpu_seconds, r.live.latency.p50_ms, r.live.latency.p99_ms);
  std::printf(
      "fidelity (last two thirds): GPU-seconds live %.2f sim %.2f; p50 live %.2f sim %.2f "
      "ms; SLO live %.4f sim %.4f\n",
      r.fidelity.live.gpu_seconds, r.fidelity.sim.gpu_seconds, r.fidelity.live.p50_ms,
      r.fidelity.sim.p50_ms, r.fidelity.live.slo_attainment, r.fidelity.sim.slo_attainment);
  std::printf("%s\n", r.memory_summary.c_str());
  if (!r.memory_error.ok()) {
    std::fprintf(stderr, "memory sampling: %s\n", r.memory_error.ToString().c_str());
  }
  if (r.wrong > 0) return Fail(1, fmt::format("{} wrong answers", r.wrong));
  if (r.answered_twice > 0) {
    return Fail(1, fmt::format("{} answers to requests already answered", r.answered_twice));
  }
  if (r.failed > 0) {
    return Fail(1, fmt::format("{} requests failed; the functions' logs are in {}/run/logs",
                               r.failed, flags.out));
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
