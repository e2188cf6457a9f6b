// SolveBruteForce: the optimum of a tiny ExactInstance by exhaustive enumeration, to cross-check
// the MILP.
//
// It enumerates every discrete decision the model has: how each function's requests are split
// into residencies, which GPU each residency lives on (GPUs are identical, so assignments that
// only rename GPUs are skipped), the order of executions and of restores on each GPU, and which
// earlier residencies end before a later restore starts. For each such structure the best times
// are a small LP (timing.h). It shares no code with the MILP formulation, only the timing LP and
// the schedule checks. The work grows factorially: meant for up to about 6 requests and 2 GPUs.
// Pure function; thread-safe.
#pragma once

#include <cstddef>

#include "gshare/common/status.h"
#include "gshare/sched/exact/solver.h"

namespace gshare::exact {

struct BruteForceOptions {
  std::size_t max_requests = 6;  // larger instances are refused (InvalidArgument)
};

// Returns kOptimal with an optimal schedule, or kInfeasible. Errors: InvalidArgument for a
// malformed or too large instance; Internal if a timing LP fails.
Result<ExactSolution> SolveBruteForce(const ExactInstance& instance,
                                      const BruteForceOptions& options = {});

}  // namespace gshare::exact
