#include "gshare/sim/optgap.h"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "gshare/sched/exact/best_fit.h"
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

// The online schedule scored against the row's exact solution.
OnlineScore Score(const exact::ExactInstance& instance, const OptGapRow& row,
                  const std::string& name, const OnlineSchedule& online) {
  OnlineScore score;
  score.name = name;
  score.objective = online.objective;
  score.valid = online.validity.ok();
  if (!score.valid) score.violation = online.validity.message();
  score.seconds = ToSeconds(online.wall_time);
  score.gpus = exact::PeakGpus(online.schedule);
  score.held = BreakDownHeld(instance, online.schedule);
  if (row.status == exact::SolveStatus::kOptimal && score.valid) {
    // A valid schedule holds memory for at least its restores and runs: objective > 0.
    score.quality_ratio = score.objective > 0 ? row.exact_objective / score.objective : 1.0;
  }
  return score;
}

}  // namespace

HeldBreakdown& HeldBreakdown::operator+=(const HeldBreakdown& other) {
  restore += other.restore;
  execution += other.execution;
  idle_before_first += other.idle_before_first;
  between_runs += other.between_runs;
  after_last += other.after_last;
  return *this;
}

HeldBreakdown BreakDownHeld(const exact::ExactInstance& instance,
                            const exact::ExactSchedule& schedule) {
  std::vector<std::vector<const exact::Execution*>> runs(schedule.residencies.size());
  for (const exact::Execution& e : schedule.executions) {
    if (e.residency < runs.size()) runs[e.residency].push_back(&e);
  }
  HeldBreakdown held;
  for (std::size_t r = 0; r < schedule.residencies.size(); ++r) {
    const exact::Residency& residency = schedule.residencies[r];
    if (residency.function >= instance.functions.size()) continue;
    const std::uint64_t slices = instance.Slices(residency.function);
    const auto part = [&](TimePoint from, TimePoint to) {
      return to > from ? exact::SliceSeconds(slices, to - from) : 0.0;
    };
    const TimePoint end = residency.end;
    const TimePoint ready =
        std::min(residency.restore_start + instance.RestoreTime(residency.function), end);
    held.restore += part(residency.restore_start, ready);
    auto& mine = runs[r];
    std::sort(mine.begin(), mine.end(), [](const exact::Execution* a, const exact::Execution* b) {
      return a->start < b->start;
    });
    TimePoint cursor = ready;
    bool first = true;
    for (const exact::Execution* e : mine) {
      const TimePoint start = std::clamp(e->start, cursor, end);
      const TimePoint stop = std::clamp(e->end, cursor, end);
      (first ? held.idle_before_first : held.between_runs) += part(cursor, start);
      held.execution += part(start, stop);
      cursor = std::max(cursor, stop);
      first = false;
    }
    (first ? held.idle_before_first : held.after_last) += part(cursor, end);
  }
  return held;
}

Result<OnlineSchedule> ScheduleOnline(const exact::ExactInstance& instance,
                                      const std::string& policy) {
  GSHARE_RETURN_IF_ERROR(exact::ValidateInstance(instance));
  if (policy == kBestFit) {
    const auto start = std::chrono::steady_clock::now();
    GSHARE_ASSIGN_OR_RETURN(exact::ExactSchedule schedule, exact::ScheduleBestFit(instance));
    OnlineSchedule out;
    out.wall_time = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - start);
    out.schedule = std::move(schedule);
    out.objective = exact::ScheduleObjective(instance, out.schedule);
    out.executor_gib_seconds = out.objective;
    out.validity = exact::ValidateSchedule(instance, out.schedule);
    return out;
  }
  std::vector<std::size_t> order;
  const Workload workload = ToWorkload(instance, order);
  SimulationOptions options;
  options.executor.record_schedule = true;
  options.policy.instance_start = Duration::zero();
  options.policy.pool_idle = std::chrono::hours(24);
  options.policy.max_gpus = instance.num_gpus;
  // Scored on memory-time, the policy prices an idle slice by it.
  options.policy.gshare.hold_price = PolicyOptions::GShare::HoldPrice::kMemoryTime;
  // The cap for every policy, the whole-GPU ones too: the executor refuses beyond it.
  options.executor.max_gpus = instance.num_gpus;
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

