// gshare bench front: what the serving front adds to a request, measured in one run
// (measure/front_bench.h says how). It prints the median over rounds of each path's p50 and p99 and
// the difference of the p50s (the front's overhead), and writes them as JSON with --out.
//
//   gshare bench front [--requests 2000] [--rounds 7] [--out FILE]
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/program_folder.h"
#include "gshare/measure/front_bench.h"

namespace gshare::cli {
namespace {

struct BenchFrontFlags {
  int requests = 2000;
  int rounds = 7;
  std::string out;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "gshare bench front: %s\n", message.c_str());
  return 1;
}

int RunBenchFront(const BenchFrontFlags& flags) {
  const Result<std::filesystem::path> folder = ProgramFolder();
  if (!folder.ok()) return Fail(folder.status().ToString());
  auto bench = measure::RunFrontBench(
      {.function_program = *folder / "gshare-function",
       .requests = flags.requests,
       .rounds = flags.rounds,
       .progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }});
  if (!bench.ok()) return Fail(bench.status().ToString());
  const measure::FrontBenchResult& r = *bench;
  std::printf(
      "%d rounds of %d sequential requests each (echo, 16 FP32 values), medians of the "
      "rounds:\n",
      flags.rounds, flags.requests);
  std::printf("  direct to the function, kept-alive connection:  p50 %8.1f us  p99 %8.1f us\n",
              r.direct_kept_alive_p50_us, r.direct_kept_alive_p99_us);
  std::printf("  direct to the function, connection per request: p50 %8.1f us  p99 %8.1f us\n",
              r.direct_new_connection_p50_us, r.direct_new_connection_p99_us);
  std::printf("  through the front (TCP, kept alive):            p50 %8.1f us  p99 %8.1f us\n",
              r.front_p50_us, r.front_p99_us);
  std::printf("  front overhead, p50 over the best direct path:  %.1f us (target: at most 50)\n",
              r.overhead_p50_us);
  if (!flags.out.empty()) {
    nlohmann::json doc = {{"rounds", flags.rounds},
                          {"requests_per_round", flags.requests},
                          {"direct_kept_alive_p50_us", r.direct_kept_alive_p50_us},
                          {"direct_new_connection_p50_us", r.direct_new_connection_p50_us},
                          {"front_p50_us", r.front_p50_us},
                          {"front_p99_us", r.front_p99_us},
                          {"overhead_p50_us", r.overhead_p50_us}};
    std::ofstream out(flags.out);
    out << doc.dump(2) << "\n";
    if (!out) return Fail("cannot write " + flags.out);
  }
  return 0;
}

}  // namespace

void AddBenchFrontCommand(CLI::App& bench, CommandContext& context) {
  auto flags = std::make_shared<BenchFrontFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "front", "What the serving front adds to a request over calling the function directly");
  cmd->add_option("--requests", flags->requests, "Sequential requests per path and round")
      ->check(WholeIn(10, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--rounds", flags->rounds, "Rounds (the paths interleaved)")
      ->check(WholeIn(1, 1000))
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "Write the figures as JSON here");
  cmd->callback([flags, &context] { context.exit_code = RunBenchFront(*flags); });
}

}  // namespace gshare::cli
