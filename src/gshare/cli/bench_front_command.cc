// gshare bench front: what the serving front adds to a request, measured in one run
// (measure/front_bench.h says how). It prints the median over rounds of each path's p50 and p99 and
// the difference of the p50s (the front's overhead), and writes them as JSON with --out.
//
//   gshare bench front [--requests 2000] [--rounds 7] [--protocol-requests 500]
//                      [--throughput-requests 4000] [--clients 8] [--out FILE]
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
  int protocol_requests = 500;
  int throughput_requests = 4000;
  int clients = 8;
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
       .progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); },
       .protocol_requests = flags.protocol_requests,
       .throughput_requests = flags.throughput_requests,
       .clients = flags.clients});
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
  std::printf("protocols through the front (sequential p50; throughput with %d clients):\n",
              flags.clients);
  const auto rps_of = [&r](const std::string& path, const std::string& size) {
    for (const measure::ProtocolFigures& p : r.protocols) {
      if (p.path == path && p.size == size) return p.rps;
    }
    return 0.0;
  };
  for (const measure::ProtocolFigures& p : r.protocols) {
    const double json_rps = rps_of("http_json", p.size);
    std::printf("  %-12s %-12s p50 %9.1f us  %9.0f requests/s  (%.2fx HTTP JSON)\n", p.path.c_str(),
                p.size.c_str(), p.p50_us, p.rps, json_rps > 0 ? p.rps / json_rps : 0.0);
  }
  if (!flags.out.empty()) {
    nlohmann::json doc = {{"rounds", flags.rounds},
                          {"requests_per_round", flags.requests},
                          {"direct_kept_alive_p50_us", r.direct_kept_alive_p50_us},
                          {"direct_new_connection_p50_us", r.direct_new_connection_p50_us},
                          {"front_p50_us", r.front_p50_us},
                          {"front_p99_us", r.front_p99_us},
                          {"overhead_p50_us", r.overhead_p50_us}};
    for (const measure::ProtocolFigures& p : r.protocols) {
      doc[p.path + "_" + p.size + "_p50_us"] = p.p50_us;
      doc[p.path + "_" + p.size + "_rps"] = p.rps;
    }
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
  cmd->add_option("--protocol-requests", flags->protocol_requests,
                  "Sequential requests per protocol, size and round (the large input: a tenth)")
      ->check(WholeIn(10, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--throughput-requests", flags->throughput_requests,
                  "Requests of each throughput measurement (the large input: a tenth)")
      ->check(WholeIn(10, 10'000'000))
      ->capture_default_str();
  cmd->add_option("--clients", flags->clients, "Connections sending at once for throughput")
      ->check(WholeIn(1, 256))
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "Write the figures as JSON here");
  cmd->callback([flags, &context] { context.exit_code = RunBenchFront(*flags); });
}

}  // namespace gshare::cli
