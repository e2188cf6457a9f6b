#include "gshare/sim/fidelity.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace gshare {
namespace {

Duration Median(std::vector<Duration> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

nlohmann::json FiguresJson(const FidelityFigures& f) {
  return {{"slo_attainment", f.slo_attainment},
          {"gpu_seconds", f.gpu_seconds},
          {"p50_ms", f.p50_ms},
          {"p99_ms", f.p99_ms}};
}

nlohmann::json RelativeError(double sim, double live) {
  if (live == 0) return nullptr;
  return (sim - live) / live;
}

}  // namespace

void ProfileLearner::Observe(FunctionId function, int batch, Duration elapsed, bool alone) {
  if (batch < 1 || elapsed <= Duration::zero()) return;
  Samples& samples = samples_[function][batch];
  (alone ? samples.alone : samples.shared).push_back(elapsed);
}

std::uint64_t ProfileLearner::observations(FunctionId function) const {
  auto it = samples_.find(function);
  if (it == samples_.end()) return 0;
  std::uint64_t n = 0;
  for (const auto& [batch, samples] : it->second) n += samples.alone.size() + samples.shared.size();
  return n;
}

Result<std::vector<Duration>> ProfileLearner::ExecByBatch(FunctionId function,
                                                          int max_batch) const {
  auto it = samples_.find(function);
  if (it == samples_.end() || max_batch < 1) {
    return NotFound(fmt::format("no run of function {} was observed", function));
  }
  std::map<int, Duration> known;  // batch size -> median
  for (const auto& [batch, samples] : it->second) {
    if (batch > max_batch) continue;
    known[batch] = Median(samples.alone.empty() ? samples.shared : samples.alone);
  }
  if (known.empty()) {
    return NotFound(fmt::format("no run of function {} within its batch bound", function));
  }
  std::vector<Duration> by_batch(static_cast<std::size_t>(max_batch));
  for (int b = 1; b <= max_batch; ++b) {
    auto above = known.lower_bound(b);
    Duration value;
    if (above == known.end()) {
      value = std::prev(above)->second;  // beyond the largest: held
    } else if (above->first == b || above == known.begin()) {
      value = above->second;  // observed, or below the smallest: held
    } else {
      const auto below = std::prev(above);
      const double t =
          static_cast<double>(b - below->first) / static_cast<double>(above->first - below->first);
      value =
          below->second + Duration(static_cast<Duration::rep>(
                              t * static_cast<double>((above->second - below->second).count())));
    }
    by_batch[static_cast<std::size_t>(b - 1)] = value;
  }
  return by_batch;
}

FidelityFigures FiguresOf(const PolicyReport& report) {
  return {.slo_attainment = report.slo_attainment,
          .gpu_seconds = report.gpu_seconds,
          .p50_ms = report.latency.p50_ms,
          .p99_ms = report.latency.p99_ms};
}

std::string FidelityJson(const FidelityReport& report) {
  nlohmann::json out = {
      {"policy", report.policy},
      {"requests", report.requests},
      {"live", FiguresJson(report.live)},
      {"sim", FiguresJson(report.sim)},
      {"relative_error",
       {{"gpu_seconds", RelativeError(report.sim.gpu_seconds, report.live.gpu_seconds)},
        {"p50_ms", RelativeError(report.sim.p50_ms, report.live.p50_ms)},
        {"p99_ms", RelativeError(report.sim.p99_ms, report.live.p99_ms)}}},
      {"slo_attainment_diff", report.sim.slo_attainment - report.live.slo_attainment},
      {"profiles_from_catalog", report.profiles_from_catalog}};
  return out.dump(2) + "\n";
}

}  // namespace gshare