Result<OptGapRow> RunOptGapInstance(const exact::ExactInstance& instance,
                                    const OptGapOptions& options) {
  OptGapRow row;
  GSHARE_ASSIGN_OR_RETURN(exact::ExactSolution solution,
                          exact::SolveExact(instance, options.exact));
  row.status = solution.status;
  row.exact_objective = solution.objective;
  row.exact_seconds = ToSeconds(solution.solve_time);
  if (solution.schedule) row.exact_gpus = exact::PeakGpus(*solution.schedule);
  GSHARE_ASSIGN_OR_RETURN(OnlineSchedule online, ScheduleOnline(instance, options.policy));
  if (solution.schedule) row.exact_held = BreakDownHeld(instance, *solution.schedule);
  row.online = Score(instance, row, options.policy, online);
  for (const std::string& baseline : options.baselines) {
    GSHARE_ASSIGN_OR_RETURN(OnlineSchedule other, ScheduleOnline(instance, baseline));
    row.baselines.push_back(Score(instance, row, baseline, other));
  }
  if (row.status == exact::SolveStatus::kOptimal && row.online.gpus > 0) {
    row.gpu_ratio = static_cast<double>(row.exact_gpus) / row.online.gpus;
  }
  return row;
}

OptGapSummary SummarizeOptGap(std::vector<OptGapRow> rows) {
  OptGapSummary summary;
  summary.instances = static_cast<int>(rows.size());
  double ratio_sum = 0, gpu_ratio_sum = 0, speedup_sum = 0;
  double optimum_sum = 0, online_sum = 0;
  int timed = 0;
  for (const OptGapRow& row : rows) {
    if (row.status != exact::SolveStatus::kOptimal) continue;
    summary.solved_optimally += 1;
    ratio_sum += row.online.quality_ratio;  // 0 when the online schedule is not valid
    gpu_ratio_sum += row.gpu_ratio;
    if (row.online.seconds > 0) {
      speedup_sum += row.exact_seconds / row.online.seconds;
      timed += 1;
    }
    if (!row.online.valid) {
      summary.online_misses += 1;
      continue;
    }
    optimum_sum += row.exact_objective;
    online_sum += row.online.objective;
    summary.held += row.online.held;
    summary.optimum_held += row.exact_held;
    summary.min_quality_ratio = summary.optimal_with_valid_online == 0
                                    ? row.online.quality_ratio
                                    : std::min(summary.min_quality_ratio, row.online.quality_ratio);
    summary.optimal_with_valid_online += 1;
  }
  summary.not_solved = summary.instances - summary.solved_optimally;
  if (online_sum > 0) summary.aggregate_quality_ratio = optimum_sum / online_sum;
  if (summary.solved_optimally > 0) {
    summary.mean_quality_ratio = ratio_sum / summary.solved_optimally;
    summary.mean_gpu_ratio = gpu_ratio_sum / summary.solved_optimally;
  }
  // The baselines, by the same rules over the same instances (every row has the same ones).
  if (!rows.empty()) {
    for (std::size_t b = 0; b < rows.front().baselines.size(); ++b) {
      BaselineSummary baseline;
      baseline.name = rows.front().baselines[b].name;
      double sum = 0, optimum = 0, online = 0;
      for (const OptGapRow& row : rows) {
        if (row.status != exact::SolveStatus::kOptimal || b >= row.baselines.size()) continue;
        const OnlineScore& score = row.baselines[b];
        sum += score.quality_ratio;
        if (!score.valid) {
          baseline.online_misses += 1;
          continue;
        }
        optimum += row.exact_objective;
        online += score.objective;
        baseline.held += score.held;
        baseline.optimum_held += row.exact_held;
      }
      if (online > 0) baseline.aggregate_quality_ratio = optimum / online;
      if (summary.solved_optimally > 0)
        baseline.mean_quality_ratio = sum / summary.solved_optimally;
      summary.baselines.push_back(baseline);
    }
  }
  if (timed > 0) summary.mean_speedup = speedup_sum / timed;
  summary.rows = std::move(rows);
  return summary;
}

Result<OptGapSummary> RunOptGap(const OptGapOptions& options,
                                const std::vector<ResolvedFunction>& functions,
                                const GpuType& gpu) {
  if (options.instances < 1) return InvalidArgument("--instances must be at least 1");
  std::vector<OptGapRow> rows;
  for (int i = 0; i < options.instances; ++i) {
    const std::uint64_t seed = options.seed * 1'000'003ULL + static_cast<std::uint64_t>(i);
    GSHARE_ASSIGN_OR_RETURN(exact::ExactInstance instance,
                            exact::GenerateExactInstance(seed, options.requests, options.gpus,
                                                         functions, gpu, options.generator));
    GSHARE_ASSIGN_OR_RETURN(OptGapRow row, RunOptGapInstance(instance, options));
    row.index = i;
    row.seed = seed;
    rows.push_back(std::move(row));
    if (options.progress) options.progress(i + 1, options.instances);
  }
  return SummarizeOptGap(std::move(rows));
}

