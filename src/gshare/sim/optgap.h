// The optimality-gap study: small random instances solved exactly (MILP, CBC) and by an online
// policy run in the simulator, both scored with the exact model's objective and validator
// (sched/exact/schedule.h).
//
// The online policy gets the instance's GPUs (max_gpus), all present from time zero, and keeps
// them for the whole instance. Its schedule is read from the simulator's ScheduleLog; a
// residency is scored from its restore until the end of the last execution it served (the
// slice's active time), the same way the exact schedule is. An online schedule that misses a
// deadline or breaks another constraint of the exact model is reported as not valid and left out
// of the quality ratio.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/model/function_spec.h"
#include "gshare/model/gpu_type.h"
#include "gshare/sched/exact/generator.h"
#include "gshare/sched/exact/solver.h"

namespace gshare {

struct OnlineSchedule {
  exact::ExactSchedule schedule;
  double objective = 0;  // exact::ScheduleObjective
  Status validity;       // exact::ValidateSchedule
  Duration wall_time{};  // the whole simulated run: an upper bound on the decision time
  std::uint64_t events = 0;
};

// Runs `policy` on `instance` in the simulator and converts what it did to an ExactSchedule.
Result<OnlineSchedule> ScheduleOnline(const exact::ExactInstance& instance,
                                      const std::string& policy);

struct OptGapOptions {
  int instances = 30;
  std::uint64_t seed = 1;
  int requests = 12;
  int gpus = 2;
  std::string policy = "gshare";
  exact::ExactOptions exact;
  exact::GeneratorOptions generator;
  std::function<void(int done, int total)> progress;  // may be empty
};

struct OptGapRow {
  int index = 0;
  std::uint64_t seed = 0;
  exact::SolveStatus status = exact::SolveStatus::kTimedOut;
  double exact_objective = 0;  // GiB-s, when a schedule was found
  double exact_seconds = 0;
  double online_objective = 0;
  bool online_valid = false;
  std::string online_violation;  // why not valid
  double online_seconds = 0;
  double quality_ratio = 0;  // exact / online, for optimal instances with a valid online schedule
};

struct OptGapSummary {
  int instances = 0;
  int solved_optimally = 0;
  int optimal_with_valid_online = 0;  // the instances the quality ratio is taken over
  double mean_quality_ratio = 0;
  double min_quality_ratio = 0;
  double mean_speedup = 0;  // mean over optimal instances of exact solve time / online time
  std::vector<OptGapRow> rows;
};

// Generates and solves `options.instances` instances from `functions` on `gpu`. Errors: bad
// options; a solver or simulator failure (a bug).
Result<OptGapSummary> RunOptGap(const OptGapOptions& options,
                                const std::vector<ResolvedFunction>& functions, const GpuType& gpu);

// {"instances": N, "solved_optimally": k, "mean_quality_ratio": ..., "min_quality_ratio": ...,
//  "mean_speedup": ..., ...} with a row per instance.
std::string OptGapJson(const OptGapOptions& options, const OptGapSummary& summary);
std::string OptGapTable(const OptGapSummary& summary);

}  // namespace gshare
