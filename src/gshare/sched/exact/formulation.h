// Formulation: the MILP of docs/scheduling.md for one ExactInstance, and the reading of a
// solution back into a schedule structure.
//
// Internal to the exact solver. The instance must outlive the Formulation. Times are in
// milliseconds inside the MILP and the objective in (128 MiB slice) x milliseconds; the
// conversion to GiB-seconds is ObjectiveToGibSeconds. Not thread-safe; build one per solve.
#pragma once

#include <cstddef>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/sched/exact/instance.h"
#include "gshare/sched/exact/linear_program.h"
#include "gshare/sched/exact/timing.h"

namespace gshare::exact {

class Formulation {
 public:
  explicit Formulation(const ExactInstance& instance);

  // True when the instance was found infeasible while building (a request that cannot meet its
  // deadline in any residency, a function larger than a GPU); program() is then empty.
  bool trivially_infeasible() const { return infeasible_; }
  const LinearProgram& program() const { return lp_; }
  double ObjectiveToGibSeconds(double value) const;

  // The discrete decisions of an integer-feasible solution (`values` has one entry per column).
  Result<ScheduleStructure> Structure(const double* values) const;

 private:
  // A literal of a big-M implication: holds when the column is 1 (positive) or 0 (negative).
  struct Literal {
    int column;
    bool positive;
  };
  // The order of two restores on a GPU (lower position first or second), when not decided by
  // the time windows alone.
  struct PairOrder {
    bool first_possible = false;   // the lower position's residency can come first
    bool second_possible = false;  // the higher position's residency can come first
    bool disjoint = false;         // the windows never overlap: no constraint needed
    int column = -1;               // binary: 1 when the lower position comes first
  };

  void Build();
  void AddTimeColumns();
  void AddAssignment();
  void AddExecutionPairs();
  void AddResidencyPairs();
  void AddMemory();
  // Adds "sum(terms) >= rhs whenever every literal holds", with the smallest big-M that the
  // column bounds allow; nothing when the implication always holds.
  void AddImplied(std::vector<Term> terms, double rhs, const std::vector<Literal>& literals);
  // A column that is 1 when positions a and b run on the same GPU (-1 with a single GPU, where
  // they always do). Created on first use.
  int SameGpu(std::size_t a, std::size_t b);
  void AddSameGpuLiteral(std::size_t a, std::size_t b, std::vector<Literal>& literals);
  void ForbidSameGpuLeaders(std::size_t a, std::size_t b);

  const ExactInstance& instance_;
  bool infeasible_ = false;
  LinearProgram lp_;
  std::size_t n_ = 0;
  int gpus_ = 1;

  // Positions: requests sorted by (function, release, deadline, index). A residency is named by
  // its leader, the first of its requests in this order.
  std::vector<std::size_t> request_at_;
  std::vector<std::size_t> function_;
  std::vector<double> release_, deadline_, exec_, restore_, slices_;
  std::vector<bool> can_lead_;

  std::vector<int> start_, restore_start_, end_;       // columns per position
  std::vector<std::vector<int>> assign_;               // [leader][member] -> column or -1
  std::vector<std::vector<int>> gpu_;                  // [position][gpu] -> binary column
  std::vector<std::vector<int>> same_gpu_;             // [a][b], a < b -> column or -1
  std::vector<std::vector<PairOrder>> restore_order_;  // [a][b], a < b, both can lead
  std::vector<std::vector<int>> ended_;                // [earlier][later] -> psi column or -1
};

}  // namespace gshare::exact