Status CheckSizeLadder(const std::vector<int>& sizes, int per_size) {
  if (sizes.empty()) return InvalidArgument("--sizes: no size");
  if (per_size < 1) return InvalidArgument("--size-instances must be at least 1");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 1) return InvalidArgument("--sizes: a size must be at least 1 request");
    if (i > 0 && sizes[i] <= sizes[i - 1]) {
      return InvalidArgument(
          fmt::format("--sizes: {} after {}: sizes must increase", sizes[i], sizes[i - 1]));
    }
  }
  return Status::Ok();
}

Result<std::vector<SizeReach>> RunSizeLadder(
    const OptGapOptions& options, const std::vector<int>& sizes, int per_size,
    const std::vector<ResolvedFunction>& functions, const GpuType& gpu,
    const std::function<void(int requests, int done, int total)>& progress) {
  GSHARE_RETURN_IF_ERROR(CheckSizeLadder(sizes, per_size));
  std::vector<SizeReach> out;
  for (int requests : sizes) {
    SizeReach reach;
    reach.requests = requests;
    reach.gpus = options.gpus;
    reach.time_limit_seconds = ToSeconds(options.exact.time_limit);
    double seconds = 0;
    for (int i = 0; i < per_size; ++i) {
      const std::uint64_t seed = options.seed * 1'000'003ULL + static_cast<std::uint64_t>(i);
      GSHARE_ASSIGN_OR_RETURN(exact::ExactInstance instance,
                              exact::GenerateExactInstance(seed, requests, options.gpus, functions,
                                                           gpu, options.generator));
      GSHARE_ASSIGN_OR_RETURN(exact::ExactSolution solution,
                              exact::SolveExact(instance, options.exact));
      reach.instances += 1;
      if (solution.status == exact::SolveStatus::kOptimal) reach.solved_optimally += 1;
      seconds += ToSeconds(solution.solve_time);
      if (progress) progress(requests, i + 1, per_size);
    }
    reach.mean_solve_seconds = seconds / reach.instances;
    out.push_back(reach);
    if (reach.solved_optimally < reach.instances) break;
  }
  return out;
}

namespace {

nlohmann::ordered_json HeldJson(const HeldBreakdown& held) {
  return {{"restore", held.restore},
          {"execution", held.execution},
          {"idle_before_first_run", held.idle_before_first},
          {"between_runs", held.between_runs},
          {"after_last_run", held.after_last},
          {"total", held.total()}};
}

}  // namespace

std::string OptGapJson(const OptGapOptions& options, const OptGapSummary& summary) {
  nlohmann::ordered_json doc;
  doc["instances"] = summary.instances;
  doc["solved_optimally"] = summary.solved_optimally;
  doc["not_solved"] = summary.not_solved;
  doc["mean_quality_ratio"] = summary.mean_quality_ratio;
  doc["aggregate_quality_ratio"] = summary.aggregate_quality_ratio;
  doc["online_misses"] = summary.online_misses;
  doc["min_quality_ratio"] = summary.min_quality_ratio;
  doc["mean_gpu_ratio"] = summary.mean_gpu_ratio;
  doc["mean_speedup"] = summary.mean_speedup;
  doc["optimal_with_valid_online"] = summary.optimal_with_valid_online;
  doc["held_gib_s"] = HeldJson(summary.held);
  doc["optimum_held_gib_s"] = HeldJson(summary.optimum_held);
  auto baselines = nlohmann::ordered_json::object();
  for (const BaselineSummary& b : summary.baselines) {
    baselines[b.name] = {{"mean_quality_ratio", b.mean_quality_ratio},
                         {"aggregate_quality_ratio", b.aggregate_quality_ratio},
                         {"online_misses", b.online_misses},
                         {"held_gib_s", HeldJson(b.held)},
                         {"optimum_held_gib_s", HeldJson(b.optimum_held)}};
  }
  doc["baselines"] = baselines;
  doc["policy"] = options.policy;
  doc["seed"] = options.seed;
  doc["requests"] = options.requests;
  doc["gpus"] = options.gpus;
  doc["class"] = options.generator.hot ? "hot" : "default";
  doc["time_limit_seconds"] = ToSeconds(options.exact.time_limit);
  auto rows = nlohmann::ordered_json::array();
  for (const OptGapRow& r : summary.rows) {
    nlohmann::ordered_json row;
    row["index"] = r.index;
    row["seed"] = r.seed;
    row["exact_status"] = std::string(exact::SolveStatusName(r.status));
    row["exact_objective_gib_s"] = r.exact_objective;
    row["exact_seconds"] = r.exact_seconds;
    row["exact_gpus"] = r.exact_gpus;
    row["online_objective_gib_s"] = r.online.objective;
    row["online_valid"] = r.online.valid;
    if (!r.online.valid) row["online_violation"] = r.online.violation;
    row["online_seconds"] = r.online.seconds;
    row["online_gpus"] = r.online.gpus;
    row["quality_ratio"] = r.online.quality_ratio;
    row["gpu_ratio"] = r.gpu_ratio;
    auto row_baselines = nlohmann::ordered_json::object();
    for (const OnlineScore& b : r.baselines) {
      nlohmann::ordered_json entry;
      entry["objective_gib_s"] = b.objective;
      entry["valid"] = b.valid;
      if (!b.valid) entry["violation"] = b.violation;
      entry["seconds"] = b.seconds;
      entry["gpus"] = b.gpus;
      entry["quality_ratio"] = b.quality_ratio;
      row_baselines[b.name] = entry;
    }
    row["baselines"] = row_baselines;
    rows.push_back(row);
  }
  doc["rows"] = rows;
  if (!summary.sizes.empty()) {
    auto sizes = nlohmann::ordered_json::array();
    for (const SizeReach& r : summary.sizes) {
      sizes.push_back({{"requests", r.requests},
                       {"gpus", r.gpus},
                       {"instances", r.instances},
                       {"solved_optimally", r.solved_optimally},
                       {"mean_solve_seconds", r.mean_solve_seconds},
                       {"time_limit_seconds", r.time_limit_seconds}});
    }
    doc["sizes"] = sizes;
  }
  return doc.dump(2) + "\n";
}

