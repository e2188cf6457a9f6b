// gshare optgap: how close the online policy comes to the optimum on small random instances.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <charconv>
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
  std::string instance_class = "default";
  std::vector<std::string> sizes;  // --sizes: empty (or one empty value) means the default ladder
  int size_instances = 5;
  std::string size_time_limit = "60s";
  bool quiet = false;
};

int Fail(const Status& status) {
  std::fprintf(stderr, "gshare optgap: %s\n", status.ToString().c_str());
  return status.code() == StatusCode::kInternal ? 3 : 2;
}

// The --sizes list: its values, or the default ladder when the flag came without any.
Result<std::vector<int>> SizeLadder(const std::vector<std::string>& values) {
  if (values.empty() || (values.size() == 1 && values[0].empty())) {
    return std::vector<int>(kDefaultSizeLadder.begin(), kDefaultSizeLadder.end());
  }
  std::vector<int> sizes;
  for (const std::string& value : values) {
    int size = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), size);
    if (value.empty() || error != std::errc() || end != value.data() + value.size() || size < 1 ||
        size > 10'000) {
      return InvalidArgument(
          fmt::format("--sizes: '{}' is not a number of requests from 1 to 10000", value));
    }
    sizes.push_back(size);
  }
  return sizes;
}

int RunOptGap(OptGapFlags& flags, bool with_sizes) {
  auto limit = ParseDuration(flags.time_limit);
  if (!limit.ok()) return Fail(limit.status().WithContext("--time-limit"));
  flags.options.exact.time_limit = *limit;
  if (flags.instance_class != "default" && flags.instance_class != "hot") {
    return Fail(InvalidArgument(
        fmt::format("--class: unknown class '{}' (known: default, hot)", flags.instance_class)));
  }
  flags.options.generator.hot = flags.instance_class == "hot";
  if (flags.options.requests < 1 || flags.options.gpus < 1) {
    return Fail(InvalidArgument("--requests and --gpus must be at least 1"));
  }
  std::vector<int> sizes;
  OptGapOptions size_options = flags.options;
  if (with_sizes) {
    auto size_limit = ParseDuration(flags.size_time_limit);
    if (!size_limit.ok()) return Fail(size_limit.status().WithContext("--size-time-limit"));
    size_options.exact.time_limit = *size_limit;
    auto ladder = SizeLadder(flags.sizes);
    if (!ladder.ok()) return Fail(ladder.status());
    sizes = std::move(ladder).value();
    if (Status bad = CheckSizeLadder(sizes, flags.size_instances); !bad.ok()) return Fail(bad);
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
  if (with_sizes) {
    std::function<void(int, int, int)> progress;
    if (!flags.quiet) {
      progress = [](int requests, int done, int total) {
        std::fprintf(stderr, "\rsizes: %d requests, solved %d/%d instances", requests, done, total);
        if (done == total) std::fprintf(stderr, "\n");
      };
    }
    auto reach =
        RunSizeLadder(size_options, sizes, flags.size_instances, functions, *gpu, progress);
    if (!reach.ok()) return Fail(reach.status());
    summary->sizes = std::move(reach).value();
  }
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
  cmd->add_option("--policy", flags->options.policy,
                  "Online policy to compare: a simulator policy, or best-fit")
      ->capture_default_str();
  cmd->add_option("--time-limit", flags->time_limit, "Time limit of each exact solve")
      ->capture_default_str();
  cmd->add_option("--load", flags->options.generator.load, "Offered load of the instances")
      ->check(FiniteIn(0.001, 100))
      ->capture_default_str();
  cmd->add_option("--class", flags->instance_class,
                  "default: every deadline admits two cold starts; hot: a hot function and "
                  "at-risk ones whose deadlines admit under two (the cache queue is scored)")
      ->capture_default_str();
  cmd->add_option("--catalog", flags->catalog,
                  "Catalog the profiles are drawn from (default: the shipped data/models.yaml)");
  cmd->add_option("--gpu-type", flags->gpu_type, "GPU type")->capture_default_str();
  cmd->add_option("--out", flags->out, "Output JSON file")->required();
  CLI::Option* sizes =
      cmd->add_option("--sizes", flags->sizes,
                      fmt::format("Also measure the exact solver's reach: solve --size-instances "
                                  "instances of each size (requests per instance, increasing; "
                                  "--gpus GPUs) until CBC does not prove every one optimal within "
                                  "--size-time-limit; the ladder {} when given without values",
                                  fmt::join(kDefaultSizeLadder, ",")))
          ->expected(0, CLI::detail::expected_max_vector_size)
          ->delimiter(',');
  cmd->add_option("--size-instances", flags->size_instances, "Instances per size of --sizes")
      ->check(WholeIn(1, 10'000))
      ->capture_default_str();
  cmd->add_option("--size-time-limit", flags->size_time_limit,
                  "Time limit of each exact solve of --sizes")
      ->capture_default_str();
  cmd->add_flag("--quiet", flags->quiet, "No progress on stderr");
  cmd->callback(
      [flags, sizes, &context] { context.exit_code = RunOptGap(*flags, sizes->count() > 0); });
}

}  // namespace gshare::cli
