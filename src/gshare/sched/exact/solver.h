// SolveExact: the optimal schedule of a small ExactInstance, by a MILP solved with COIN-OR CBC.
//
// The formulation is written out in docs/scheduling.md: continuous time, one residency per
// "leader" request, big-M disjunctions for the order of executions and of restores on a GPU,
// and memory checked at restore starts. The solver's floating-point incumbent is turned into an
// exact schedule (whole nanoseconds) by re-solving the timing LP with its discrete decisions
// fixed, and the schedule is checked with ValidateSchedule before it is returned.
//
// Intended for tens of requests and a few GPUs. One CBC thread; CBC prints nothing. Whether
// CBC's standalone driver may run in several threads at once is not established here: call
// SolveExact from one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/sched/exact/instance.h"
#include "gshare/sched/exact/schedule.h"

namespace gshare::exact {

enum class SolveStatus {
  kOptimal,     // the schedule is optimal (within `relative_gap`)
  kFeasible,    // the time limit hit with a schedule in hand; `best_bound` bounds the optimum
  kTimedOut,    // the time limit hit before any schedule was found; feasibility is unknown
  kInfeasible,  // proven: no schedule meets every deadline
};

std::string_view SolveStatusName(SolveStatus status);

struct ExactOptions {
  Duration time_limit = std::chrono::seconds(10);  // wall-clock limit of the branch and bound
  double relative_gap = 0;  // stop when (incumbent - bound) / incumbent is at most this
  // More CBC command-line arguments, separated by spaces ("-cuts off -heuristics on"), placed
  // before "-solve". For experiments; an unknown argument is reported by CBC as ignored.
  std::string cbc_arguments;
};

struct ExactSolution {
  SolveStatus status = SolveStatus::kTimedOut;
  std::optional<ExactSchedule> schedule;  // present for kOptimal and kFeasible
  double objective = 0;                   // ScheduleObjective(schedule), GiB-seconds
  double solver_objective = 0;            // the MILP's own objective of its incumbent, GiB-seconds
  double best_bound = 0;   // a lower bound on the optimum, GiB-seconds (0 if unknown)
  Duration solve_time{};   // wall-clock time of the whole call
  std::int64_t nodes = 0;  // branch-and-bound nodes
  int columns = 0;         // size of the MILP
  int integer_columns = 0;
  int rows = 0;
};

// Solves `instance` to optimality or until the time limit. Errors: InvalidArgument when the
// instance is malformed (ValidateInstance); Internal when CBC fails or its schedule does not
// validate (a bug). An infeasible instance is not an error: status kInfeasible.
Result<ExactSolution> SolveExact(const ExactInstance& instance, const ExactOptions& options = {});

}  // namespace gshare::exact
