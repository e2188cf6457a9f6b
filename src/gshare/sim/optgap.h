// The optimality-gap study: small random instances solved exactly (MILP, CBC) and by an online
// policy run in the simulator, both scored with the exact model's objective and validator
// (sched/exact/schedule.h).
//
// The online policy gets the instance's GPUs (max_gpus), all present from time zero, and keeps
// them for the whole instance. Its schedule is read from the simulator's ScheduleLog and scored by
// the memory-time its slices were really held (the held-time rule):
//  - a residency starts when the policy called Restore (its memory is reserved then; the policies
//    start a copy only on an idle copy engine, so this is also the start of the copy; a restore
//    queued behind another copy would start before its copy and fail the validator's copy-engine
//    check);
//  - it ends when the slice's memory was freed (ScheduleLog::Residency::released: the eviction by
//    discard, or the end of the copy back to the host), which includes the time the policy kept
//    an idle slice (ski rental, or cached until evicted);
//  - a slice still held when the last request of the instance completes counts until that last
//    completion (the instance ends there), or until its restore finishes if that is later;
//  - this is the simulator's own accounting of reserved memory (PolicyReport::vgpu_gib_seconds,
//    whose window also ends at the last completion).
// The exact schedule holds each slice only while it needs it, so it is scored the same way. An
// online schedule that misses a deadline or breaks another constraint of the exact model is
// reported as not valid.
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
  double objective = 0;  // exact::ScheduleObjective: memory-time held (the held-time rule)
  // The simulator's reserved memory-time up to the last completion, GiB-s: equal to `objective`
  // up to rounding, since here every slice is its function's memory in whole 128 MiB slices
  // (batch 1); a cross-check of the conversion.
  double executor_gib_seconds = 0;
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
