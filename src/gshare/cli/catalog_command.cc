// gshare catalog: check a catalog, list GPU types, and derive the shipped model catalog.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/model/catalog.h"
#include "gshare/sim/workload/model_catalog.h"

namespace gshare::cli {
namespace {

struct DeriveFlags {
  DeriveOptions options;
  std::string out;
};

int Fail(const Status& status) {
  std::fprintf(stderr, "gshare catalog: %s\n", status.ToString().c_str());
  return status.code() == StatusCode::kInternal ? 3 : 2;
}

int RunDerive(const DeriveFlags& flags) {
  auto derived = DeriveModelCatalog(flags.options);
  if (!derived.ok()) return Fail(derived.status());
  const std::string text = DerivedCatalogToYaml(*derived);
  std::ofstream out(flags.out, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Fail(IoError(fmt::format("{}: write failed", flags.out)));
  std::printf(
      "wrote %s: %zu models from %zu candidates; anchor %.3f ms at %.2f samples/s, "
      "exponent %.4f\n",
      flags.out.c_str(), derived->catalog.functions.size(), derived->candidates,
      derived->reference_latency_ms, derived->reference_throughput, derived->exponent);
  return 0;
}

// How a live node would start `f`, on one line: the runtime or the command, then the rest.
std::string ProcessLine(const FunctionSpec& f) {
  std::string line = f.runtime.empty() ? fmt::format("command [{}]", fmt::join(f.command, ", "))
                                       : fmt::format("runtime {}", f.runtime);
  if (!f.working_dir.empty()) line += fmt::format("; working_dir {}", f.working_dir);
  if (!f.env.empty()) line += fmt::format("; {} env", f.env.size());
  if (!f.model_files.empty()) line += fmt::format("; {} model files", f.model_files.size());
  line += fmt::format("; timeout {}", FormatDuration(f.RequestTimeout()));
  return line;
}

int RunCheck(const std::string& path) {
  auto catalog = LoadCatalog(path);
  if (!catalog.ok()) return Fail(catalog.status());
  const auto live = std::count_if(catalog->functions.begin(), catalog->functions.end(),
                                  [](const FunctionSpec& f) { return f.IsLive(); });
  std::printf("%s: %zu functions (%td live, %td simulation-only), %zu GPU types\n", path.c_str(),
              catalog->functions.size(), live,
              static_cast<std::ptrdiff_t>(catalog->functions.size()) - live,
              catalog->gpu_types.size());
  for (const auto& f : catalog->functions) {
    std::printf("  %-40s %-12s model %10s  gpu_memory %10s\n", f.name.c_str(), f.tenant.c_str(),
                FormatBytes(f.model_bytes).c_str(), FormatBytes(f.gpu_memory_bytes).c_str());
    if (!f.IsLive()) continue;
    std::printf("    %s\n", ProcessLine(f).c_str());
    // Files are checked where the catalog is read, which need not be where it runs: a missing
    // file is a warning here, not an error.
    std::error_code error;
    for (const auto& file : f.model_files) {
      if (!std::filesystem::is_regular_file(file, error)) {
        std::fprintf(stderr, "gshare catalog: warning: %s: model file %s is not a file here\n",
                     f.name.c_str(), file.c_str());
      }
    }
    if (!f.working_dir.empty() && !std::filesystem::is_directory(f.working_dir, error)) {
      std::fprintf(stderr, "gshare catalog: warning: %s: working_dir %s is not a folder here\n",
                   f.name.c_str(), f.working_dir.c_str());
    }
  }
  return 0;
}

int RunGpuTypes() {
  std::printf("%-10s %10s %12s %8s %10s %9s  %s\n", "name", "memory", "h2d GB/s", "restore",
              "USD/hour", "rel.lat.", "price source");
  for (const auto& t : BuiltinGpuTypes()) {
    std::printf("%-10s %10s %12.1f %8s %10.3f %9.3f  %s\n", t.name.c_str(),
                FormatBytes(t.memory_bytes).c_str(), t.h2d_bytes_per_second / 1e9,
                FormatDuration(t.restore_overhead).c_str(), t.price_per_hour_usd,
                t.relative_latency, t.price_source.c_str());
  }
  return 0;
}

}  // namespace

void AddCatalogCommand(CLI::App& app, CommandContext& context) {
  CLI::App* cmd = app.add_subcommand("catalog", "Check catalogs, list GPU types, derive profiles");
  cmd->require_subcommand(1);

  auto derive = std::make_shared<DeriveFlags>();
  CLI::App* derive_cmd = cmd->add_subcommand(
      "derive", "Derive model profiles (data/models.yaml) from timm and ResNet-50 measurements");
  derive_cmd
      ->add_option("--timm-benchmark", derive->options.timm_benchmark_path,
                   "timm benchmark-infer-*.csv")
      ->required();
  derive_cmd
      ->add_option("--profiles-dir", derive->options.profiles_dir,
                   "Folder with nvidia_dle_resnet50_triton_offline.csv")
      ->required();
  derive_cmd->add_option("--count", derive->options.count, "Number of models")
      ->check(WholeIn(1, 100'000))
      ->capture_default_str();
  derive_cmd->add_option("--out", derive->out, "Output YAML file")->required();
  derive_cmd->callback([derive, &context] { context.exit_code = RunDerive(*derive); });

  auto path = std::make_shared<std::string>();
  CLI::App* check = cmd->add_subcommand("check", "Load a catalog and list its functions");
  check->add_option("catalog", *path, "Catalog YAML file")->required();
  check->callback([path, &context] { context.exit_code = RunCheck(*path); });

  CLI::App* types = cmd->add_subcommand("gpu-types", "List the built-in GPU types");
  types->callback([&context] { context.exit_code = RunGpuTypes(); });
}

}  // namespace gshare::cli
