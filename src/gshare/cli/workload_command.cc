// gshare workload: generate a multi-tenant catalog and an invocation trace, or a trace over a
// given catalog's functions (--catalog) (docs/workloads.md).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/model/catalog.h"
#include "gshare/sim/workload/generator.h"

namespace gshare::cli {
namespace {

struct WorkloadFlags {
  int functions = 100;
  std::string duration = "1h";
  std::uint64_t seed = 1;
  std::string out;
  std::string profiles;
  int tenants = 0;
  double burst_cv = 2.0;
  double diurnal_amplitude = 0.5;
  double start_hour = 6;
  std::uint64_t target_invocations = 0;
  double slo_factor = 0;
  std::string regime = "compute";
  bool no_batching = false;
  bool quiet = false;
  std::string catalog;  // a trace over this catalog's functions instead of generated ones
  double rps = 0;       // with --catalog: the mean total request rate; 0: the default
};

int Fail(const Status& status) {
  std::fprintf(stderr, "gshare workload: %s\n", status.ToString().c_str());
  return status.code() == StatusCode::kInternal ? 3 : 2;
}

// The fraction of `values` at or below `limit`.
double FractionAtMost(const std::vector<double>& values, double limit) {
  const auto n = std::count_if(values.begin(), values.end(), [&](double v) { return v <= limit; });
  return values.empty() ? 0 : static_cast<double>(n) / static_cast<double>(values.size());
}

// --catalog: invocations.csv for the catalog's functions, and a summary per function.
int RunCatalogWorkload(const WorkloadFlags& flags, GeneratorOptions options) {
  auto catalog = LoadCatalog(flags.catalog);
  if (!catalog.ok()) return Fail(catalog.status());
  options.rate_per_second = flags.rps;
  auto workload = GenerateCatalogWorkload(*catalog, options);
  if (!workload.ok()) return Fail(workload.status());
  const std::string out = flags.out.empty() ? "." : flags.out;
  if (Status s = WriteInvocations(*workload, out); !s.ok()) return Fail(s);
  const auto& functions = workload->catalog.functions;
  std::vector<int> counts(functions.size(), 0);
  for (const auto& invocation : workload->trace.invocations) ++counts[invocation.function];
  double total = 0;
  for (const double rate : workload->rate_per_second) total += rate;
  std::printf("wrote %s/invocations.csv (%zu invocations over %zu functions; mean rate %.4g/s%s)\n",
              out.c_str(), workload->trace.invocations.size(), functions.size(), total,
              flags.rps > 0 ? "" : ", the default");
  for (std::size_t f = 0; f < functions.size(); ++f) {
    std::printf("  %-40s %10d invocations  mean %.4g/s\n", functions[f].name.c_str(), counts[f],
                workload->rate_per_second[f]);
  }
  return 0;
}

int RunWorkload(const WorkloadFlags& flags) {
  GeneratorOptions options;
  auto duration = ParseDuration(flags.duration);
  if (!duration.ok()) return Fail(duration.status().WithContext("--duration"));
  options.duration = *duration;
  options.seed = flags.seed;
  options.burst_cv = flags.burst_cv;
  options.diurnal_amplitude = flags.diurnal_amplitude;
  options.start_hour = flags.start_hour;
  if (!flags.catalog.empty()) return RunCatalogWorkload(flags, std::move(options));
  if (flags.out.empty()) return Fail(InvalidArgument("--out is required"));
  options.functions = flags.functions;
  options.profile_catalog_path = flags.profiles;
  options.tenants = flags.tenants;
  options.target_invocations = flags.target_invocations;
  options.slo_factor = flags.slo_factor;
  auto regime = ParseWorkloadRegime(flags.regime);
  if (!regime.ok()) return Fail(regime.status().WithContext("--regime"));
  options.regime = *regime;
  options.batching = !flags.no_batching;
  if (!flags.quiet) {
    options.progress = [](int done, int total) {
      std::fprintf(stderr, "\rgenerating arrivals: %d/%d functions", done, total);
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  auto workload = GenerateWorkload(options);
  if (!workload.ok()) return Fail(workload.status());
  if (Status s = WriteGeneratedWorkload(*workload, flags.out); !s.ok()) return Fail(s);

  const auto& functions = workload->catalog.functions;
  std::vector<double> sizes;
  for (const auto& f : functions) sizes.push_back(static_cast<double>(f.model_bytes));
  std::vector<int> counts(functions.size(), 0);
  for (const auto& invocation : workload->trace.invocations) ++counts[invocation.function];
  const auto invoked = std::count_if(counts.begin(), counts.end(), [](int c) { return c > 0; });
  std::vector<double> rates;
  for (const double r : workload->rate_per_second) rates.push_back(r * workload->rate_scale);
  std::printf(
      "wrote %s/catalog.yaml (%zu functions, %zu tenants max) and %s/invocations.csv "
      "(%zu invocations, %lld functions invoked)\n",
      flags.out.c_str(), functions.size(),
      static_cast<std::size_t>(options.tenants > 0 ? options.tenants
                                                   : std::max(1, options.functions / 10)),
      flags.out.c_str(), workload->trace.invocations.size(), static_cast<long long>(invoked));
  const bool memory = options.regime == WorkloadRegime::kMemory;
  std::printf("mean rates: %.1f%% of functions <= 1/hour, %.1f%% <= 1/minute (%s)%s\n",
              100 * FractionAtMost(rates, 1.0 / 3600), 100 * FractionAtMost(rates, 1.0 / 60),
              memory ? "memory regime: every rate between 1/hour and 4/minute" : "targets 45%, 81%",
              workload->rate_scale != 1
                  ? fmt::format("; rates scaled by {:.4g}", workload->rate_scale).c_str()
                  : "");
  std::printf("model sizes: %.1f%% of functions < 1 GB, %.1f%% < 4 GB (targets %s)\n",
              100 * FractionAtMost(sizes, 1e9 - 1), 100 * FractionAtMost(sizes, 4e9 - 1),
              memory ? "20%, 50%" : "66.4%, 78.1%");
  if (options.batching) {
    std::vector<double> batches;
    for (const auto& f : functions) batches.push_back(f.max_batch);
    std::printf("batching: %.1f%% of functions at max_batch 1, %.1f%% at 8 or more\n",
                100 * FractionAtMost(batches, 1), 100 * (1 - FractionAtMost(batches, 7)));
  }
  return 0;
}

}  // namespace

void AddWorkloadCommand(CLI::App& app, CommandContext& context) {
  auto flags = std::make_shared<WorkloadFlags>();
  CLI::App* cmd = app.add_subcommand(
      "workload",
      "Generate a multi-tenant catalog and an invocation trace calibrated to published "
      "statistics (Azure Functions 2019 rates, model sizes of popular models), or with --catalog "
      "a trace over a given catalog's functions");
  CLI::Option* functions = cmd->add_option("--functions", flags->functions, "Number of functions")
                               ->check(WholeIn(1, 1'000'000))
                               ->capture_default_str();
  cmd->add_option("--duration", flags->duration, "Trace length (\"1h\", \"15m\")")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed: the same seed gives byte-identical files")
      ->check(WholeIn(0, kMaxSeed))
      ->capture_default_str();
  cmd->add_option("--out", flags->out,
                  "Output folder for catalog.yaml and invocations.csv (with --catalog: "
                  "invocations.csv only; default the current folder)");
  CLI::Option* profiles =
      cmd->add_option("--profiles", flags->profiles,
                      "Catalog the function profiles are drawn from (default: the shipped "
                      "data/models.yaml, built in)");
  CLI::Option* tenants =
      cmd->add_option("--tenants", flags->tenants, "Number of tenants (default: functions / 10)")
          ->check(WholeIn(1, 1'000'000));
  cmd->add_option("--burst-cv", flags->burst_cv,
                  "Coefficient of variation of inter-arrival times (>= 1; 1 is Poisson)")
      ->check(FiniteIn(1, 100))
      ->capture_default_str();
  cmd->add_option("--diurnal-amplitude", flags->diurnal_amplitude,
                  "Relative amplitude of the daily rate cycle, in [0, 1)")
      ->check(FiniteIn(0, 0.999))
      ->capture_default_str();
  cmd->add_option("--start-hour", flags->start_hour,
                  "Hour of the day at which the trace starts (the rate peaks at 12)")
      ->check(FiniteIn(0, 24))
      ->capture_default_str();
  CLI::Option* target =
      cmd->add_option(
             "--target-invocations", flags->target_invocations,
             "Scale all rates so that about this many invocations are expected (0: off; at "
             "most 1e9)")
          ->check(WholeIn(0, 1'000'000'000))
          ->capture_default_str();
  CLI::Option* slo_factor =
      cmd->add_option("--slo-factor", flags->slo_factor,
                      "Every function's SLO as this x its p90 execution latency, in [1, 100] "
                      "(default: the catalog's 1.5)")
          ->check(FiniteIn(1, 100));
  CLI::Option* catalog =
      cmd->add_option("--catalog", flags->catalog,
                      "Write invocations.csv for this catalog's functions instead of generated "
                      "ones (the generator's popularity skew and burstiness)");
  cmd->add_option(
         "--rps", flags->rps,
         "With --catalog: mean total requests per second, in [1e-6, 1e6] (default: the rate "
         "that keeps one GPU half busy at the functions' batch-1 latencies)")
      ->check(FiniteIn(1e-6, kMaxCatalogRatePerSecond))
      ->needs(catalog);
  CLI::Option* regime =
      cmd->add_option("--regime", flags->regime,
                      "compute: the published rate and size statistics; memory: many large, "
                      "rarely called models, so memory bounds the GPUs")
          ->capture_default_str();
  CLI::Option* no_batching = cmd->add_flag(
      "--no-batching", flags->no_batching,
      "Every function at max_batch 1 with one latency (as earlier versions generated), instead "
      "of a drawn max_batch and sublinear batch curve");
  for (CLI::Option* option :
       {functions, profiles, tenants, target, slo_factor, regime, no_batching}) {
    catalog->excludes(option);
  }
  cmd->add_flag("--quiet", flags->quiet, "No progress on stderr");
  cmd->callback([flags, &context] { context.exit_code = RunWorkload(*flags); });
}

}  // namespace gshare::cli
