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

double ComputeGpuSeconds(const Workload& workload, TimePoint start) {
  std::vector<double> best(workload.functions.size(), 0);
  for (std::size_t f = 0; f < workload.functions.size(); ++f) {
    const ResolvedFunction& spec = workload.functions[f];
    best[f] = ToSeconds(spec.ExecLatency(1));
    for (int b = 2; b <= spec.max_batch; ++b) {
      best[f] = std::min(best[f], ToSeconds(spec.ExecLatency(b)) / b);
    }
  }
  double total = 0;
  for (const Request& r : workload.requests) {
    if (r.arrival < start) continue;
    double seconds = best[r.function];
    if (!workload.exec_times.empty() && workload.exec_times[r.id] > Duration::zero()) {
      seconds *= static_cast<double>(workload.exec_times[r.id].count()) /
                 static_cast<double>(workload.functions[r.function].ExecLatency(1).count());
    }
    if (!workload.exec_factors.empty()) seconds *= workload.exec_factors[r.id];
    total += seconds;
  }
  return total;
}

PolicyReport MakePolicyReport(std::string policy, const Meter& meter, MeterTotals totals,
                              std::span<const ResolvedFunction> functions, const GpuType& gpu,
                              TimePoint start, std::uint64_t events) {
  PolicyReport report;
  report.policy = std::move(policy);
  report.events = events;
  report.accounting_start_seconds = SinceEpochSeconds(start);
  report.horizon_seconds = SinceEpochSeconds(totals.horizon) - report.accounting_start_seconds;

  const std::size_t num_functions = functions.size();
  totals.functions.resize(num_functions);
  report.requests = totals.requests;
  report.failed_requests = totals.failed;
  report.never_ran_requests = totals.never_ran;
  report.slo_attainment = totals.slo_attainment();
  report.sorted_latency_ms.reserve(totals.requests);
  for (const FunctionMeterTotals& f : totals.functions) {
    report.sorted_latency_ms.insert(report.sorted_latency_ms.end(), f.latency_ms.begin(),
                                    f.latency_ms.end());
  }
  std::sort(report.sorted_latency_ms.begin(), report.sorted_latency_ms.end());
  report.latency = Summarize(report.sorted_latency_ms);

  report.gpu_seconds = totals.gpu_seconds;
  report.avg_gpus = report.horizon_seconds > 0 ? totals.gpu_seconds / report.horizon_seconds : 0;
  report.peak_gpus = totals.peak_gpus;
  report.vgpu_gib_seconds = totals.reserved_byte_seconds / static_cast<double>(kGiB);
  report.swaps = totals.restores;
  report.swap_bytes = totals.restore_bytes;
  report.cost_usd = totals.cost_usd;

  report.functions.resize(num_functions);
  for (std::size_t f = 0; f < num_functions; ++f) {
    FunctionReport& fr = report.functions[f];
    FunctionMeterTotals& ft = totals.functions[f];
    const ResolvedFunction& spec = functions[f];
    fr.name = spec.name;
    fr.tenant = spec.tenant;
    fr.slo_ms = ToMilliseconds(spec.slo);
    fr.requests = ft.requests;
    fr.slo_attainment =
        fr.requests == 0 ? 1.0 : static_cast<double>(ft.met) / static_cast<double>(fr.requests);
    std::sort(ft.latency_ms.begin(), ft.latency_ms.end());
    fr.latency = Summarize(ft.latency_ms);
    fr.swaps = ft.restores;
    fr.swap_bytes = ft.restore_bytes;
    fr.vgpu_gib_seconds = ft.reserved_byte_seconds / static_cast<double>(kGiB);
    fr.active_gib_seconds = ft.active_byte_seconds / static_cast<double>(kGiB);
    fr.serverless_usd = Bill(gpu, ft.reserved_byte_seconds, ft.active_byte_seconds);
    report.serverless_usd += fr.serverless_usd;
  }
  const auto& timeline = meter.gpu_timeline();
  report.gpu_timeline.reserve(timeline.size());
  for (const auto& [t, n] : timeline) report.gpu_timeline.emplace_back(SinceEpochSeconds(t), n);
  return report;
}

Result<PolicyReport> Simulate(const Workload& workload, std::string_view policy,
                              const SimulationOptions& options) {
  SimulatedExecutor executor(workload, options.executor);
  SchedulerContext context{&executor.functions(), &executor};
  // One time slice for the world and for the policy's predictions: the executor's.
  PolicyOptions policy_options = options.policy;
  policy_options.quantum = options.executor.quantum;
  GSHARE_ASSIGN_OR_RETURN(auto scheduler, MakePolicy(policy, context, policy_options));
  executor.set_scheduler(scheduler.get());
  std::function<void(TimePoint, std::uint64_t)> progress;
  if (options.progress) {
    progress = [&](TimePoint now, std::uint64_t done) {
      options.progress(SinceEpochSeconds(now), done);
    };
  }
  const TimePoint start = options.executor.accounting_start;
  if (!workload.requests.empty() && start > workload.requests.back().arrival) {
    return InvalidArgument(fmt::format("the accounting start ({:.3f} s) is after the last arrival",
                                       SinceEpochSeconds(start)));
  }
  GSHARE_RETURN_IF_ERROR(executor.RunToEnd(progress));
  if (scheduler->RequestsHeld() != 0) {
    return Internal(fmt::format("policy '{}' still holds {} answered requests", scheduler->name(),
                                scheduler->RequestsHeld()));
  }

  PolicyReport report =
      MakePolicyReport(std::string(scheduler->name()), executor.meter(), executor.totals(),
                       workload.functions, workload.gpu, start, executor.events_processed());
  report.compute_gpu_seconds = ComputeGpuSeconds(workload, start);
  report.utilisation = report.gpu_seconds > 0 ? report.compute_gpu_seconds / report.gpu_seconds : 0;
  report.schedule = executor.schedule_log();
  report.decision_ns = executor.decision_ns();
  return report;
}

}  // namespace gshare
