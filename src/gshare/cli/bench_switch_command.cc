// gshare bench switch: switching each example function between host memory and emulated GPUs,
// against the raw copy limit measured in the same run (measure/switch_bench.h says how).
//
//   gshare bench switch [--json] [--repetitions 11] [--link-bandwidth 0] [--weights DIR]
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/common/units.h"
#include "gshare/measure/switch_bench.h"

namespace gshare::cli {
namespace {

struct BenchSwitchFlags {
  std::string link_bandwidth = "0";
  std::string weights_dir;
  int repetitions = 11;
  bool json = false;
};

int RunBenchSwitch(const BenchSwitchFlags& flags) {
  auto bench = measure::RunSwitchBench({.link_bandwidth = flags.link_bandwidth,
                                        .weights_dir = flags.weights_dir,
                                        .repetitions = flags.repetitions});
  if (!bench.ok()) {
    std::fprintf(stderr, "gshare bench switch: %s\n", bench.status().ToString().c_str());
    return bench.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const std::vector<measure::SwitchResult>& results = *bench;
  if (flags.json) {
    nlohmann::json out = {{"results", nlohmann::json::array()}};
    for (const measure::SwitchResult& r : results) {
      out["results"].push_back({{"function", r.function},
                                {"model_bytes", r.model_bytes},
                                {"checkpoint_ms", r.checkpoint_ms},
                                {"restore_ms", r.restore_ms},
                                {"raw_ms", r.raw_ms},
                                {"outputs_identical", r.outputs_identical}});
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%-6s %12s %14s %12s %10s %16s %10s\n", "func", "image", "checkpoint ms",
                "restore ms", "raw ms", "restore / raw", "identical");
    for (const measure::SwitchResult& r : results) {
      std::printf("%-6s %12s %14.3f %12.3f %10.3f %16.2f %10s\n", r.function.c_str(),
                  FormatBytes(r.model_bytes).c_str(), r.checkpoint_ms, r.restore_ms, r.raw_ms,
                  r.raw_ms > 0 ? r.restore_ms / r.raw_ms : 0.0, r.outputs_identical ? "yes" : "NO");
    }
  }
  for (const measure::SwitchResult& r : results) {
    if (!r.outputs_identical) {
      std::fprintf(stderr, "gshare bench switch: %s answered differently after its restore\n",
                   r.function.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

void AddBenchSwitchCommand(CLI::App& bench, CommandContext& context) {
  auto flags = std::make_shared<BenchSwitchFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "switch", "Checkpoint and restore of each example function against the raw copy limit");
  cmd->add_option("--repetitions", flags->repetitions, "Timed rounds (after one untimed)")
      ->check(WholeIn(1, 1000))
      ->capture_default_str();
  cmd->add_option("--link-bandwidth", flags->link_bandwidth,
                  "Pace the emulated links (\"12GB/s\"); 0: unpaced")
      ->capture_default_str();
  cmd->add_option("--weights", flags->weights_dir,
                  "Folder of mlp.safetensors and cnn.safetensors (default: written from seed 1)");
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->callback([flags, &context] { context.exit_code = RunBenchSwitch(*flags); });
}

}  // namespace gshare::cli
