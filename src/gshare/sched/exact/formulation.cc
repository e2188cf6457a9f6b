#include "gshare/sched/exact/formulation.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace gshare::exact {
namespace {

constexpr double kNsPerMs = 1e6;
double Ms(std::int64_t ns) { return static_cast<double>(ns) / kNsPerMs; }
std::int64_t Ns(Duration d) { return d.count(); }
std::int64_t Ns(TimePoint t) { return t.time_since_epoch().count(); }

}  // namespace

Formulation::Formulation(const ExactInstance& instance) : instance_(instance) { Build(); }

double Formulation::ObjectiveToGibSeconds(double value) const {
  // (slices) x (milliseconds) -> GiB x seconds.
  constexpr double kSliceGiB = static_cast<double>(kSliceBytes) / static_cast<double>(kGiB);
  return value * kSliceGiB * 1e-3;
}

void Formulation::Build() {
  n_ = instance_.requests.size();
  gpus_ = instance_.num_gpus;
  request_at_.resize(n_);
  std::iota(request_at_.begin(), request_at_.end(), std::size_t{0});
  std::sort(request_at_.begin(), request_at_.end(), [&](std::size_t a, std::size_t b) {
    const ExactRequest& x = instance_.requests[a];
    const ExactRequest& y = instance_.requests[b];
    return std::tie(x.function, x.release, x.deadline, a) <
           std::tie(y.function, y.release, y.deadline, b);
  });
  for (std::size_t p = 0; p < n_; ++p) {
    const std::size_t r = request_at_[p];
    const ExactRequest& request = instance_.requests[r];
    const std::size_t f = request.function;
    function_.push_back(f);
    release_.push_back(Ms(Ns(request.release)));
    deadline_.push_back(Ms(Ns(request.deadline)));
    exec_.push_back(Ms(Ns(instance_.functions[f].exec)));
    restore_.push_back(Ms(Ns(instance_.RestoreTime(f))));
    slices_.push_back(static_cast<double>(instance_.Slices(f)));
    // Decided in whole nanoseconds, as the brute force and the validator do.
    const Duration exec = instance_.functions[f].exec;
    if (request.release + exec > request.deadline ||
        instance_.SliceBytes(f) > instance_.gpu.memory_bytes) {
      infeasible_ = true;
    }
    can_lead_.push_back(request.release + instance_.RestoreTime(f) + exec <= request.deadline);
  }
  if (infeasible_) return;
  AddTimeColumns();
  AddAssignment();
  if (infeasible_) return;
  AddExecutionPairs();
  AddResidencyPairs();
  AddMemory();
}

void Formulation::AddTimeColumns() {
  for (std::size_t p = 0; p < n_; ++p) {
    double latest_end = deadline_[p];
    for (std::size_t q = p + 1; q < n_ && function_[q] == function_[p]; ++q) {
      latest_end = std::max(latest_end, deadline_[q]);
    }
    start_.push_back(
        lp_.AddColumn(release_[p], deadline_[p] - exec_[p], 0, false, fmt::format("start_{}", p)));
    const double latest_restore =
        can_lead_[p] ? deadline_[p] - exec_[p] - restore_[p] : release_[p];
    restore_start_.push_back(lp_.AddColumn(release_[p], latest_restore, -slices_[p], false,
                                           fmt::format("restore_{}", p)));
    end_.push_back(lp_.AddColumn(release_[p], can_lead_[p] ? latest_end : release_[p], slices_[p],
                                 false, fmt::format("end_{}", p)));
    lp_.AddRow({{end_[p], 1}, {restore_start_[p], -1}}, 0, kInfinity);
  }
}

