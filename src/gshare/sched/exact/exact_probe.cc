// exact_probe: how far the exact solver reaches. Generates seeded instances, solves each with
// SolveExact under a time limit and prints one line per instance and a summary (how many were
// solved to optimality, feasible at the limit, timed out, infeasible; solve times).
//
//   exact_probe --instances 30 --seed 1 --min-requests 10 --max-requests 30
//               --min-gpus 2 --max-gpus 4 --time-limit 10
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "gshare/common/random.h"
#include "gshare/sched/exact/generator.h"
#include "gshare/sched/exact/solver.h"

namespace {

using namespace gshare;
using namespace gshare::exact;

struct ProbeFlags {
  int instances = 30;
  std::uint64_t seed = 1;
  int min_requests = 10;
  int max_requests = 30;
  int min_gpus = 2;
  int max_gpus = 4;
  double time_limit_s = 10;
  GeneratorOptions generator;
  std::string cbc_arguments;
};

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

int Run(const ProbeFlags& flags) {
  Random sizes(flags.seed);
  ExactOptions options;
  options.time_limit = FromSeconds(flags.time_limit_s);
  options.cbc_arguments = flags.cbc_arguments;
  int count[4] = {0, 0, 0, 0};
  std::vector<double> optimal_seconds;
  std::vector<double> all_seconds;
  fmt::print("{:>6} {:>8} {:>4} {:>10} {:>12} {:>12} {:>9} {:>8} {:>6} {:>6}\n", "seed", "requests",
             "gpus", "status", "objective", "bound", "time_s", "nodes", "ints", "rows");
  for (int i = 0; i < flags.instances; ++i) {
    const std::uint64_t seed = flags.seed + static_cast<std::uint64_t>(i);
    const int requests =
        flags.min_requests + static_cast<int>(sizes.Below(static_cast<std::uint64_t>(
                                 flags.max_requests - flags.min_requests + 1)));
    const int gpus = flags.min_gpus + static_cast<int>(sizes.Below(static_cast<std::uint64_t>(
                                          flags.max_gpus - flags.min_gpus + 1)));
    Result<ExactInstance> instance = GenerateExactInstance(seed, requests, gpus, SampleFunctions(),
                                                           SampleGpu(), flags.generator);
    if (!instance.ok()) {
      fmt::print(stderr, "exact_probe: {}\n", instance.status().ToString());
      return 2;
    }
    Result<ExactSolution> solution = SolveExact(*instance, options);
    if (!solution.ok()) {
      fmt::print(stderr, "exact_probe: seed {}: {}\n", seed, solution.status().ToString());
      return 2;
    }
    const double seconds = ToSeconds(solution->solve_time);
    ++count[static_cast<int>(solution->status)];
    all_seconds.push_back(seconds);
    if (solution->status == SolveStatus::kOptimal) optimal_seconds.push_back(seconds);
    fmt::print("{:>6} {:>8} {:>4} {:>10} {:>12.6f} {:>12.6f} {:>9.3f} {:>8} {:>6} {:>6}\n", seed,
               requests, gpus, SolveStatusName(solution->status), solution->objective,
               solution->best_bound, seconds, solution->nodes, solution->integer_columns,
               solution->rows);
    std::fflush(stdout);
  }
  fmt::print(
      "instances {}: optimal {}, feasible at the limit {}, timed out {}, infeasible {}; time "
      "limit {:.1f} s\n",
      flags.instances, count[0], count[1], count[2], count[3], flags.time_limit_s);
  if (!optimal_seconds.empty()) {
    fmt::print("solve time of optimal instances: median {:.3f} s, max {:.3f} s\n",
               Median(optimal_seconds),
               *std::max_element(optimal_seconds.begin(), optimal_seconds.end()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ProbeFlags flags;
  CLI::App app{"Solves generated instances exactly and reports how many are solved optimally."};
  app.add_option("--instances", flags.instances, "number of instances")->check(CLI::PositiveNumber);
  app.add_option("--seed", flags.seed, "seed of the first instance (instance i uses seed + i)");
  app.add_option("--min-requests", flags.min_requests)->check(CLI::PositiveNumber);
  app.add_option("--max-requests", flags.max_requests)->check(CLI::PositiveNumber);
  app.add_option("--min-gpus", flags.min_gpus)->check(CLI::PositiveNumber);
  app.add_option("--max-gpus", flags.max_gpus)->check(CLI::PositiveNumber);
  app.add_option("--time-limit", flags.time_limit_s, "seconds per instance")
      ->check(CLI::PositiveNumber);
  app.add_option("--load", flags.generator.load, "offered load per GPU")
      ->check(CLI::PositiveNumber);
  app.add_option("--functions", flags.generator.functions_per_instance,
                 "functions per instance (0: all five sample profiles)");
  app.add_option("--cbc", flags.cbc_arguments, "more CBC arguments, e.g. \"-cuts off\"");
  app.add_option("--slo-floor", flags.generator.slo_floor,
                 "deadline at least this many cold starts after release");
  CLI11_PARSE(app, argc, argv);
  if (flags.min_requests > flags.max_requests || flags.min_gpus > flags.max_gpus) {
    fmt::print(stderr, "exact_probe: a minimum exceeds its maximum\n");
    return 2;
  }
  return Run(flags);
}
