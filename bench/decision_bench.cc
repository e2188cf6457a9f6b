// Decision latency of the gshare policy at cluster scale: 10,000 functions whose slices fill
// about 1,000 GPUs. Every event (arrival, restore done, run done, timer) is timed from the moment
// the simulator takes it until the policy has returned, executor actions included, so the figure
// bounds the policy's decision time from above. Prints p50/p99/p99.9 and the ratio of p99 to the
// 10 us target.
//
//   ./build/bench/gshare_decision_bench [--functions N] [--gpu-type NAME]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gshare/common/random.h"
#include "gshare/common/units.h"
#include "gshare/model/catalog.h"
#include "gshare/sim/simulator.h"
#include "gshare/sim/workload/model_catalog.h"
#include "gshare/sim/workload/workload.h"

namespace gshare {
namespace {

constexpr double kTargetP99Microseconds = 10.0;

int Main(int argc, char** argv) {
  int functions = 10'000;
  std::string gpu_name = "a10";
  double horizon_seconds = 300;
  double mean_gap_seconds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--functions") == 0)
      functions = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--gpu-type") == 0)
      gpu_name = argv[i + 1];
    else if (std::strcmp(argv[i], "--mean-gap") == 0)
      mean_gap_seconds = std::atof(argv[i + 1]);
    else if (std::strcmp(argv[i], "--horizon") == 0)
      horizon_seconds = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "usage: %s [--functions N] [--gpu-type NAME] [--mean-gap S] [--horizon S]\n",
                   argv[0]);
      return 2;
    }
  }
  auto catalog = BuiltinModelCatalog();
  if (!catalog.ok()) {
    std::fprintf(stderr, "%s\n", catalog.status().ToString().c_str());
    return 1;
  }
  const GpuType* gpu = catalog->FindGpuType(gpu_name);
  if (gpu == nullptr) {
    std::fprintf(stderr, "unknown GPU type %s\n", gpu_name.c_str());
    return 2;
  }
  std::vector<ResolvedFunction> profiles;
  for (const auto& spec : catalog->functions) {
    auto r = ResolveFunction(spec, *gpu, catalog->gpu_types);
    if (r.ok()) profiles.push_back(std::move(r).value());
  }
  Workload w;
  w.gpu = *gpu;
  Random rng(1);
  for (int f = 0; f < functions; ++f) {
    ResolvedFunction fn = profiles[static_cast<std::size_t>(f) % profiles.size()];
    fn.name = "f" + std::to_string(f);
    w.functions.push_back(std::move(fn));
  }
  // Poisson arrivals, one per function every `mean_gap_seconds` on average: every function is
  // called, so its slice stays in the pool (pool_idle outlasts the run) and the pool grows to
  // hold them all.
  std::vector<std::pair<double, FunctionId>> arrivals;
  for (int f = 0; f < functions; ++f) {
    for (double t = rng.Exponential(1 / mean_gap_seconds); t < horizon_seconds;
         t += rng.Exponential(1 / mean_gap_seconds)) {
      arrivals.emplace_back(t, static_cast<FunctionId>(f));
    }
  }
  std::sort(arrivals.begin(), arrivals.end());
  w.requests.reserve(arrivals.size());
  for (const auto& [t, f] : arrivals) {
    Request r;
    r.id = w.requests.size();  // dense ids in arrival order, as Workload requires
    r.function = f;
    r.arrival = AtSeconds(t);
    r.deadline = r.arrival + w.functions[f].slo;
    w.requests.push_back(r);
  }
  SimulationOptions options;
  options.executor.time_decisions = true;
  options.policy.pool_idle = std::chrono::hours(2);
  auto report = Simulate(w, "gshare", options);
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", report.status().ToString().c_str());
    return 1;
  }
  std::vector<std::uint32_t> ns = report->decision_ns;
  std::sort(ns.begin(), ns.end());
  auto pct = [&](double p) {
    const auto i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(ns.size() - 1));
    return ns[i] / 1000.0;
  };
  std::printf(
      "gshare decision latency: %d functions, %zu requests, %llu events, peak %d GPUs (%s)\n",
      functions, w.requests.size(), static_cast<unsigned long long>(report->events),
      report->peak_gpus, gpu->name.c_str());
  std::printf("%-10s %10s\n", "percentile", "us/event");
  for (double p : {50.0, 90.0, 99.0, 99.9}) std::printf("p%-9g %10.3f\n", p, pct(p));
  std::printf("p99 / target (%.0f us): %.3f\n", kTargetP99Microseconds,
              pct(99) / kTargetP99Microseconds);
  return 0;
}

}  // namespace
}  // namespace gshare

int main(int argc, char** argv) { return gshare::Main(argc, argv); }