void Formulation::AddAssignment() {
  gpu_.assign(n_, {});
  for (std::size_t p = 0; p < n_; ++p) {
    std::vector<Term> one_gpu;
    for (int g = 0; g < gpus_; ++g) {
      gpu_[p].push_back(lp_.AddBinary(fmt::format("gpu_{}_{}", p, g)));
      one_gpu.push_back({gpu_[p].back(), 1});
    }
    lp_.AddRow(one_gpu, 1, 1);
    // Identical GPUs: number them in order of first use by position.
    for (int g = 1; g < gpus_; ++g) {
      std::vector<Term> terms = {{gpu_[p][g], 1}};
      for (std::size_t earlier = 0; earlier < p; ++earlier) {
        terms.push_back({gpu_[earlier][g - 1], -1});
      }
      lp_.AddRow(terms, -kInfinity, 0);
    }
  }

  assign_.assign(n_, std::vector<int>(n_, -1));
  for (std::size_t r = 0; r < n_; ++r) {
    const ExactRequest& member = instance_.requests[request_at_[r]];
    std::vector<Term> partition;
    for (std::size_t q = r + 1; q-- > 0;) {
      if (function_[q] != function_[r]) break;
      if (!can_lead_[q]) continue;
      const ExactRequest& leader = instance_.requests[request_at_[q]];
      const std::size_t f = function_[r];
      if (leader.release + instance_.RestoreTime(f) + instance_.functions[f].exec >
          member.deadline) {
        continue;
      }
      assign_[q][r] = lp_.AddBinary(fmt::format("assign_{}_{}", q, r));
      partition.push_back({assign_[q][r], 1});
    }
    if (partition.empty()) {
      infeasible_ = true;
      return;
    }
    lp_.AddRow(partition, 1, 1);
  }

  for (std::size_t q = 0; q < n_; ++q) {
    for (std::size_t r = q; r < n_; ++r) {
      const int x = assign_[q][r];
      if (x < 0) continue;
      if (r != q) {
        lp_.AddRow({{x, 1}, {assign_[q][q], -1}}, -kInfinity, 0);
        for (int g = 0; g < gpus_; ++g) {
          lp_.AddRow({{gpu_[r][g], 1}, {gpu_[q][g], -1}, {x, 1}}, -kInfinity, 1);
          lp_.AddRow({{gpu_[q][g], 1}, {gpu_[r][g], -1}, {x, 1}}, -kInfinity, 1);
        }
      }
      AddImplied({{start_[r], 1}, {restore_start_[q], -1}}, restore_[q], {{x, true}});
      AddImplied({{end_[q], 1}, {start_[r], -1}}, exec_[r], {{x, true}});
      // Variable bounds, tighter in the relaxation than the big-M rows above: a member's window
      // bounds its residency's restore from above and its end from below.
      const double latest_restore = deadline_[r] - exec_[r] - restore_[q];
      if (latest_restore < lp_.upper(restore_start_[q])) {
        lp_.AddRow({{restore_start_[q], 1}, {x, lp_.upper(restore_start_[q]) - latest_restore}},
                   -kInfinity, lp_.upper(restore_start_[q]));
      }
      const double earliest_end = release_[r] + exec_[r];
      if (earliest_end > lp_.lower(end_[q])) {
        lp_.AddRow({{end_[q], 1}, {x, lp_.lower(end_[q]) - earliest_end}}, lp_.lower(end_[q]),
                   kInfinity);
      }
    }
  }
  // A residency spans its restore and then its members' runs, one at a time on its GPU.
  for (std::size_t q = 0; q < n_; ++q) {
    if (assign_[q][q] < 0) continue;
    std::vector<Term> span = {{end_[q], 1}, {restore_start_[q], -1}};
    for (std::size_t r = q; r < n_; ++r) {
      if (assign_[q][r] < 0) continue;
      span.push_back({assign_[q][r], -(exec_[r] + (r == q ? restore_[q] : 0))});
    }
    lp_.AddRow(span, 0, kInfinity);
  }
}

