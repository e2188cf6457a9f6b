// Simulator throughput: replays a generated Azure-like workload of 1,000,000 invocations over
// at least 1,000 invoked functions through each policy, single-threaded (CPU time), and reports
// requests simulated per second and its ratio to the target of 500,000 requests/s (counter
// `vs_target`; requests, not events, so that a policy that adds events is not credited for them),
// and the events per second beside it. Each policy runs in the ideal world and in the fair one
// (`gshare sim`'s default: host contention, restore noise, priors off, fragmentation;
// world_model.h), whose
// target is 1,000,000 events/s.
//
//   ./build/bench/gshare_sim_bench [--benchmark_filter=keepalive]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include "gshare/model/catalog.h"
#include "gshare/sim/simulator.h"
#include "gshare/sim/workload/generator.h"
#include "gshare/sim/workload/trace_reader.h"
#include "gshare/sim/world_model.h"

namespace gshare {
namespace {

constexpr int kFunctions = 6000;  // most rare functions are never invoked in the hour
constexpr std::uint64_t kInvocations = 1'000'000;
constexpr double kTargetRequestsPerSecond = 5e5;

const Workload& BenchWorkload() {
  static const Workload workload = [] {
    GeneratorOptions options;
    options.functions = kFunctions;
    options.duration = std::chrono::hours(1);
    options.seed = 1;
    options.target_invocations = kInvocations;
    auto generated = GenerateWorkload(options);
    if (!generated.ok()) {
      std::fprintf(stderr, "generating the workload: %s\n", generated.status().ToString().c_str());
      std::exit(1);
    }
    const GpuType* gpu = generated->catalog.FindGpuType("a100-40gb");
    if (gpu == nullptr) {
      std::fprintf(stderr, "no a100-40gb GPU type\n");
      std::exit(1);
    }
    auto built = BuildWorkload(generated->catalog, generated->trace, *gpu);
    if (!built.ok()) {
      std::fprintf(stderr, "building the workload: %s\n", built.status().ToString().c_str());
      std::exit(1);
    }
    if (built->functions.size() < 1000) {
      std::fprintf(stderr, "only %zu functions invoked; the benchmark needs 1,000\n",
                   built->functions.size());
      std::exit(1);
    }
    std::fprintf(stderr, "workload: %zu invocations, %zu functions invoked, %.0f s\n",
                 built->requests.size(), built->functions.size(),
                 SinceEpochSeconds(built->requests.back().arrival));
    return std::move(built).value();
  }();
  return workload;
}

void BM_Simulate(benchmark::State& state, const char* policy, bool fair) {
  const Workload& workload = BenchWorkload();
  SimulationOptions options;
  if (fair) options.executor.world = WorldModel::Fair();
  double events = 0;
  for (auto _ : state) {
    auto report = Simulate(workload, policy, options);
    if (!report.ok()) {
      state.SkipWithError(report.status().ToString().c_str());
      return;
    }
    events += static_cast<double>(report->events);
    benchmark::DoNotOptimize(report->gpu_seconds);
  }
  state.counters["requests"] = static_cast<double>(workload.requests.size());
  const double requests =
      static_cast<double>(workload.requests.size()) * static_cast<double>(state.iterations());
  state.counters["requests_per_s"] = benchmark::Counter(requests, benchmark::Counter::kIsRate);
  state.counters["events_per_s"] = benchmark::Counter(events, benchmark::Counter::kIsRate);
  state.counters["vs_target"] =
      benchmark::Counter(requests / kTargetRequestsPerSecond, benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_Simulate, keepalive, "keepalive", false)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simulate, keepalive_fair, "keepalive", true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simulate, faascache, "faascache", false)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simulate, faascache_fair, "faascache", true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simulate, faaswap, "faaswap", false)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simulate, faaswap_fair, "faaswap", true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simulate, faaswap_fifo, "faaswap-fifo", false)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simulate, faaswap_fifo_fair, "faaswap-fifo", true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simulate, gshare, "gshare", false)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simulate, gshare_fair, "gshare", true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace gshare

BENCHMARK_MAIN();
