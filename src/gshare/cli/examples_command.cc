// gshare examples weights: writes the example functions' weights files.
//
//   gshare examples weights [--out examples/weights] [--seed 1]
//
// The weights come from the seed (examples/models/weights.h), never from a download: the same
// seed writes the same bytes on every machine. The bundled catalog (examples/catalog.yaml) reads
// them from examples/weights.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "examples/runtime/example_weights.h"
#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/common/units.h"

namespace gshare::cli {
namespace {

struct WeightsFlags {
  std::string out = "examples/weights";
  std::uint64_t seed = examples::kDefaultWeightSeed;
};

int RunWeights(const WeightsFlags& flags) {
  std::error_code error;
  std::filesystem::create_directories(flags.out, error);
  if (error) {
    std::fprintf(stderr, "gshare examples weights: cannot create %s: %s\n", flags.out.c_str(),
                 error.message().c_str());
    return 1;
  }
  for (const examples::ModelKind kind : {examples::ModelKind::kMlp, examples::ModelKind::kCnn}) {
    const std::string path =
        fmt::format("{}/{}.safetensors", flags.out, examples::ModelKindName(kind));
    if (const Status written = examples::WriteExampleWeights(kind, flags.seed, path);
        !written.ok()) {
      std::fprintf(stderr, "gshare examples weights: %s\n", written.ToString().c_str());
      return 1;
    }
    const examples::ModelLayout& layout = examples::LayoutOf(kind);
    std::printf("wrote %s: %s, %lld parameters (%s), seed %llu\n", path.c_str(),
                layout.name.c_str(), static_cast<long long>(layout.parameter_count()),
                FormatBytes(static_cast<std::uint64_t>(layout.weight_bytes())).c_str(),
                static_cast<unsigned long long>(flags.seed));
  }
  return 0;
}

}  // namespace

void AddExamplesCommand(CLI::App& app, CommandContext& context) {
  CLI::App* cmd = app.add_subcommand("examples", "The bundled example functions");
  cmd->require_subcommand(1);
  auto flags = std::make_shared<WeightsFlags>();
  CLI::App* weights =
      cmd->add_subcommand("weights", "Write the example models' weights (safetensors) from a seed");
  weights->add_option("--out", flags->out, "Folder to write mlp.safetensors and cnn.safetensors")
      ->capture_default_str();
  weights->add_option("--seed", flags->seed, "Seed of the weights")
      ->check(WholeIn(0, kMaxSeed))
      ->capture_default_str();
  weights->callback([flags, &context] { context.exit_code = RunWeights(*flags); });
}

}  // namespace gshare::cli
