#include "gshare/sim/optgap.h"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "gshare/sim/simulator.h"

namespace gshare {
namespace {

// The instance as a simulator workload: one GPU type, one function per instance function, the
// requests sorted by release. `order[i]` is the instance request behind workload request i.
Workload ToWorkload(const exact::ExactInstance& instance, std::vector<std::size_t>& order) {
  Workload w;
  w.gpu.name = "instance";
  w.gpu.memory_bytes = instance.gpu.memory_bytes;
  w.gpu.h2d_bytes_per_second = instance.gpu.h2d_bytes_per_second;
  w.gpu.restore_overhead = instance.gpu.restore_overhead;
  for (const auto& f : instance.functions) {
    ResolvedFunction r;
    r.name = f.name;
    r.tenant = "instance";
    r.model_bytes = f.model_bytes;
    r.gpu_memory_bytes = f.gpu_memory_bytes;
    r.exec_by_batch = {f.exec};
    r.max_batch = 1;
    r.slo = Duration::max();
    w.functions.push_back(std::move(r));
  }
  // A function's SLO is the tightest its requests carry (each request keeps its own deadline).
  for (const auto& request : instance.requests) {
    Duration& slo = w.functions[request.function].slo;
    slo = std::min(slo, request.deadline - request.release);
  }
  order.resize(instance.requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return instance.requests[a].release < instance.requests[b].release;
  });
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& source = instance.requests[order[i]];
    Request r;
    r.id = i;
    r.function = static_cast<FunctionId>(source.function);
    r.arrival = source.release;
    r.deadline = source.deadline;
    w.requests.push_back(r);
  }
  return w;
}

}  // namespace

Result<OnlineSchedule> ScheduleOnline(const exact::ExactInstance& instance,
                                      const std::string& policy) {
  GSHARE_RETURN_IF_ERROR(exact::ValidateInstance(instance));
  std::vector<std::size_t> order;
  const Workload workload = ToWorkload(instance, order);
  SimulationOptions options;
  options.executor.record_schedule = true;
  options.policy.instance_start = Duration::zero();
  options.policy.pool_idle = std::chrono::hours(24);
  options.policy.max_gpus = instance.num_gpus;
  const auto start = std::chrono::steady_clock::now();
  GSHARE_ASSIGN_OR_RETURN(PolicyReport report, Simulate(workload, policy, options));
  OnlineSchedule out;
  out.wall_time = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - start);
  out.events = report.events;

  const ScheduleLog& log = report.schedule;
  std::map<GpuId, int> dense_gpu;  // online GPU ids in order of first use -> 0, 1, ...
  for (const auto& r : log.residencies)
    dense_gpu.emplace(r.gpu, static_cast<int>(dense_gpu.size()));
  if (dense_gpu.size() > static_cast<std::size_t>(instance.num_gpus)) {
    return Internal(fmt::format("policy '{}' used {} GPUs on an instance of {}", policy,
                                dense_gpu.size(), instance.num_gpus));
  }
  TimePoint last_completion{};  // the instance ends here
  out.schedule.executions.resize(instance.requests.size());
  for (const auto& run : log.runs) {
    for (RequestId id : run.batch) {
      exact::Execution& e = out.schedule.executions[order[id]];
      e.residency = run.residency;
      e.start = run.start;
      e.end = run.end;
    }
    last_completion = std::max(last_completion, run.end);
  }
  for (const auto& r : log.residencies) {
    // Held from the reservation to the release; a slice still held when the last request
    // completes counts until then (or until its restore finishes, if that is later: a residency
    // lasts at least its restore). A slice cannot be released before its restore finishes.
    const TimePoint end = std::min(r.released, std::max(last_completion, r.ready));
    out.schedule.residencies.push_back({r.function, dense_gpu.at(r.gpu), r.reserved, end});
  }
  out.objective = exact::ScheduleObjective(instance, out.schedule);
  out.executor_gib_seconds = report.vgpu_gib_seconds;
  out.validity = exact::ValidateSchedule(instance, out.schedule);
  return out;
}

