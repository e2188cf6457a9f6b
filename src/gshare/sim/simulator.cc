#include "gshare/sim/simulator.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "gshare/sched/policy_registry.h"

namespace gshare {
namespace {

LatencySummary Summarize(const std::vector<float>& sorted) {
  LatencySummary s;
  if (sorted.empty()) return s;
  s.p50_ms = Percentile(sorted, 50);
  s.p95_ms = Percentile(sorted, 95);
  s.p99_ms = Percentile(sorted, 99);
  double sum = 0;
  for (float v : sorted) sum += v;
  s.mean_ms = sum / static_cast<double>(sorted.size());
  s.max_ms = sorted.back();
  return s;
}

double Bill(const GpuType& gpu, double reserved_byte_seconds, double active_byte_seconds) {
  const double active_gib_s = active_byte_seconds / static_cast<double>(kGiB);
  const double idle_gib_s =
      (reserved_byte_seconds - active_byte_seconds) / static_cast<double>(kGiB);
  return (active_gib_s * gpu.serverless_cu_active + idle_gib_s * gpu.serverless_cu_idle) *
         gpu.serverless_usd_per_cu;
}

}  // namespace

double Percentile(const std::vector<float>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const auto index =
      static_cast<std::size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
  return sorted[index];
}

Result<PolicyReport> Simulate(const Workload& workload, std::string_view policy,
                              const SimulationOptions& options) {
  SimulatedExecutor executor(workload, options.executor);
  SchedulerContext context{&workload.functions, &workload.gpu, &executor};
  GSHARE_ASSIGN_OR_RETURN(auto scheduler, MakePolicy(policy, context, options.policy));
  executor.set_scheduler(scheduler.get());
  std::function<void(TimePoint, std::uint64_t)> progress;
  if (options.progress) {
    progress = [&](TimePoint now, std::uint64_t done) {
      options.progress(SinceEpochSeconds(now), done);
    };
  }
  GSHARE_RETURN_IF_ERROR(executor.RunToEnd(progress));

  const ExecutorTotals& totals = executor.totals();
  const auto& completion = executor.completion_times();
  PolicyReport report;
  report.policy = std::string(scheduler->name());
  const TimePoint start = options.executor.accounting_start;
  if (!workload.requests.empty() && start > workload.requests.back().arrival) {
    return InvalidArgument(fmt::format("the accounting start ({:.3f} s) is after the last arrival",
                                       SinceEpochSeconds(start)));
  }
  report.events = executor.events_processed();
  report.accounting_start_seconds = SinceEpochSeconds(start);
  report.horizon_seconds = SinceEpochSeconds(totals.horizon) - report.accounting_start_seconds;

  const std::size_t num_functions = workload.functions.size();
  std::vector<std::vector<float>> per_function(num_functions);
  std::vector<std::uint64_t> met(num_functions, 0);
  report.sorted_latency_ms.reserve(workload.requests.size());
  std::uint64_t met_total = 0;
  for (const Request& r : workload.requests) {
    if (r.arrival < start) continue;  // warm-up
    ++report.requests;
    const auto latency = static_cast<float>(ToMilliseconds(completion[r.id] - r.arrival));
    report.sorted_latency_ms.push_back(latency);
    per_function[r.function].push_back(latency);
    if (completion[r.id] <= r.deadline) {
      ++met_total;
      ++met[r.function];
    }
  }
  std::sort(report.sorted_latency_ms.begin(), report.sorted_latency_ms.end());
  report.latency = Summarize(report.sorted_latency_ms);
  report.slo_attainment =
      report.requests == 0 ? 1.0
                           : static_cast<double>(met_total) / static_cast<double>(report.requests);

  report.gpu_seconds = totals.gpu_seconds;
  report.avg_gpus = report.horizon_seconds > 0 ? totals.gpu_seconds / report.horizon_seconds : 0;
  report.peak_gpus = totals.peak_gpus;
  report.vgpu_gib_seconds = totals.reserved_byte_seconds / static_cast<double>(kGiB);
  report.swaps = totals.restores;
  report.swap_bytes = totals.restore_bytes;
  report.cost_usd = totals.gpu_seconds * workload.gpu.price_per_hour_usd / 3600.0;

  report.functions.resize(num_functions);
  for (std::size_t f = 0; f < num_functions; ++f) {
    FunctionReport& fr = report.functions[f];
    const ResolvedFunction& spec = workload.functions[f];
    fr.name = spec.name;
    fr.tenant = spec.tenant;
    fr.slo_ms = ToMilliseconds(spec.slo);
    fr.requests = per_function[f].size();
    fr.slo_attainment =
        fr.requests == 0 ? 1.0 : static_cast<double>(met[f]) / static_cast<double>(fr.requests);
    std::sort(per_function[f].begin(), per_function[f].end());
    fr.latency = Summarize(per_function[f]);
    fr.swaps = totals.function_restores[f];
    fr.swap_bytes = totals.function_restore_bytes[f];
    fr.vgpu_gib_seconds = totals.function_reserved_byte_seconds[f] / static_cast<double>(kGiB);
    fr.active_gib_seconds = totals.function_active_byte_seconds[f] / static_cast<double>(kGiB);
    fr.serverless_usd = Bill(workload.gpu, totals.function_reserved_byte_seconds[f],
                             totals.function_active_byte_seconds[f]);
    report.serverless_usd += fr.serverless_usd;
  }
  report.gpu_timeline.reserve(executor.gpu_timeline().size());
  for (const auto& [t, n] : executor.gpu_timeline()) {
    report.gpu_timeline.emplace_back(SinceEpochSeconds(t), n);
  }
  report.schedule = executor.schedule_log();
  report.decision_ns = executor.decision_ns();
  return report;
}

}  // namespace gshare
