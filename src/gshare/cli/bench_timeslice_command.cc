// gshare bench timeslice: example functions sharing one emulated GPU's compute engine, measured
// against what the simulator's time-slicing model predicts (measure/timeslice_bench.h says how).
//
//   gshare bench timeslice [--json] [--rounds 100] [--batch 1] [--weights DIR]
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/program_folder.h"
#include "gshare/measure/timeslice_bench.h"

namespace gshare::cli {
namespace {

struct BenchTimesliceFlags {
  std::string weights_dir;
  int rounds = 100;
  int batch = 1;
  bool json = false;
};

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "gshare bench timeslice: %s\n", message.c_str());
  return code;
}

int RunBenchTimeslice(const BenchTimesliceFlags& flags) {
  auto folder = ProgramFolder();
  if (!folder.ok()) return Fail(1, folder.status().ToString());
  measure::TimesliceBenchOptions options;
  options.weights_dir = flags.weights_dir;
  options.function_program = *folder / "gshare-function";
  options.rounds = flags.rounds;
  options.batch = flags.batch;
  auto bench = measure::RunTimesliceBench(options);
  if (!bench.ok()) return Fail(1, bench.status().ToString());
  const measure::TimesliceBenchResult& r = *bench;

  if (flags.json) {
    nlohmann::json out = {{"rounds", flags.rounds},     {"batch", flags.batch},
                          {"kernel_ms", r.kernel_ms},   {"solo_ms", r.solo_ms},
                          {"quantum_ms", r.quantum_ms}, {"results", nlohmann::json::array()}};
    for (const measure::TimesliceRow& row : r.rows) {
      out["results"].push_back(
          {{"instances", row.instances},
           {"live_median_ms", row.live_median_ms},
           {"live_mean_ms", row.live_mean_ms},
           {"own_gpus_median_ms", row.own_gpus_median_ms},
           {"sim_median_ms", row.sim_median_ms},
           {"sim_over_live", row.sim_median_ms / row.live_median_ms},
           {"sim_whole_median_ms", row.sim_whole_median_ms},
           {"sim_whole_over_live", row.sim_whole_median_ms / row.live_median_ms}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf(
      "mlp on one emulated GPU, %d rounds of batches of %d: kernel %.3f ms, solo latency %.3f "
      "ms (medians)\n",
      flags.rounds, flags.batch, r.kernel_ms, r.solo_ms);
  std::printf("%-10s %12s %12s %13s %11s %9s %13s %11s\n", "instances", "live p50 ms",
              "live mean ms", "own GPUs p50", "sim p50 ms", "sim/live", "sim whole ms",
              "whole/live");
  for (const measure::TimesliceRow& row : r.rows) {
    std::printf("%-10d %12.3f %12.3f %13.3f %11.3f %9.2f %13.3f %11.2f\n", row.instances,
                row.live_median_ms, row.live_mean_ms, row.own_gpus_median_ms, row.sim_median_ms,
                row.sim_median_ms / row.live_median_ms, row.sim_whole_median_ms,
                row.sim_whole_median_ms / row.live_median_ms);
  }
  return 0;
}

}  // namespace

void AddBenchTimesliceCommand(CLI::App& bench, CommandContext& context) {
  auto flags = std::make_shared<BenchTimesliceFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "timeslice",
      "1, 2 and 3 mlp processes sharing one emulated GPU, against the simulator's time slicing");
  cmd->add_option("--rounds", flags->rounds, "Timed rounds (after one untimed)")
      ->check(WholeIn(1, 1000))
      ->capture_default_str();
  cmd->add_option("--batch", flags->batch,
                  "Requests each instance gets per round, run as one batch (one kernel)")
      ->check(WholeIn(1, 256))
      ->capture_default_str();
  cmd->add_option("--weights", flags->weights_dir,
                  "Folder of mlp.safetensors and cnn.safetensors (default: written from seed 1)");
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->callback([flags, &context] { context.exit_code = RunBenchTimeslice(*flags); });
}

}  // namespace gshare::cli
