// gshare optgap: how close the online policy comes to the optimum on small random instances.
#include <fmt/format.h>
#include <cstdio>
#include <fstream>
#include <memory>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/model/catalog.h"
#include "gshare/sim/optgap.h"
#include "gshare/sim/workload/model_catalog.h"

namespace gshare::cli {
namespace {

struct OptGapFlags {
  OptGapOptions options;
  std::string out;
  std::string catalog;
  std::string gpu_type = "a100-40gb";
  std::string time_limit = "10s";
  bool quiet = false;
};

int Fail(const Status& status) {
  std::fprintf(stderr, "gshare optgap: %s\n", status.ToString().c_str());
  return status.code() == StatusCode::kInternal ? 3 : 2;
}

int RunOptGap(OptGapFlags& flags) {
  auto limit = ParseDuration(flags.time_limit);
  if (!limit.ok()) return Fail(limit.status().WithContext("--time-limit"));
  flags.options.exact.time_limit = *limit;
  if (flags.options.requests < 1 || flags.options.gpus < 1) {
    return Fail(InvalidArgument("--requests and --gpus must be at least 1"));
  }
  auto catalog = flags.catalog.empty() ? BuiltinModelCatalog() : LoadCatalog(flags.catalog);
  if (!catalog.ok()) return Fail(catalog.status());
  const GpuType* gpu = catalog->FindGpuType(flags.gpu_type);
  if (gpu == nullptr) return Fail(NotFound(fmt::format("unknown GPU type '{}'", flags.gpu_type)));
  std::vector<ResolvedFunction> functions;
  for (const auto& spec : catalog->functions) {
    auto resolved = ResolveFunction(spec, *gpu, catalog->gpu_types);
    if (resolved.ok()) functions.push_back(std::move(resolved).value());
  }
  if (functions.empty()) return Fail(NotFound("no catalog function fits this GPU type"));
  if (!flags.quiet) {
    flags.options.progress = [](int done, int total) {
      std::fprintf(stderr, "\rsolved %d/%d instances", done, total);
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  auto summary = RunOptGap(flags.options, functions, *gpu);
  if (!summary.ok()) return Fail(summary.status());
  std::fputs(OptGapTable(*summary).c_str(), stdout);
  std::ofstream out(flags.out, std::ios::trunc);
  if (!out) return Fail(IoError(fmt::format("cannot write {}", flags.out)));
  out << OptGapJson(flags.options, *summary);
  if (!out.flush()) return Fail(IoError(fmt::format("error writing {}", flags.out)));
  std::printf("wrote %s\n", flags.out.c_str());
  return 0;
}

}  // namespace

void AddOptGapCommand(CLI::App& app, CommandContext& context) {
  auto flags = std::make_shared<OptGapFlags>();
  CLI::App* cmd = app.add_subcommand(
      "optgap",
      "Solve small random instances exactly (MILP) and online; report the optimality gap");
  cmd->add_option("--instances", flags->options.instances, "Number of instances")
      ->check(WholeIn(1, 100'000))
      ->capture_default_str();
  cmd->add_option("--seed", flags->options.seed, "Seed of the instance generator")
      ->check(WholeIn(0, kMaxSeed))
      ->capture_default_str();
  cmd->add_option("--requests", flags->options.requests, "Requests per instance")
      ->check(WholeIn(1, 10'000))
      ->capture_default_str();
  cmd->add_option("--gpus", flags->options.gpus, "GPUs per instance")
      ->check(WholeIn(1, 1'000))
      ->capture_default_str();
  cmd->add_option("--policy", flags->options.policy, "Online policy to compare")
      ->capture_default_str();
  cmd->add_option("--time-limit", flags->time_limit, "Time limit of each exact solve")
      ->capture_default_str();
  cmd->add_option("--load", flags->options.generator.load, "Offered load of the instances")
      ->check(FiniteIn(0.001, 100))
      ->capture_default_str();
  cmd->add_option("--catalog", flags->catalog,
                  "Catalog the profiles are drawn from (default: the shipped data/models.yaml)");
  cmd->add_option("--gpu-type", flags->gpu_type, "GPU type")->capture_default_str();
  cmd->add_option("--out", flags->out, "Output JSON file")->required();
  cmd->add_flag("--quiet", flags->quiet, "No progress on stderr");
  cmd->callback([flags, &context] { context.exit_code = RunOptGap(*flags); });
}

}  // namespace gshare::cli