void Formulation::AddImplied(std::vector<Term> terms, double rhs,
                             const std::vector<Literal>& literals) {
  const double big_m = rhs - lp_.MinimumOf(terms);
  if (big_m <= 0) return;
  double lower = rhs;
  for (const Literal& literal : literals) {
    terms.push_back({literal.column, literal.positive ? -big_m : big_m});
    if (literal.positive) lower -= big_m;
  }
  lp_.AddRow(terms, lower, kInfinity);
}

int Formulation::SameGpu(std::size_t a, std::size_t b) {
  if (gpus_ == 1) return -1;
  if (a > b) std::swap(a, b);
  if (same_gpu_.empty()) same_gpu_.assign(n_, std::vector<int>(n_, -1));
  int& column = same_gpu_[a][b];
  if (column < 0) {
    // Continuous: only these rows push it up, and every use relaxes a constraint when it is 0.
    column = lp_.AddColumn(0, 1, 0, false, fmt::format("same_gpu_{}_{}", a, b));
    for (int g = 0; g < gpus_; ++g) {
      lp_.AddRow({{column, 1}, {gpu_[a][g], -1}, {gpu_[b][g], -1}}, -1, kInfinity);
    }
  }
  return column;
}

void Formulation::AddSameGpuLiteral(std::size_t a, std::size_t b, std::vector<Literal>& literals) {
  const int column = SameGpu(a, b);
  if (column >= 0) literals.push_back({column, true});
}

void Formulation::ForbidSameGpuLeaders(std::size_t a, std::size_t b) {
  for (int g = 0; g < gpus_; ++g) {
    lp_.AddRow({{assign_[a][a], 1}, {assign_[b][b], 1}, {gpu_[a][g], 1}, {gpu_[b][g], 1}},
               -kInfinity, 3);
  }
}

void Formulation::AddExecutionPairs() {
  for (std::size_t a = 0; a < n_; ++a) {
    const ExactRequest& x = instance_.requests[request_at_[a]];
    const Duration exec_a = instance_.functions[function_[a]].exec;
    for (std::size_t b = a + 1; b < n_; ++b) {
      const ExactRequest& y = instance_.requests[request_at_[b]];
      const Duration exec_b = instance_.functions[function_[b]].exec;
      if (x.deadline <= y.release || y.deadline <= x.release) continue;
      const bool a_first = x.release + exec_a + exec_b <= y.deadline;
      const bool b_first = y.release + exec_b + exec_a <= x.deadline;
      const std::vector<Term> b_after_a = {{start_[b], 1}, {start_[a], -1}};
      const std::vector<Term> a_after_b = {{start_[a], 1}, {start_[b], -1}};
      std::vector<Literal> same;
      AddSameGpuLiteral(a, b, same);
      if (a_first && b_first) {
        const int order = lp_.AddBinary(fmt::format("order_{}_{}", a, b));
        std::vector<Literal> first = same, second = same;
        first.push_back({order, true});
        second.push_back({order, false});
        AddImplied(b_after_a, exec_[a], first);
        AddImplied(a_after_b, exec_[b], second);
      } else if (a_first) {
        AddImplied(b_after_a, exec_[a], same);
      } else if (b_first) {
        AddImplied(a_after_b, exec_[b], same);
      } else if (gpus_ == 1) {
        infeasible_ = true;
      } else {
        for (int g = 0; g < gpus_; ++g) {
          lp_.AddRow({{gpu_[a][g], 1}, {gpu_[b][g], 1}}, -kInfinity, 1);
        }
      }
    }
  }
}

