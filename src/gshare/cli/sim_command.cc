// gshare sim: replay a trace under each policy and report GPU usage, SLO attainment and cost.
#include <unistd.h>

#include <fmt/format.h>
#include <chrono>
#include <cstdio>
#include <memory>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/sim_inputs.h"
#include "gshare/common/clock.h"
#include "gshare/common/slice_granularity.h"
#include "gshare/common/units.h"
#include "gshare/model/compute_quantum.h"
#include "gshare/sim/report.h"
#include "gshare/sim/simulator.h"

namespace gshare::cli {
namespace {

struct SimFlags {
  TraceSource source;
  WorldFlags world;
  std::vector<std::string> policies = {"keepalive", "faaswap", "gshare"};
  std::uint64_t seed = 1;
  std::string out = "out/sim";
  std::string keep_alive = "15m";
  std::string pool_idle = "1m";
  std::string protect_horizon = "0s";
  std::string instance_start = "2s";
  double proxy_overhead = 0.40;
  double concurrency_target = 0.70;
  double safety_margin = 0.0;
  std::string quantum = FormatDuration(kDefaultComputeQuantum);
  std::string warmup = "0s";
  std::string slice_granularity = SliceGranularity().ToText();
  std::string instance_cold_start = "0s";
  std::string exec_noise = "none";
  int max_gpus = 0;
  bool cancel_late = false;
  bool quiet = false;
};

int Fail(const Status& status) {
  std::fprintf(stderr, "gshare sim: %s\n", status.ToString().c_str());
  return status.code() == StatusCode::kInternal ? 3 : 2;
}

int RunSim(const SimFlags& flags) {
  SimulationOptions options;
  Duration warmup{};
  for (const auto& [text, target, what] :
       {std::tuple{flags.keep_alive, &options.policy.keep_alive, "--keep-alive"},
        std::tuple{flags.pool_idle, &options.policy.pool_idle, "--pool-idle"},
        std::tuple{flags.protect_horizon, &options.policy.gshare.protect_horizon,
                   "--protect-horizon"},
        std::tuple{flags.instance_start, &options.policy.instance_start, "--instance-start"},
        std::tuple{flags.quantum, &options.executor.quantum, "--quantum"},
        std::tuple{flags.warmup, &warmup, "--warmup"}}) {
    auto parsed = ParseDuration(text);
    if (!parsed.ok()) return Fail(parsed.status().WithContext(what));
    *target = *parsed;
  }
  options.executor.accounting_start = TimePoint(warmup);
  auto granularity = SliceGranularity::Parse(flags.slice_granularity);
  if (!granularity.ok()) return Fail(granularity.status().WithContext("--slice-granularity"));
  options.policy.slice_granularity = *granularity;
  auto cold_start = ParseDuration(flags.instance_cold_start);
  if (!cold_start.ok()) return Fail(cold_start.status().WithContext("--instance-cold-start"));
  options.executor.instance_cold_start = *cold_start;
  options.executor.max_gpus = flags.max_gpus;
  if (options.executor.quantum <= Duration::zero()) {
    return Fail(InvalidArgument("--quantum must be positive"));
  }
  options.policy.proxy_overhead_fraction = flags.proxy_overhead;
  options.policy.concurrency_target = flags.concurrency_target;
  options.policy.gshare.safety_margin = flags.safety_margin;
  if (Status s = CheckPolicyNames(flags.policies); !s.ok()) return Fail(s);

  auto noise = ParseExecNoise(flags.exec_noise);
  if (!noise.ok()) return Fail(noise.status().WithContext("--exec-noise"));
  auto world = MakeWorld(flags.world);
  if (!world.ok()) return Fail(world.status());
  options.executor.world = *world;
  options.executor.world.seed = flags.seed;

  auto reader = WorkloadReader::Open(flags.source);
  if (!reader.ok()) return Fail(reader.status());
  auto workload = reader->Read(flags.seed, *noise);
  if (!workload.ok()) return Fail(workload.status());
  if (flags.cancel_late) {
    // As gshare serve does: a request's latest start is its deadline.
    for (Request& request : workload->requests) request.latest_start = request.deadline;
  }

  RunInfo info{flags.seed,         workload->trace_path,    workload->trace_format,
               reader->gpu().name, FormatExecNoise(*noise), world->Describe()};
  const double span =
      workload->requests.empty() ? 0 : SinceEpochSeconds(workload->requests.back().arrival);
  const bool show_progress = !flags.quiet && isatty(STDERR_FILENO);
  std::vector<PolicyReport> reports;
  for (const auto& policy : flags.policies) {
    const SteadyClock& wall_clock = SteadyClock::Shared();  // the operator's progress and timing
    const TimePoint wall_start = wall_clock.Now();
    TimePoint last_print = wall_start;
    if (show_progress || !flags.quiet) {
      std::fprintf(stderr, "simulating %s: %zu requests, %zu functions...\n", policy.c_str(),
                   workload->requests.size(), workload->functions.size());
    }
    if (show_progress) {
      options.progress = [&](double now_s, std::uint64_t done) {
        const TimePoint wall = wall_clock.Now();
        if (wall - last_print < std::chrono::milliseconds(500)) return;
        last_print = wall;
        std::fprintf(stderr, "\r  %s: t=%.0fs of %.0fs, %llu/%zu requests done   ", policy.c_str(),
                     now_s, span, static_cast<unsigned long long>(done), workload->requests.size());
      };
    } else {
      options.progress = nullptr;
    }
    auto report = Simulate(*workload, policy, options);
    if (show_progress) std::fprintf(stderr, "\n");
    if (!report.ok()) return Fail(report.status());
    const double wall_s = ToSeconds(wall_clock.Now() - wall_start);
    if (!flags.quiet) {
      std::fprintf(stderr, "  %s: %llu events in %.2f s (%.2f M events/s)\n", policy.c_str(),
                   static_cast<unsigned long long>(report->events), wall_s,
                   wall_s > 0 ? static_cast<double>(report->events) / wall_s / 1e6 : 0.0);
    }
    reports.push_back(std::move(report).value());
  }

  std::fputs(SummaryTable(info, *workload, reports).c_str(), stdout);
  std::string figures_note;
  if (Status s = WriteReports(flags.out, info, *workload, reports, &figures_note); !s.ok()) {
    return Fail(s);
  }
  std::printf("wrote %s/summary.json, policies.csv, functions.csv; %s\n", flags.out.c_str(),
              figures_note.c_str());
  return 0;
}

}  // namespace

void AddSimCommand(CLI::App& app, CommandContext& context) {
  auto flags = std::make_shared<SimFlags>();
  CLI::App* cmd = app.add_subcommand(
      "sim", "Replay a trace under each policy and compare GPU usage, SLO attainment and cost");
  AddTraceSourceOptions(cmd, flags->source, flags->policies);
  AddWorldOptions(cmd, flags->world);
  cmd->add_option("--seed", flags->seed, "Seed for every random draw")
      ->check(WholeIn(0, kMaxSeed))
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "Output directory")->capture_default_str();
  cmd->add_option("--keep-alive", flags->keep_alive,
                  "keepalive: idle time before an instance releases its GPU")
      ->capture_default_str();
  cmd->add_option("--pool-idle", flags->pool_idle,
                  "Idle time before a pooled GPU (faaswap, gshare) leaves the pool")
      ->capture_default_str();
  cmd->add_option("--protect-horizon", flags->protect_horizon,
                  "gshare: below the pool's cap, a slice of a function at risk that is expected "
                  "back within this time is not evicted for another (which gets a GPU), and its "
                  "GPU is not released when idle; 0s: off")
      ->capture_default_str();
  cmd->add_option("--instance-start", flags->instance_start,
                  "Start time of a new instance or pool GPU, before the model load")
      ->capture_default_str();
  cmd->add_option("--proxy-overhead", flags->proxy_overhead,
                  "faaswap: proxy forwarding delay as a fraction of batch-1 execution")
      ->check(FiniteIn(0, 100))
      ->capture_default_str();
  cmd->add_option("--concurrency-target", flags->concurrency_target,
                  "keepalive, faascache: requests per instance the autoscaler aims at, as a "
                  "fraction of max_batch (Knative's target percentage)")
      ->check(FiniteIn(0.05, 10))
      ->capture_default_str();
  cmd->add_option("--safety-margin", flags->safety_margin,
                  "gshare: safety margin on predicted execution, the learned 99th percentile "
                  "(x (1 + margin)); fixed, except in gshare-adaptive-margin, where it is the "
                  "starting margin and adapts toward 0.99 attainment")
      ->check(FiniteIn(0, 10))
      ->capture_default_str();
  cmd->add_option("--quantum", flags->quantum, "Time-slice quantum of GPU compute")
      ->capture_default_str();
  cmd->add_option("--slice-granularity", flags->slice_granularity,
                  "Slices are multiples of this: a multiple of 2Mi, at most 64Gi (1Gi or 5Gi mimic "
                  "coarser vGPUs)")
      ->capture_default_str();
  cmd->add_option("--instance-cold-start", flags->instance_cold_start,
                  "Start of a function instance (process) when a restore finds none warm; "
                  "catalog min_instances are warm from the start")
      ->capture_default_str();
  cmd->add_option("--exec-noise", flags->exec_noise,
                  "Execution-time noise per request: none, lognormal:SIGMA or "
                  "lognormal:SIGMA,straggler:P:X (drawn with --seed; policies never see it)")
      ->capture_default_str();
  cmd->add_option("--max-gpus", flags->max_gpus,
                  "Most GPUs held at once (a cluster cap every policy obeys); 0: no cap")
      ->check(WholeIn(0, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--warmup", flags->warmup,
                  "Leave the first part of the trace out of every figure (requests still replay)")
      ->capture_default_str();
  cmd->add_flag("--cancel-late", flags->cancel_late,
                "A request not started by its deadline never runs (as gshare serve answers it "
                "504); counted as never run");
  cmd->add_flag("--quiet", flags->quiet, "No progress or timing on stderr");
  cmd->callback([flags, &context] { context.exit_code = RunSim(*flags); });
}

}  // namespace gshare::cli
