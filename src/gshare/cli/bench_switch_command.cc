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
  auto spread = [](const measure::MsSpread& m) {
    return nlohmann::json{{"median", m.median}, {"q1", m.q1}, {"q3", m.q3}};
  };
  if (flags.json) {
    nlohmann::json out = {{"repetitions", flags.repetitions},
                          {"link_bandwidth", flags.link_bandwidth},
                          {"results", nlohmann::json::array()}};
    for (const measure::SwitchResult& r : results) {
      out["results"].push_back(
          {{"function", r.function},
           {"model_bytes", r.model_bytes},
           {"checkpoint_ms", spread(r.checkpoint)},
           {"restore_ms", spread(r.restore)},
           {"copy_ms", spread(r.copy)},
           {"map_ms", r.map_ms},
           {"handoff_ms", r.handoff_ms},
           {"fixed_ms", spread(r.fixed)},
           {"wake_ms", r.wake_ms},
           {"raw_ms", r.raw_ms},
           {"raw_method", r.raw_method},
           {"restore_over_raw", r.raw_ms > 0 ? r.restore.median / r.raw_ms : 0},
           {"outputs_identical", r.outputs_identical}});
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf(
        "median of %d rounds [quartiles]. restore steps: copy (from the loop to the last piece's "
        "end), map (its round trip, overlapping the copy), hand-off (the loop's own work before "
        "the copy, and the copy's end back to the loop), fixed = restore - copy; wake: one post "
        "to the event loop\n\n",
        flags.repetitions);
    std::printf("%-5s %9s %8s %21s %8s %7s %9s %21s %6s %7s %-15s %8s %5s\n", "func", "image",
                "ckpt ms", "restore ms", "copy ms", "map ms", "hand-off", "fixed ms", "wake",
                "raw ms", "raw method", "rst/raw", "same");
    for (const measure::SwitchResult& r : results) {
      std::printf(
          "%-5s %9s %8.3f %7.3f [%5.3f-%5.3f] %8.3f %7.3f %9.3f %7.3f [%5.3f-%5.3f] %6.3f %7.3f "
          "%-15s %8.2f %5s\n",
          r.function.c_str(), FormatBytes(r.model_bytes).c_str(), r.checkpoint.median,
          r.restore.median, r.restore.q1, r.restore.q3, r.copy.median, r.map_ms, r.handoff_ms,
          r.fixed.median, r.fixed.q1, r.fixed.q3, r.wake_ms, r.raw_ms, r.raw_method.c_str(),
          r.raw_ms > 0 ? r.restore.median / r.raw_ms : 0.0, r.outputs_identical ? "yes" : "NO");
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
  cmd->add_option("--repetitions", flags->repetitions,
                  "Timed rounds (after one untimed; at least 11)")
      ->check(WholeIn(11, 1000))
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