void Formulation::AddResidencyPairs() {
  restore_order_.assign(n_, std::vector<PairOrder>(n_));
  for (std::size_t a = 0; a < n_; ++a) {
    if (!can_lead_[a]) continue;
    for (std::size_t b = a + 1; b < n_; ++b) {
      if (!can_lead_[b]) continue;
      PairOrder& order = restore_order_[a][b];
      const bool same_function = function_[a] == function_[b];
      // One function: whole residencies are disjoint (single-copy). Two functions: restores
      // are disjoint (one copy engine per GPU).
      const double held_a = same_function ? 0 : restore_[a];
      const double held_b = same_function ? 0 : restore_[b];
      const int end_a = same_function ? end_[a] : restore_start_[a];
      const int end_b = same_function ? end_[b] : restore_start_[b];
      // Earliest end of a's residency (or restore) when a leads, against b's latest restore.
      const double earliest_a = release_[a] + restore_[a] + (same_function ? exec_[a] : 0);
      const double earliest_b = release_[b] + restore_[b] + (same_function ? exec_[b] : 0);
      const double latest_a = lp_.upper(end_a) + held_a;
      const double latest_b = lp_.upper(end_b) + held_b;
      if (latest_a <= release_[b]) {
        order = {true, false, true, -1};
        continue;
      }
      if (latest_b <= release_[a]) {
        order = {false, true, true, -1};
        continue;
      }
      order.first_possible = earliest_a <= lp_.upper(restore_start_[b]);
      order.second_possible = earliest_b <= lp_.upper(restore_start_[a]);
      std::vector<Literal> both = {{assign_[a][a], true}, {assign_[b][b], true}};
      AddSameGpuLiteral(a, b, both);
      const std::vector<Term> b_after_a = {{restore_start_[b], 1}, {end_a, -1}};
      const std::vector<Term> a_after_b = {{restore_start_[a], 1}, {end_b, -1}};
      if (order.first_possible && order.second_possible) {
        order.column = lp_.AddBinary(fmt::format("restore_order_{}_{}", a, b));
        std::vector<Literal> first = both, second = both;
        first.push_back({order.column, true});
        second.push_back({order.column, false});
        AddImplied(b_after_a, held_a, first);
        AddImplied(a_after_b, held_b, second);
      } else if (order.first_possible) {
        AddImplied(b_after_a, held_a, both);
      } else if (order.second_possible) {
        AddImplied(a_after_b, held_b, both);
      } else {
        ForbidSameGpuLeaders(a, b);
      }
    }
  }
}

void Formulation::AddMemory() {
  const double capacity =
      static_cast<double>(instance_.gpu.memory_bytes / kSliceBytes);  // whole slices
  std::set<std::size_t> functions(function_.begin(), function_.end());
  double all_functions = 0;
  for (const std::size_t f : functions) all_functions += static_cast<double>(instance_.Slices(f));
  if (all_functions <= capacity) return;  // at most one copy per function: memory always fits

  ended_.assign(n_, std::vector<int>(n_, -1));
  for (std::size_t later = 0; later < n_; ++later) {
    if (!can_lead_[later]) continue;
    std::vector<Term> held = {{assign_[later][later], slices_[later]}};
    double worst = slices_[later];
    for (std::size_t earlier = 0; earlier < n_; ++earlier) {
      if (earlier == later || !can_lead_[earlier] || function_[earlier] == function_[later]) {
        continue;
      }
      const bool lower_first = earlier < later;
      const PairOrder& order =
          lower_first ? restore_order_[earlier][later] : restore_order_[later][earlier];
      const bool earlier_can_be_first = lower_first ? order.first_possible : order.second_possible;
      if (!earlier_can_be_first) continue;
      if (lp_.upper(end_[earlier]) <= release_[later]) continue;  // always ended by then

      const int ended = lp_.AddBinary(fmt::format("ended_{}_{}", earlier, later));
      ended_[earlier][later] = ended;
      AddImplied({{restore_start_[later], 1}, {end_[earlier], -1}}, 0, {{ended, true}});

      // active >= 1 when: earlier restored first, not ended, same GPU, earlier leads.
      std::vector<Literal> literals = {{ended, false}, {assign_[earlier][earlier], true}};
      if (order.column >= 0) literals.push_back({order.column, lower_first});
      AddSameGpuLiteral(earlier, later, literals);
      const int active = lp_.AddColumn(0, 1, 0, false, fmt::format("active_{}_{}", earlier, later));
      std::vector<Term> row = {{active, 1}};
      double lower = 1 - static_cast<double>(literals.size());
      for (const Literal& literal : literals) {
        row.push_back({literal.column, literal.positive ? -1.0 : 1.0});
        if (!literal.positive) lower += 1;
      }
      lp_.AddRow(row, lower, kInfinity);
      held.push_back({active, slices_[earlier]});
      worst += slices_[earlier];
    }
    const double slack = worst - capacity;
    if (slack <= 0) continue;
    held[0].coefficient += slack;  // the row binds only when `later` leads a residency
    lp_.AddRow(held, -kInfinity, capacity + slack);
  }
}