std::string OptGapTable(const OptGapSummary& summary) {
  std::string out = fmt::format("{:>4} {:>10} {:>14} {:>10} {:>14} {:>7} {:>11} {:>8} {:>9}", "#",
                                "exact", "optimum GiB-s", "exact s", "online GiB-s", "valid",
                                "online us", "ratio", "GPUs x/o");
  if (!summary.rows.empty()) {
    for (const OnlineScore& b : summary.rows.front().baselines)
      out += fmt::format(" {:>9}", b.name);
  }
  out += "\n";
  // A quality ratio, or "miss" for a schedule that is not valid.
  const auto ratio = [](const OnlineScore& score) {
    return score.valid ? fmt::format("{:.3f}", score.quality_ratio) : std::string("miss");
  };
  for (const OptGapRow& r : summary.rows) {
    out +=
        fmt::format("{:>4} {:>10} {:>14.6f} {:>10.3f} {:>14.6f} {:>7} {:>11.1f} {:>8} {:>9}",
                    r.index, exact::SolveStatusName(r.status), r.exact_objective, r.exact_seconds,
                    r.online.objective, r.online.valid ? "yes" : "no", r.online.seconds * 1e6,
                    ratio(r.online), fmt::format("{}/{}", r.exact_gpus, r.online.gpus));
    for (const OnlineScore& b : r.baselines) out += fmt::format(" {:>9}", ratio(b));
    out += "\n";
  }
  out += fmt::format(
      "instances {}: solved optimally {}, not solved {}; over the solved: mean quality ratio "
      "{:.3f} (an online miss counts 0; misses {}; min over the valid {:.3f}), mean GPU ratio "
      "{:.3f}, mean speedup {:.0f}x\n",
      summary.instances, summary.solved_optimally, summary.not_solved, summary.mean_quality_ratio,
      summary.online_misses, summary.min_quality_ratio, summary.mean_gpu_ratio,
      summary.mean_speedup);
  const auto held = [](const HeldBreakdown& h) {
    return fmt::format(
        "GiB-s {:.3f}: restore {:.3f}, execution {:.3f}, idle before the first run {:.3f}, "
        "between runs {:.3f}, after the last run {:.3f}",
        h.total(), h.restore, h.execution, h.idle_before_first, h.between_runs, h.after_last);
  };
  out +=
      fmt::format("policy: aggregate quality ratio {:.3f}; {} (the optimum's {})\n",
                  summary.aggregate_quality_ratio, held(summary.held), held(summary.optimum_held));
  for (const BaselineSummary& b : summary.baselines) {
    out += fmt::format(
        "baseline {}: mean quality ratio {:.3f}, aggregate {:.3f}, misses {}; {} (the "
        "optimum's {})\n",
        b.name, b.mean_quality_ratio, b.aggregate_quality_ratio, b.online_misses, held(b.held),
        held(b.optimum_held));
  }
  if (!summary.sizes.empty()) {
    out += fmt::format("{:>9} {:>5} {:>17} {:>14}\n", "requests", "GPUs", "solved optimally",
                       "mean solve s");
    for (const SizeReach& r : summary.sizes) {
      out += fmt::format("{:>9} {:>5} {:>17} {:>14.3f}\n", r.requests, r.gpus,
                         fmt::format("{} of {}", r.solved_optimally, r.instances),
                         r.mean_solve_seconds);
    }
  }
  return out;
}

}  // namespace gshare
