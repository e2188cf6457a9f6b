#include "gshare/sim/sweep.h"

#include <fmt/format.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

namespace gshare {

std::string DescribeKnobs(const KnobSetting& knobs) {
  std::string out;
  for (const auto& [knob, value] : knobs) {
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", KnobName(knob), value);
  }
  return out.empty() ? "(defaults)" : out;
}

Result<std::vector<RunFigures>> RunSweep(const Workload& workload,
                                         const std::vector<SweepPoint>& points,
                                         const SweepOptions& options) {
  std::vector<RunFigures> figures(points.size());
  std::vector<std::optional<Status>> errors(points.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex done_mutex;

  const auto run = [&](std::size_t i) {
    const auto start = std::chrono::steady_clock::now();
    const SweepPoint& point = points[i];
    SimulationOptions sim = options.base;
    sim.progress = nullptr;
    Status status = ApplySetting(point.knobs, sim.policy);
    if (status.ok()) {
      auto report = Simulate(workload, point.policy, sim);
      if (report.ok()) {
        figures[i] = {report->slo_attainment, report->gpu_seconds, report->cost_usd,
                      report->latency.p99_ms, report->utilisation};
      } else {
        status = report.status();
      }
    }
    if (!status.ok()) {
      errors[i] =
          status.WithContext(fmt::format("{} {}", point.policy, DescribeKnobs(point.knobs)));
      failed = true;
      return;
    }
    if (options.done) {
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::lock_guard<std::mutex> lock(done_mutex);
      options.done(i, figures[i], wall);
    }
  };
  const auto worker = [&] {
    while (!failed) {
      const std::size_t i = next++;
      if (i >= points.size()) return;
      run(i);
    }
  };

  const std::size_t threads =
      std::min<std::size_t>(static_cast<std::size_t>(std::max(options.jobs, 1)), points.size());
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::jthread> pool;
    pool.reserve(threads);
    for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  }
  for (const auto& error : errors) {
    if (error) return *error;
  }
  return figures;
}

}  // namespace gshare