Result<ScheduleStructure> Formulation::Structure(const double* values) const {
  auto on = [&](int column) { return column >= 0 && values[column] > 0.5; };
  ScheduleStructure structure;
  structure.exec_order.resize(gpus_);
  structure.restore_order.resize(gpus_);
  std::vector<int> residency_of_leader(n_, -1);
  std::vector<int> gpu_of(n_, -1);
  for (std::size_t p = 0; p < n_; ++p) {
    for (int g = 0; g < gpus_; ++g) {
      if (on(gpu_[p][g])) gpu_of[p] = g;
    }
    if (gpu_of[p] < 0) return Internal(fmt::format("exact: position {} has no GPU", p));
  }
  for (std::size_t q = 0; q < n_; ++q) {
    if (assign_[q][q] < 0 || !on(assign_[q][q])) continue;
    residency_of_leader[q] = static_cast<int>(structure.residencies.size());
    structure.residencies.push_back({function_[q], gpu_of[q], {}});
  }
  for (std::size_t r = 0; r < n_; ++r) {
    int leader = -1;
    for (std::size_t q = 0; q <= r; ++q) {
      if (on(assign_[q][r])) leader = static_cast<int>(q);
    }
    if (leader < 0 || residency_of_leader[leader] < 0) {
      return Internal(fmt::format("exact: position {} has no residency", r));
    }
    if (gpu_of[r] != gpu_of[leader]) {
      return Internal(fmt::format("exact: position {} runs off its residency's GPU", r));
    }
    structure.residencies[residency_of_leader[leader]].requests.push_back(request_at_[r]);
  }

  auto by_value = [&](const std::vector<int>& columns) {
    return [&values, &columns](std::size_t a, std::size_t b) {
      return std::pair(values[columns[a]], a) < std::pair(values[columns[b]], b);
    };
  };
  for (int g = 0; g < gpus_; ++g) {
    std::vector<std::size_t> runs, leaders;
    for (std::size_t p = 0; p < n_; ++p) {
      if (gpu_of[p] != g) continue;
      runs.push_back(p);
      if (residency_of_leader[p] >= 0) leaders.push_back(p);
    }
    std::sort(runs.begin(), runs.end(), by_value(start_));
    std::sort(leaders.begin(), leaders.end(), by_value(restore_start_));
    for (const std::size_t p : runs) structure.exec_order[g].push_back(request_at_[p]);
    for (const std::size_t q : leaders) {
      structure.restore_order[g].push_back(static_cast<std::size_t>(residency_of_leader[q]));
    }
    for (std::size_t i = 0; i < leaders.size(); ++i) {
      for (std::size_t j = i + 1; j < leaders.size(); ++j) {
        const std::size_t earlier = leaders[i], later = leaders[j];
        // Ended by choice (the MILP's binary) or by the time windows alone (no binary made).
        const bool by_windows = lp_.upper(end_[earlier]) <= release_[later];
        if (by_windows || (!ended_.empty() && on(ended_[earlier][later]))) {
          structure.ended_before.emplace_back(residency_of_leader[earlier],
                                              residency_of_leader[later]);
        }
      }
    }
  }
  return structure;
}

}  // namespace gshare::exact