Result<OptGapSummary> RunOptGap(const OptGapOptions& options,
                                const std::vector<ResolvedFunction>& functions,
                                const GpuType& gpu) {
  if (options.instances < 1) return InvalidArgument("--instances must be at least 1");
  OptGapSummary summary;
  summary.instances = options.instances;
  double ratio_sum = 0, speedup_sum = 0;
  summary.min_quality_ratio = 0;
  bool have_ratio = false;
  for (int i = 0; i < options.instances; ++i) {
    OptGapRow row;
    row.index = i;
    row.seed = options.seed * 1'000'003ULL + static_cast<std::uint64_t>(i);
    GSHARE_ASSIGN_OR_RETURN(exact::ExactInstance instance,
                            exact::GenerateExactInstance(row.seed, options.requests, options.gpus,
                                                         functions, gpu, options.generator));
    const auto solved = exact::SolveExact(instance, options.exact);
    if (!solved.ok()) return solved.status();
    const exact::ExactSolution& solution = *solved;
    row.status = solution.status;
    row.exact_objective = solution.objective;
    row.exact_seconds = ToSeconds(solution.solve_time);
    GSHARE_ASSIGN_OR_RETURN(OnlineSchedule online, ScheduleOnline(instance, options.policy));
    row.online_objective = online.objective;
    row.online_seconds = ToSeconds(online.wall_time);
    row.online_valid = online.validity.ok();
    if (!row.online_valid) row.online_violation = online.validity.message();
    if (solution.status == exact::SolveStatus::kOptimal) {
      summary.solved_optimally += 1;
      if (row.online_seconds > 0) speedup_sum += row.exact_seconds / row.online_seconds;
      if (row.online_valid && row.online_objective > 0) {
        row.quality_ratio = row.exact_objective / row.online_objective;
        summary.optimal_with_valid_online += 1;
        ratio_sum += row.quality_ratio;
        summary.min_quality_ratio =
            have_ratio ? std::min(summary.min_quality_ratio, row.quality_ratio) : row.quality_ratio;
        have_ratio = true;
      }
    }
    summary.rows.push_back(row);
    if (options.progress) options.progress(i + 1, options.instances);
  }
  if (summary.optimal_with_valid_online > 0) {
    summary.mean_quality_ratio = ratio_sum / summary.optimal_with_valid_online;
  }
  if (summary.solved_optimally > 0) summary.mean_speedup = speedup_sum / summary.solved_optimally;
  return summary;
}

std::string OptGapJson(const OptGapOptions& options, const OptGapSummary& summary) {
  nlohmann::ordered_json doc;
  doc["instances"] = summary.instances;
  doc["solved_optimally"] = summary.solved_optimally;
  doc["mean_quality_ratio"] = summary.mean_quality_ratio;
  doc["min_quality_ratio"] = summary.min_quality_ratio;
  doc["mean_speedup"] = summary.mean_speedup;
  doc["optimal_with_valid_online"] = summary.optimal_with_valid_online;
  doc["policy"] = options.policy;
  doc["seed"] = options.seed;
  doc["requests"] = options.requests;
  doc["gpus"] = options.gpus;
  doc["time_limit_seconds"] = ToSeconds(options.exact.time_limit);
  auto rows = nlohmann::ordered_json::array();
  for (const OptGapRow& r : summary.rows) {
    nlohmann::ordered_json row;
    row["index"] = r.index;
    row["seed"] = r.seed;
    row["exact_status"] = std::string(exact::SolveStatusName(r.status));
    row["exact_objective_gib_s"] = r.exact_objective;
    row["exact_seconds"] = r.exact_seconds;
    row["online_objective_gib_s"] = r.online_objective;
    row["online_valid"] = r.online_valid;
    if (!r.online_valid) row["online_violation"] = r.online_violation;
    row["online_seconds"] = r.online_seconds;
    row["quality_ratio"] = r.quality_ratio;
    rows.push_back(row);
  }
  doc["rows"] = rows;
  return doc.dump(2) + "\n";
}

std::string OptGapTable(const OptGapSummary& summary) {
  std::string out =
      fmt::format("{:>4} {:>10} {:>14} {:>10} {:>14} {:>7} {:>11} {:>8}\n", "#", "exact",
                  "optimum GiB-s", "exact s", "online GiB-s", "valid", "online us", "ratio");
  for (const OptGapRow& r : summary.rows) {
    out += fmt::format("{:>4} {:>10} {:>14.6f} {:>10.3f} {:>14.6f} {:>7} {:>11.1f} {:>8.3f}\n",
                       r.index, exact::SolveStatusName(r.status), r.exact_objective,
                       r.exact_seconds, r.online_objective, r.online_valid ? "yes" : "no",
                       r.online_seconds * 1e6, r.quality_ratio);
  }
  out += fmt::format(
      "instances {}, solved optimally {}, of which the online schedule is valid {}; mean quality "
      "ratio {:.3f} (min {:.3f}); mean speedup {:.0f}x\n",
      summary.instances, summary.solved_optimally, summary.optimal_with_valid_online,
      summary.mean_quality_ratio, summary.min_quality_ratio, summary.mean_speedup);
  return out;
}

}  // namespace gshare
