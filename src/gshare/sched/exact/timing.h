// Timing: the best start times for a schedule whose discrete decisions are fixed.
//
// Once it is decided which requests share a residency, on which GPU each residency lives, in
// which order each GPU runs its requests and copies its residencies, and which residencies must
// have ended before a later restore starts (so that memory fits), every remaining constraint is
// a difference of two times or a bound, and minimizing the objective is a small linear program.
// Its constraint matrix is a network matrix, so with whole-nanosecond data its optimal vertex is
// whole nanoseconds too: the times returned are exact, not rounded approximations.
//
// Used by the brute-force enumerator (for every structure) and by the MILP solver (to turn the
// solver's floating-point incumbent into an exact schedule). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/sched/exact/instance.h"
#include "gshare/sched/exact/schedule.h"

namespace gshare::exact {

struct ResidencyGroup {
  std::size_t function = 0;
  int gpu = 0;
  std::vector<std::size_t> requests;  // request indices, all of `function`; non-empty
};

struct ScheduleStructure {
  std::vector<ResidencyGroup> residencies;
  // Per GPU (index = GPU): its requests in execution order, and its residencies (indices into
  // `residencies`) in restore order. Every request and residency appears exactly once.
  std::vector<std::vector<std::size_t>> exec_order;
  std::vector<std::vector<std::size_t>> restore_order;
  // (earlier, later): residency `earlier`, restored before `later` on the same GPU, must have
  // ended by the time `later`'s restore starts. Pairs of one function are implied (single-copy).
  std::vector<std::pair<std::size_t, std::size_t>> ended_before;
};

// The residencies restored before position `index` of `gpu`'s restore order that may still hold
// memory when it starts: those of other functions, less any followed by a later residency of
// their own function (single-copy: that one could only start after the earlier one ended).
std::vector<std::size_t> StillHeldCandidates(const ScheduleStructure& structure, int gpu,
                                             std::size_t index);

// True when memory fits at every restore start, given that exactly the residencies named in
// `ended_before` (and earlier residencies of the same function) have ended by then.
bool MemoryFits(const ExactInstance& instance, const ScheduleStructure& structure, int gpu);

struct TimedSchedule {
  ExactSchedule schedule;  // executions of requests outside the structure are left default
  double objective = 0;    // ScheduleObjective over the structure's residencies, GiB-seconds
};

// Minimizes the objective over the times of the structure's requests and residencies.
// `structure` may cover a subset of the requests (one GPU's share, say); the schedule's
// residencies are then numbered as in `structure`. Returns nullopt when no times satisfy the
// structure (or memory does not fit); an error only when the LP solver fails.
Result<std::optional<TimedSchedule>> SolveTiming(const ExactInstance& instance,
                                                 const ScheduleStructure& structure);

}  // namespace gshare::exact
