// gshare compare: sweep each policy's own knobs and compare the policies at equal SLO attainment.
#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/sim_inputs.h"
#include "gshare/common/units.h"
#include "gshare/sim/knob_grid.h"
#include "gshare/sim/pareto.h"
#include "gshare/sim/sweep.h"

namespace gshare::cli {
namespace {

constexpr std::uint64_t kMaxSeeds = 100;

int DefaultJobs() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

struct CompareFlags {
  TraceSource source;
  WorldFlags world;
  std::vector<std::string> policies = {"keepalive", "faaswap", "gshare"};
  std::vector<std::string> knobs;
  double slo_target = 0.99;
  int seeds = 1;
  std::string warmup = "0s";
  std::string exec_noise = "none";
  int max_gpus = 0;
  int jobs = DefaultJobs();
  bool quiet = false;
  std::string out;
};

int Fail(const Status& status) {
  std::fprintf(stderr, "gshare compare: %s\n", status.ToString().c_str());
  return status.code() == StatusCode::kInternal ? 3 : 2;
}

// The grids of the policies compared, with every --knob applied.
Result<std::vector<PolicyGrid>> MakeGrids(const CompareFlags& flags) {
  GSHARE_RETURN_IF_ERROR(CheckPolicyNames(flags.policies));
  std::vector<PolicyGrid> grids;
  for (const std::string& policy : flags.policies) {
    for (const PolicyGrid& grid : grids) {
      if (grid.policy == policy) {
        return InvalidArgument(fmt::format("--policy: '{}' is listed twice", policy));
      }
    }
    grids.push_back(DefaultGrid(policy));
  }
  for (const std::string& knob : flags.knobs) {
    GSHARE_RETURN_IF_ERROR(OverrideKnob(knob, grids).WithContext("--knob"));
  }
  return grids;
}

int RunCompare(const CompareFlags& flags) {
  auto warmup = ParseDuration(flags.warmup);
  if (!warmup.ok()) return Fail(warmup.status().WithContext("--warmup"));
  if (!(flags.slo_target > 0)) {
    return Fail(InvalidArgument(fmt::format(
        "--slo-target: '{}' is outside (0, 1]: a target must be above 0", flags.slo_target)));
  }
  auto grids = MakeGrids(flags);
  if (!grids.ok()) return Fail(grids.status());
  std::vector<SweepPoint> points;
  std::vector<std::size_t> policy_of_point;
  for (std::size_t g = 0; g < grids->size(); ++g) {
    for (KnobSetting& setting : GridSettings((*grids)[g])) {
      points.push_back({(*grids)[g].policy, std::move(setting)});
      policy_of_point.push_back(g);
    }
  }
  auto noise = ParseExecNoise(flags.exec_noise);
  if (!noise.ok()) return Fail(noise.status().WithContext("--exec-noise"));
  auto world = MakeWorld(flags.world);
  if (!world.ok()) return Fail(world.status());
  auto reader = WorkloadReader::Open(flags.source);
  if (!reader.ok()) return Fail(reader.status());
  auto workload = reader->Read(1, *noise);
  if (!workload.ok()) return Fail(workload.status());
  // Every seed's workload must outlast the warm-up (with --generate each seed draws its own).
  auto check_warmup = [&](const Workload& w, int seed) -> Status {
    if (!w.requests.empty() && TimePoint(*warmup) > w.requests.back().arrival) {
      return InvalidArgument(fmt::format(
          "--warmup: the accounting start ({:.3f} s) is after the last arrival{}",
          ToSeconds(*warmup), seed > 1 ? fmt::format(" of seed {}", seed) : std::string()));
    }
    return Status::Ok();
  };
  if (Status s = check_warmup(*workload, 1); !s.ok()) return Fail(s);
  // The report names the first seed's workload.
  const std::size_t first_requests = workload->requests.size();
  const std::size_t first_functions = workload->functions.size();

  // Seeds draw the execution noise, the world's restore noise and priors and, in some trace
  // formats, the trace; where they draw nothing, every seed gives the same runs, so each point
  // runs once and counts for each seed.
  const bool seeds_draw = !noise->none() || !world->restore_noise.none() ||
                          world->prior_error > 0 || reader->TraceDrawsWithSeed();
  const int runs_per_point = seeds_draw ? flags.seeds : 1;
  const std::size_t total = points.size() * static_cast<std::size_t>(runs_per_point);
  const auto wall_start = std::chrono::steady_clock::now();
  if (!flags.quiet) {
    std::fprintf(stderr,
                 "comparing %zu points x %d seed%s on %d thread%s: %zu requests, %zu "
                 "functions\n",
                 points.size(), flags.seeds, flags.seeds == 1 ? "" : "s", flags.jobs,
                 flags.jobs == 1 ? "" : "s", workload->requests.size(), workload->functions.size());
    if (!seeds_draw && flags.seeds > 1) {
      std::fprintf(stderr,
                   "  no noise, exact priors and a trace format that draws nothing with the "
                   "seed: every seed gives the same runs, each point runs once\n");
    }
  }

  SweepOptions sweep;
  sweep.base.executor.accounting_start = TimePoint(*warmup);
  sweep.base.executor.max_gpus = flags.max_gpus;
  sweep.base.executor.world = *world;
  sweep.jobs = flags.jobs;
  std::vector<std::vector<RunFigures>> by_seed;  // [seed - 1][point]
  std::size_t finished = 0;
  for (int seed = 1; seed <= runs_per_point; ++seed) {
    if (seed > 1) {
      if (reader->TraceDrawsWithSeed()) {
        workload = reader->Read(static_cast<std::uint64_t>(seed), *noise);
        if (!workload.ok()) return Fail(workload.status());
        if (Status s = check_warmup(*workload, seed); !s.ok()) return Fail(s);
      } else {
        DrawExecNoise(*noise, static_cast<std::uint64_t>(seed), *workload);
      }
    }
    sweep.base.executor.world.seed = static_cast<std::uint64_t>(seed);
    if (!flags.quiet) {
      sweep.done = [&](std::size_t i, const RunFigures& f, double wall_s) {
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
        std::fprintf(stderr,
                     "  [%zu/%zu] %s %s, seed %d: SLO met %.2f%%, %.1f GPU-s (%.1f s; %.0f s "
                     "elapsed)\n",
                     ++finished, total, points[i].policy.c_str(),
                     DescribeKnobs(points[i].knobs).c_str(), seed, 100 * f.slo_attainment,
                     f.gpu_seconds, wall_s, elapsed);
      };
    }
    auto figures = RunSweep(*workload, points, sweep);
    if (!figures.ok()) return Fail(figures.status());
    by_seed.push_back(std::move(figures).value());
  }
  while (static_cast<int>(by_seed.size()) < flags.seeds) by_seed.push_back(by_seed.front());

  CompareSummary summary;
  summary.slo_target = flags.slo_target;
  summary.world = world->Describe();
  for (const PolicyGrid& grid : *grids) summary.policies.push_back({grid.policy, {}, {}});
  for (std::size_t i = 0; i < points.size(); ++i) {
    std::vector<std::pair<std::string, std::string>> knobs;
    for (const auto& [knob, value] : points[i].knobs) knobs.emplace_back(KnobName(knob), value);
    std::vector<RunFigures> runs;
    for (const auto& seed_figures : by_seed) runs.push_back(seed_figures[i]);
    summary.policies[policy_of_point[i]].points.push_back(AggregateRuns(std::move(knobs), runs));
  }
  SelectAtSlo(summary);

  CompareInfo info;
  info.trace_path = workload->trace_path;
  info.trace_format = workload->trace_format;
  info.gpu_type = reader->gpu().name;
  info.requests = first_requests;
  info.functions = first_functions;
  info.seeds = flags.seeds;
  info.warmup_seconds = ToSeconds(*warmup);
  info.exec_noise = FormatExecNoise(*noise);
  std::fputs(ParetoTable(info, summary).c_str(), stdout);
  std::string figures_note;
  if (Status s = WriteParetoReports(flags.out, info, summary, &figures_note); !s.ok()) {
    return Fail(s);
  }
  std::printf("wrote %s/pareto.json, pareto.csv; %s\n", flags.out.c_str(), figures_note.c_str());
  return 0;
}

}  // namespace

void AddCompareCommand(CLI::App& app, CommandContext& context) {
  auto flags = std::make_shared<CompareFlags>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Sweep each policy's own knobs and compare the policies at equal SLO attainment "
      "(pareto.json, pareto.csv, pareto.png)");
  AddTraceSourceOptions(cmd, flags->source, flags->policies);
  AddWorldOptions(cmd, flags->world);
  cmd->add_option("--knob", flags->knobs,
                  "POLICY.KNOB=V1,V2,...: the values of one knob of one policy, instead of its "
                  "default grid (repeatable; knobs: keep_alive, concurrency_target, pool_idle, "
                  "proxy_overhead, safety_margin, gpus_per_function, protect_horizon)");
  cmd->add_option("--slo-target", flags->slo_target,
                  "SLO attainment the policies are compared at: each policy's cheapest point "
                  "that reaches it, in (0, 1]")
      ->check(FiniteIn(0, 1))
      ->capture_default_str();
  cmd->add_option("--seeds", flags->seeds,
                  "Each point is the mean over seeds 1..N of the execution noise (and of the "
                  "trace's draws, in azure-2019 and azure-2021); 95% intervals when N > 1")
      ->check(WholeIn(1, kMaxSeeds))
      ->capture_default_str();
  cmd->add_option("--warmup", flags->warmup,
                  "Leave the first part of the trace out of every figure (requests still replay)")
      ->capture_default_str();
  cmd->add_option("--exec-noise", flags->exec_noise,
                  "Execution-time noise per request: none, lognormal:SIGMA or "
                  "lognormal:SIGMA,straggler:P:X (drawn per seed; policies never see it)")
      ->capture_default_str();
  cmd->add_option("--max-gpus", flags->max_gpus,
                  "Most GPUs held at once (a cluster cap every policy obeys); 0: no cap")
      ->check(WholeIn(0, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--jobs", flags->jobs,
                  "Simulations run at once (default: the number of cores); the results do not "
                  "depend on it")
      ->check(WholeIn(1, 1024))
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "Output directory")->required();
  cmd->add_flag("--quiet", flags->quiet, "No progress on stderr");
  cmd->callback([flags, &context] { context.exit_code = RunCompare(*flags); });
}

}  // namespace gshare::cli
