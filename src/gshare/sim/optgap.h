// The optimality-gap study: small random instances solved exactly (MILP, CBC) and online, by a
// policy run in the simulator and by the baselines (the policy variant fifo, and the best-fit
// greedy of sched/exact/best_fit.h), all scored with the exact model's objective and validator
// (sched/exact/schedule.h) and summarized over the instances CBC proves optimal.
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

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/model/function_spec.h"
#include "gshare/model/gpu_type.h"
#include "gshare/sched/exact/generator.h"
#include "gshare/sched/exact/solver.h"

namespace gshare {

// Where a schedule's GiB-seconds go (the held-time rule): per residency, the slice's memory times
// its restore (reservation to the end of the copy), the time a run of it is in progress, the idle
// time before its first run (all of it after the restore when it serves none), between runs and
// after its last run. The parts sum to ScheduleObjective.
struct HeldBreakdown {
  double restore = 0;
  double execution = 0;
  double idle_before_first = 0;
  double between_runs = 0;
  double after_last = 0;
  double total() const {
    return restore + execution + idle_before_first + between_runs + after_last;
  }
  HeldBreakdown& operator+=(const HeldBreakdown& other);
};
HeldBreakdown BreakDownHeld(const exact::ExactInstance& instance,
                            const exact::ExactSchedule& schedule);

struct OnlineSchedule {
  exact::ExactSchedule schedule;
  double objective = 0;  // exact::ScheduleObjective: memory-time held (the held-time rule)
  // The simulator's reserved memory-time up to the last completion, GiB-s: equal to `objective`
  // up to rounding, since here every slice is its function's memory in whole 128 MiB slices
  // (batch 1); a cross-check of the conversion.
  double executor_gib_seconds = 0;
  Status validity;       // exact::ValidateSchedule
  Duration wall_time{};  // the whole online run: an upper bound on the decision time
  std::uint64_t events = 0;
};

// The greedy online baseline exact::ScheduleBestFit, by the name ScheduleOnline knows it.
inline constexpr std::string_view kBestFit = "best-fit";

// Runs `policy` on `instance` and converts what it did to an ExactSchedule: a policy known to
// MakePolicy in the simulator, or kBestFit (exact::ScheduleBestFit, already in the model's terms,
// scored and validated alike; its executor_gib_seconds is its objective).
Result<OnlineSchedule> ScheduleOnline(const exact::ExactInstance& instance,
                                      const std::string& policy);

struct OptGapOptions {
  int instances = 30;
  std::uint64_t seed = 1;
  int requests = 12;
  int gpus = 2;
  std::string policy = "gshare";
  // Scored beside the policy on the same instances by the same rules: "fifo", the policy variant
  // (sched/policy_registry.h) run in the simulator exactly as the policy is, and kBestFit.
  std::vector<std::string> baselines = {"fifo", std::string(kBestFit)};
  exact::ExactOptions exact;
  exact::GeneratorOptions generator;
  std::function<void(int done, int total)> progress;  // may be empty
};

// One online schedule of an instance, scored against the exact solution.
struct OnlineScore {
  std::string name;          // the policy or baseline
  double objective = 0;      // GiB-s held (the held-time rule)
  bool valid = false;        // passes exact::ValidateSchedule (every deadline met, ...)
  std::string violation;     // why not valid
  double seconds = 0;        // wall time of the online run
  int gpus = 0;              // exact::PeakGpus of its schedule
  double quality_ratio = 0;  // exact / online objective when the instance was solved to
                             // optimality and the online schedule is valid; otherwise 0
  HeldBreakdown held;        // of its schedule
};

struct OptGapRow {
  int index = 0;
  std::uint64_t seed = 0;
  exact::SolveStatus status = exact::SolveStatus::kTimedOut;
  double exact_objective = 0;  // GiB-s, when a schedule was found
  double exact_seconds = 0;
  int exact_gpus = 0;                  // exact::PeakGpus of the exact schedule, when one was found
  HeldBreakdown exact_held;            // of the exact schedule, when one was found
  OnlineScore online;                  // the policy of OptGapOptions::policy
  std::vector<OnlineScore> baselines;  // in the order of OptGapOptions::baselines
  double gpu_ratio = 0;  // exact_gpus / online.gpus for an optimally solved instance; else 0
};

// The figures, over the instances CBC solved to optimality (the others are counted in
// not_solved and left out of every mean):
//  - mean_quality_ratio: the mean of the quality ratio (optimum / online objective), where an
//    instance whose online schedule is not valid (misses a deadline, or breaks another constraint
//    of the model) counts 0; online_misses counts those instances;
//  - min_quality_ratio: the least ratio among the valid online schedules (0 if none);
//  - mean_gpu_ratio: the mean of exact_gpus / online.gpus, valid or not;
//  - mean_speedup: the mean of exact solve time / online run time;
//  - aggregate_quality_ratio: the sum of the optima over the sum of the online objectives, over
//    the instances solved optimally whose online schedule is valid (a few large instances weigh
//    as much as they cost; the mean weighs every instance alike);
//  - held: each schedule's GiB-seconds broken down (HeldBreakdown), summed over the instances
//    solved optimally whose online schedule is valid, beside the optimum's over the same ones;
//  - baselines: mean_quality_ratio, aggregate_quality_ratio (over the instances where the
//    baseline's schedule is valid), online_misses and held of each baseline, by the same rules.
// With no instance solved to optimality every mean is 0 (not NaN): read it with the counts.
struct BaselineSummary {
  std::string name;
  double mean_quality_ratio = 0;
  double aggregate_quality_ratio = 0;
  int online_misses = 0;
  HeldBreakdown held;
  HeldBreakdown optimum_held;  // the optimum's, over the same instances
};

// The exact solver's reach at one instance size (--sizes).
struct SizeReach {
  int requests = 0;
  int gpus = 0;
  int instances = 0;  // solved at this size
  int solved_optimally = 0;
  // Mean wall time of the solves at this size, those stopped at the time limit included.
  double mean_solve_seconds = 0;
  double time_limit_seconds = 0;  // of each solve
};

struct OptGapSummary {
  int instances = 0;
  int solved_optimally = 0;
  int not_solved = 0;                 // instances - solved_optimally
  int optimal_with_valid_online = 0;  // solved_optimally - online_misses
  int online_misses = 0;
  double mean_quality_ratio = 0;
  double aggregate_quality_ratio = 0;
  double min_quality_ratio = 0;
  HeldBreakdown held;          // the policy's
  HeldBreakdown optimum_held;  // the optimum's, over the same instances
  double mean_gpu_ratio = 0;
  double mean_speedup = 0;
  std::vector<BaselineSummary> baselines;  // in the rows' order of baselines
  std::vector<OptGapRow> rows;
  std::vector<SizeReach> sizes;  // RunSizeLadder's, when asked for (--sizes); else empty
};

// Solves `instance` exactly and runs `options.policy` on it; fills every field of the row but
// index and seed. Errors: a malformed instance; a solver or simulator failure (a bug).
Result<OptGapRow> RunOptGapInstance(const exact::ExactInstance& instance,
                                    const OptGapOptions& options);

// The summary of `rows` (see OptGapSummary). Pure.
OptGapSummary SummarizeOptGap(std::vector<OptGapRow> rows);

// Generates and solves `options.instances` instances from `functions` on `gpu`. Errors: bad
// options; a solver or simulator failure (a bug).
Result<OptGapSummary> RunOptGap(const OptGapOptions& options,
                                const std::vector<ResolvedFunction>& functions, const GpuType& gpu);

// The sizes (requests per instance) `gshare optgap --sizes` tries when given no list.
inline constexpr std::array<int, 12> kDefaultSizeLadder = {6,  8,  10, 12, 16, 20,
                                                           24, 28, 32, 40, 48, 64};

// InvalidArgument unless `sizes` is a non-empty, strictly increasing list of sizes of at least 1
// and per_size is at least 1.
Status CheckSizeLadder(const std::vector<int>& sizes, int per_size);

// The exact solver's reach: for each size of `sizes` (requests per instance, strictly
// increasing) it draws `per_size` instances as RunOptGap does (options.seed, options.gpus,
// options.generator: instance i of every size has the same seed) and solves them with
// options.exact; it stops after the first size at which CBC does not prove every instance
// optimal within options.exact.time_limit (that size is reported). The online policy is not run.
// `progress(requests, done, per_size)` is called after each solve (may be empty). Errors:
// CheckSizeLadder's; a generator or solver failure.
Result<std::vector<SizeReach>> RunSizeLadder(
    const OptGapOptions& options, const std::vector<int>& sizes, int per_size,
    const std::vector<ResolvedFunction>& functions, const GpuType& gpu,
    const std::function<void(int requests, int done, int total)>& progress = {});

// {"instances": N, "solved_optimally": k, "mean_quality_ratio": ..., "min_quality_ratio": ...,
//  "mean_speedup": ..., ...} with a row per instance, and "sizes" when summary.sizes is not
//  empty. Every number is finite.
std::string OptGapJson(const OptGapOptions& options, const OptGapSummary& summary);
std::string OptGapTable(const OptGapSummary& summary);

}  // namespace gshare
