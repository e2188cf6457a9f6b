#include "gshare/sched/exact/timing.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <ClpSimplex.hpp>

#include "gshare/sched/exact/linear_program.h"

namespace gshare::exact {
namespace {

double Ns(Duration d) { return static_cast<double>(d.count()); }
double Ns(TimePoint t) { return Ns(t.time_since_epoch()); }
TimePoint FromNs(double value) {
  return TimePoint(Duration(static_cast<Duration::rep>(std::llround(value))));
}

// Residencies restored before `later` on `gpu` that still hold memory when its restore starts.
std::set<std::size_t> EndedBefore(const ScheduleStructure& structure, std::size_t later) {
  std::set<std::size_t> ended;
  for (const auto& [earlier, target] : structure.ended_before) {
    if (target == later) ended.insert(earlier);
  }
  return ended;
}

}  // namespace

std::vector<std::size_t> StillHeldCandidates(const ScheduleStructure& structure, int gpu,
                                             std::size_t index) {
  const std::vector<std::size_t>& order = structure.restore_order[gpu];
  const std::size_t function = structure.residencies[order[index]].function;
  std::vector<std::size_t> candidates;
  for (std::size_t j = 0; j < index; ++j) {
    const std::size_t earlier_function = structure.residencies[order[j]].function;
    if (earlier_function == function) continue;
    bool superseded = false;
    for (std::size_t k = j + 1; k < index && !superseded; ++k) {
      superseded = structure.residencies[order[k]].function == earlier_function;
    }
    if (!superseded) candidates.push_back(order[j]);
  }
  return candidates;
}

bool MemoryFits(const ExactInstance& instance, const ScheduleStructure& structure, int gpu) {
  const std::uint64_t capacity = instance.gpu.memory_bytes;
  const std::vector<std::size_t>& order = structure.restore_order[gpu];
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t later = order[i];
    const std::size_t function = structure.residencies[later].function;
    const std::set<std::size_t> ended = EndedBefore(structure, later);
    std::uint64_t held = instance.SliceBytes(function);
    for (const std::size_t earlier : StillHeldCandidates(structure, gpu, i)) {
      if (ended.count(earlier) == 0) {
        held += instance.SliceBytes(structure.residencies[earlier].function);
      }
    }
    if (held > capacity) return false;
  }
  return true;
}

Result<std::optional<TimedSchedule>> SolveTiming(const ExactInstance& instance,
                                                 const ScheduleStructure& structure) {
  const int num_gpus = static_cast<int>(structure.exec_order.size());
  for (int gpu = 0; gpu < num_gpus; ++gpu) {
    if (!MemoryFits(instance, structure, gpu)) return std::optional<TimedSchedule>();
  }

  // Columns: a start time per request in the structure, a restore start and an end per
  // residency. Times are in nanoseconds.
  LinearProgram lp;
  std::vector<int> start_column(instance.requests.size(), -1);
  std::vector<int> residency_of(instance.requests.size(), -1);
  std::vector<int> restore_column, end_column;
  for (std::size_t q = 0; q < structure.residencies.size(); ++q) {
    const ResidencyGroup& group = structure.residencies[q];
    const double slices = static_cast<double>(instance.Slices(group.function));
    const double restore = Ns(instance.RestoreTime(group.function));
    double earliest_release = kInfinity;
    for (const std::size_t r : group.requests) {
      const ExactRequest& request = instance.requests[r];
      const double exec = Ns(instance.ExecTime(r));
      if (Ns(request.deadline) - exec < Ns(request.release)) return std::optional<TimedSchedule>();
      start_column[r] = lp.AddColumn(Ns(request.release), Ns(request.deadline) - exec, 0, false,
                                     fmt::format("start_{}", r));
      residency_of[r] = static_cast<int>(q);
      earliest_release = std::min(earliest_release, Ns(request.release));
    }
    restore_column.push_back(
        lp.AddColumn(earliest_release, kInfinity, -slices, false, fmt::format("restore_{}", q)));
    end_column.push_back(lp.AddColumn(0, kInfinity, slices, false, fmt::format("end_{}", q)));
    lp.AddRow({{end_column[q], 1}, {restore_column[q], -1}}, restore, kInfinity);
    for (const std::size_t r : group.requests) {
      const double exec = Ns(instance.ExecTime(r));
      lp.AddRow({{start_column[r], 1}, {restore_column[q], -1}}, restore, kInfinity);
      lp.AddRow({{end_column[q], 1}, {start_column[r], -1}}, exec, kInfinity);
    }
  }
  for (int gpu = 0; gpu < num_gpus; ++gpu) {
    const std::vector<std::size_t>& runs = structure.exec_order[gpu];
    for (std::size_t i = 1; i < runs.size(); ++i) {
      lp.AddRow({{start_column[runs[i]], 1}, {start_column[runs[i - 1]], -1}},
                Ns(instance.ExecTime(runs[i - 1])), kInfinity);
    }
    const std::vector<std::size_t>& copies = structure.restore_order[gpu];
    for (std::size_t i = 0; i < copies.size(); ++i) {
      const std::size_t later = copies[i];
      if (i > 0) {
        const std::size_t previous = copies[i - 1];
        lp.AddRow({{restore_column[later], 1}, {restore_column[previous], -1}},
                  Ns(instance.RestoreTime(structure.residencies[previous].function)), kInfinity);
      }
      for (std::size_t j = 0; j < i; ++j) {
        const std::size_t earlier = copies[j];
        if (structure.residencies[earlier].function == structure.residencies[later].function) {
          lp.AddRow({{restore_column[later], 1}, {end_column[earlier], -1}}, 0, kInfinity);
        }
      }
    }
  }
  for (const auto& [earlier, later] : structure.ended_before) {
    lp.AddRow({{restore_column[later], 1}, {end_column[earlier], -1}}, 0, kInfinity);
  }

  ClpSimplex solver;
  solver.setLogLevel(0);
  solver.scaling(0);  // unit coefficients: tolerances then hold in nanoseconds
  lp.LoadInto(solver);
  solver.dual();
  if (solver.isProvenPrimalInfeasible()) return std::optional<TimedSchedule>();
  if (!solver.isProvenOptimal()) {
    return Internal(fmt::format("timing LP: solver status {}", solver.status()));
  }

  const double* values = solver.primalColumnSolution();
  TimedSchedule timed;
  timed.schedule.executions.resize(instance.requests.size());
  for (std::size_t q = 0; q < structure.residencies.size(); ++q) {
    const ResidencyGroup& group = structure.residencies[q];
    timed.schedule.residencies.push_back(Residency{group.function, group.gpu,
                                                   FromNs(values[restore_column[q]]),
                                                   FromNs(values[end_column[q]])});
  }
  for (std::size_t r = 0; r < instance.requests.size(); ++r) {
    if (start_column[r] < 0) continue;
    Execution& execution = timed.schedule.executions[r];
    execution.residency = static_cast<std::size_t>(residency_of[r]);
    execution.start = FromNs(values[start_column[r]]);
    execution.end = execution.start + instance.ExecTime(r);
    // A request's residency must cover its run; the LP vertex does so exactly, but keep the end
    // consistent with the rounded start in every case.
    Residency& residency = timed.schedule.residencies[execution.residency];
    residency.end = std::max(residency.end, execution.end);
  }
  timed.objective = ScheduleObjective(instance, timed.schedule);
  return std::optional<TimedSchedule>(std::move(timed));
}

}  // namespace gshare::exact
