#include "gshare/sched/exact/solver.h"

#include <fmt/format.h>
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinMessageHandler.hpp>
#include <OsiClpSolverInterface.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "gshare/common/clock.h"
#include "gshare/sched/exact/formulation.h"
#include "gshare/sched/exact/timing.h"

namespace gshare::exact {
namespace {

int NoCallback(CbcModel* /*model*/, int /*where*/) { return 0; }

// A schedule structure read off the MILP's incumbent; the timing LP then gives exact times.
Result<ExactSchedule> ExtractSchedule(const ExactInstance& instance, const Formulation& formulation,
                                      const double* values) {
  GSHARE_ASSIGN_OR_RETURN(ScheduleStructure structure, formulation.Structure(values));
  GSHARE_ASSIGN_OR_RETURN(std::optional<TimedSchedule> timed, SolveTiming(instance, structure));
  if (!timed) return Internal("exact: the incumbent's structure has no feasible timing");
  Status valid = ValidateSchedule(instance, timed->schedule);
  if (!valid.ok()) return Internal(valid.WithContext("exact: incumbent schedule").message());
  return std::move(timed->schedule);
}

}  // namespace

std::string_view SolveStatusName(SolveStatus status) {
  switch (status) {
    case SolveStatus::kOptimal:
      return "optimal";
    case SolveStatus::kFeasible:
      return "feasible";
    case SolveStatus::kTimedOut:
      return "timed-out";
    case SolveStatus::kInfeasible:
      return "infeasible";
  }
  return "unknown";
}

Result<ExactSolution> SolveExact(const ExactInstance& instance, const ExactOptions& options) {
  GSHARE_RETURN_IF_ERROR(ValidateInstance(instance));
  const SteadyClock clock;
  ExactSolution solution;

  if (instance.requests.empty()) {
    solution.status = SolveStatus::kOptimal;
    solution.schedule = ExactSchedule{};
    solution.solve_time = clock.Now().time_since_epoch();
    return solution;
  }
  Formulation formulation(instance);
  if (formulation.trivially_infeasible()) {
    solution.status = SolveStatus::kInfeasible;
    solution.solve_time = clock.Now().time_since_epoch();
    return solution;
  }
  const LinearProgram& lp = formulation.program();
  solution.columns = lp.num_columns();
  solution.integer_columns = lp.num_integers();
  solution.rows = lp.num_rows();

  OsiClpSolverInterface relaxation;
  relaxation.messageHandler()->setLogLevel(0);
  lp.LoadInto(relaxation);
  CbcModel model(relaxation);
  model.messageHandler()->setLogLevel(0);
  CbcSolverUsefulData solver_data;
  solver_data.noPrinting_ = true;
  solver_data.useSignalHandler_ = false;
  CbcMain0(model, solver_data);
  model.messageHandler()->setLogLevel(0);

  const double seconds_left =
      std::max(0.01, ToSeconds(options.time_limit - clock.Now().time_since_epoch()));
  const std::string seconds = fmt::format("{:.3f}", seconds_left);
  const std::string gap = fmt::format("{:g}", std::max(0.0, options.relative_gap));
  // CglPreProcess is off: on the probe instances of docs/scheduling.md it cost more time than it
  // saved (28 instead of 23 of 30 solved within 10 s).
  std::vector<std::string> arguments = {
      "gshare-exact", "-log",  "0",         "-slog", "0",           "-timeMode", "elapsed",
      "-seconds",     seconds, "-ratioGap", gap,     "-preprocess", "off"};
  std::istringstream extra(options.cbc_arguments);
  for (std::string word; extra >> word;) arguments.push_back(word);
  arguments.push_back("-solve");
  arguments.push_back("-quit");
  std::vector<const char*> argv;
  for (const std::string& argument : arguments) argv.push_back(argument.c_str());
  CbcMain1(static_cast<int>(argv.size()), argv.data(), model, NoCallback, solver_data);

  solution.nodes = model.getNodeCount();
  const double* values = model.bestSolution();
  const bool has_incumbent = values != nullptr && model.getMinimizationObjValue() < 1e49;
  if (has_incumbent) {
    solution.solver_objective = formulation.ObjectiveToGibSeconds(model.getObjValue());
    solution.best_bound = formulation.ObjectiveToGibSeconds(model.getBestPossibleObjValue());
    GSHARE_ASSIGN_OR_RETURN(ExactSchedule schedule, ExtractSchedule(instance, formulation, values));
    solution.objective = ScheduleObjective(instance, schedule);
    solution.schedule = std::move(schedule);
    solution.status = model.isProvenOptimal() ? SolveStatus::kOptimal : SolveStatus::kFeasible;
    if (solution.status == SolveStatus::kOptimal) solution.best_bound = solution.solver_objective;
  } else if (model.isProvenInfeasible() ||
             (model.status() == 0 && !model.isSecondsLimitReached())) {
    solution.status = SolveStatus::kInfeasible;
  } else if (model.isSecondsLimitReached() || model.status() == 1) {
    solution.status = SolveStatus::kTimedOut;
    solution.best_bound =
        std::max(0.0, formulation.ObjectiveToGibSeconds(model.getBestPossibleObjValue()));
  } else {
    return Internal(fmt::format("exact: CBC stopped with status {} / {}", model.status(),
                                model.secondaryStatus()));
  }
  solution.solve_time = clock.Now().time_since_epoch();
  return solution;
}

}  // namespace gshare::exact
