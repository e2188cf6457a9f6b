#include "gshare/sched/exact/brute_force.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "gshare/common/clock.h"
#include "gshare/sched/exact/timing.h"

namespace gshare::exact {
namespace {

using Group = ResidencyGroup;  // gpu is filled in when a group is placed

// The best schedule of a set of residencies on one GPU, found by trying every execution order,
// every restore order and every minimal choice of residencies that end before a later restore.
class SingleGpuSearch {
 public:
  SingleGpuSearch(const ExactInstance& instance, std::vector<Group> groups)
      : instance_(instance), groups_(std::move(groups)) {
    structure_.residencies = groups_;
    for (Group& group : structure_.residencies) group.gpu = 0;
    structure_.exec_order.resize(1);
    structure_.restore_order.resize(1);
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      TimePoint first = TimePoint::max(), latest_restore_end = TimePoint::max();
      for (const std::size_t r : groups_[g].requests) {
        group_of_[r] = g;
        first = std::min(first, instance.requests[r].release);
        latest_restore_end =
            std::min(latest_restore_end, instance.requests[r].deadline - instance.ExecTime(r));
      }
      first_release_.push_back(first);
      latest_restore_end_.push_back(latest_restore_end);
      requests_.insert(requests_.end(), groups_[g].requests.begin(), groups_[g].requests.end());
    }
  }

  Result<std::optional<TimedSchedule>> Run() {
    std::vector<bool> used(requests_.size(), false);
    GSHARE_RETURN_IF_ERROR(ExecOrders(used, TimePoint{}));
    return std::move(best_);
  }

 private:
  // Depth-first over execution orders; a prefix is cut as soon as its earliest finish misses a
  // deadline (restores counted at their earliest).
  Status ExecOrders(std::vector<bool>& used, TimePoint free_at) {
    if (structure_.exec_order[0].size() == requests_.size()) {
      std::vector<bool> placed(groups_.size(), false);
      return RestoreOrders(placed, TimePoint{});
    }
    for (std::size_t i = 0; i < requests_.size(); ++i) {
      if (used[i]) continue;
      const std::size_t r = requests_[i];
      const std::size_t g = group_of_.at(r);
      const TimePoint restored = first_release_[g] + instance_.RestoreTime(groups_[g].function);
      const TimePoint start = std::max({free_at, instance_.requests[r].release, restored});
      const TimePoint end = start + instance_.ExecTime(r);
      if (end > instance_.requests[r].deadline) continue;
      used[i] = true;
      structure_.exec_order[0].push_back(r);
      GSHARE_RETURN_IF_ERROR(ExecOrders(used, end));
      structure_.exec_order[0].pop_back();
      used[i] = false;
    }
    return Status::Ok();
  }

  Status RestoreOrders(std::vector<bool>& placed, TimePoint engine_free_at) {
    std::vector<std::size_t>& order = structure_.restore_order[0];
    if (order.size() == groups_.size()) return EndedChoices(0);
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      if (placed[g]) continue;
      const TimePoint end =
          std::max(engine_free_at, first_release_[g]) + instance_.RestoreTime(groups_[g].function);
      if (end > latest_restore_end_[g]) continue;
      placed[g] = true;
      order.push_back(g);
      GSHARE_RETURN_IF_ERROR(RestoreOrders(placed, end));
      order.pop_back();
      placed[g] = false;
    }
    return Status::Ok();
  }

  // For the residency at restore position `index`, every minimal set of earlier residencies of
  // other functions whose end before its restore makes memory fit. Larger sets only add
  // constraints, so they never give a better schedule.
  Status EndedChoices(std::size_t index) {
    const std::vector<std::size_t>& order = structure_.restore_order[0];
    if (index == order.size()) return Evaluate();
    const std::size_t later = order[index];
    const std::vector<std::size_t> candidates = StillHeldCandidates(structure_, 0, index);
    std::uint64_t held = instance_.SliceBytes(groups_[later].function);
    for (const std::size_t earlier : candidates) {
      held += instance_.SliceBytes(groups_[earlier].function);
    }
    const std::uint64_t capacity = instance_.gpu.memory_bytes;
    if (held <= capacity) return EndedChoices(index + 1);
    const std::size_t before = structure_.ended_before.size();
    for (std::uint32_t mask = 1; mask < (1u << candidates.size()); ++mask) {
      std::uint64_t freed = 0;
      bool minimal = true;
      for (std::size_t c = 0; c < candidates.size(); ++c) {
        if (mask & (1u << c)) freed += instance_.SliceBytes(groups_[candidates[c]].function);
      }
      if (held - freed > capacity) continue;
      for (std::size_t c = 0; c < candidates.size() && minimal; ++c) {
        if ((mask & (1u << c)) &&
            held - freed + instance_.SliceBytes(groups_[candidates[c]].function) <= capacity) {
          minimal = false;
        }
      }
      if (!minimal) continue;
      for (std::size_t c = 0; c < candidates.size(); ++c) {
        if (mask & (1u << c)) structure_.ended_before.emplace_back(candidates[c], later);
      }
      GSHARE_RETURN_IF_ERROR(EndedChoices(index + 1));
      structure_.ended_before.resize(before);
    }
    return Status::Ok();
  }

  Status Evaluate() {
    GSHARE_ASSIGN_OR_RETURN(std::optional<TimedSchedule> timed, SolveTiming(instance_, structure_));
    if (timed && (!best_ || timed->objective < best_->objective)) best_ = std::move(timed);
    return Status::Ok();
  }

  const ExactInstance& instance_;
  std::vector<Group> groups_;
  std::vector<std::size_t> requests_;
  std::map<std::size_t, std::size_t> group_of_;
  std::vector<TimePoint> first_release_, latest_restore_end_;
  ScheduleStructure structure_;
  std::optional<TimedSchedule> best_;
};

// Every split of `items` into non-empty groups (restricted growth strings).
void SetPartitions(const std::vector<std::size_t>& items, std::size_t index,
                   std::vector<std::vector<std::size_t>>& blocks,
                   const std::function<void(const std::vector<std::vector<std::size_t>>&)>& emit) {
  if (index == items.size()) {
    emit(blocks);
    return;
  }
  for (std::size_t b = 0; b <= blocks.size(); ++b) {
    if (b == blocks.size()) blocks.emplace_back();
    blocks[b].push_back(items[index]);
    SetPartitions(items, index + 1, blocks, emit);
    blocks[b].pop_back();
    if (blocks[b].empty()) blocks.pop_back();
  }
}

class Enumerator {
 public:
  explicit Enumerator(const ExactInstance& instance) : instance_(instance) {
    by_function_.resize(instance.functions.size());
    for (std::size_t r = 0; r < instance.requests.size(); ++r) {
      by_function_[instance.requests[r].function].push_back(r);
    }
  }

  Status Run() {
    std::vector<Group> groups;
    return Partitions(0, groups);
  }

  bool found() const { return best_objective_ < std::numeric_limits<double>::infinity(); }
  const ExactSchedule& best() const { return best_schedule_; }

 private:
  Status Partitions(std::size_t function, std::vector<Group>& groups) {
    if (function == by_function_.size()) {
      std::vector<int> gpu_of(groups.size(), 0);
      return Placements(groups, 0, 0, gpu_of);
    }
    if (by_function_[function].empty()) return Partitions(function + 1, groups);
    Status status = Status::Ok();
    std::vector<std::vector<std::size_t>> blocks;
    SetPartitions(by_function_[function], 0, blocks,
                  [&](const std::vector<std::vector<std::size_t>>& split) {
                    if (!status.ok()) return;
                    const std::size_t before = groups.size();
                    for (const auto& block : split) groups.push_back({function, 0, block});
                    status = Partitions(function + 1, groups);
                    groups.resize(before);
                  });
    return status;
  }

  // GPUs are identical: residency i may use GPU k only if GPUs 0..k-1 are already in use.
  Status Placements(const std::vector<Group>& groups, std::size_t index, int gpus_used,
                    std::vector<int>& gpu_of) {
    if (index == groups.size()) return Score(groups, gpu_of);
    for (int g = 0; g < std::min(gpus_used + 1, instance_.num_gpus); ++g) {
      gpu_of[index] = g;
      GSHARE_RETURN_IF_ERROR(Placements(groups, index + 1, std::max(gpus_used, g + 1), gpu_of));
    }
    return Status::Ok();
  }

  Status Score(const std::vector<Group>& groups, const std::vector<int>& gpu_of) {
    double total = 0;
    std::vector<const TimedSchedule*> parts;
    for (int g = 0; g < instance_.num_gpus; ++g) {
      std::vector<Group> mine;
      for (std::size_t i = 0; i < groups.size(); ++i) {
        if (gpu_of[i] == g) mine.push_back(groups[i]);
      }
      if (mine.empty()) continue;
      std::sort(mine.begin(), mine.end(),
                [](const Group& a, const Group& b) { return a.requests < b.requests; });
      std::vector<std::vector<std::size_t>> key;
      for (const Group& group : mine) key.push_back(group.requests);
      auto found = memo_.find(key);
      if (found == memo_.end()) {
        SingleGpuSearch search(instance_, mine);
        GSHARE_ASSIGN_OR_RETURN(std::optional<TimedSchedule> best, search.Run());
        found = memo_.emplace(key, std::move(best)).first;
      }
      if (!found->second) return Status::Ok();  // this GPU's share cannot be scheduled
      total += found->second->objective;
      parts.push_back(&*found->second);
    }
    if (total >= best_objective_) return Status::Ok();
    best_objective_ = total;
    best_schedule_ = ExactSchedule{};
    best_schedule_.executions.resize(instance_.requests.size());
    for (std::size_t g = 0; g < parts.size(); ++g) {
      const std::size_t offset = best_schedule_.residencies.size();
      for (Residency residency : parts[g]->schedule.residencies) {
        residency.gpu = static_cast<int>(g);
        best_schedule_.residencies.push_back(residency);
      }
      // A part sets executions only for its own requests; the others keep end == zero, which
      // a set execution never has (execution times are positive).
      const auto& executions = parts[g]->schedule.executions;
      for (std::size_t r = 0; r < executions.size(); ++r) {
        if (executions[r].end == TimePoint{}) continue;
        best_schedule_.executions[r] = executions[r];
        best_schedule_.executions[r].residency += offset;
      }
    }
    return Status::Ok();
  }

  const ExactInstance& instance_;
  std::vector<std::vector<std::size_t>> by_function_;
  std::map<std::vector<std::vector<std::size_t>>, std::optional<TimedSchedule>> memo_;
  double best_objective_ = std::numeric_limits<double>::infinity();
  ExactSchedule best_schedule_;
};

}  // namespace

Result<ExactSolution> SolveBruteForce(const ExactInstance& instance,
                                      const BruteForceOptions& options) {
  GSHARE_RETURN_IF_ERROR(ValidateInstance(instance));
  if (instance.requests.size() > options.max_requests) {
    return InvalidArgument(fmt::format("brute force: {} requests, at most {} allowed",
                                       instance.requests.size(), options.max_requests));
  }
  const SteadyClock clock;
  Enumerator enumerator(instance);
  GSHARE_RETURN_IF_ERROR(enumerator.Run());
  ExactSolution solution;
  if (enumerator.found()) {
    Status valid = ValidateSchedule(instance, enumerator.best());
    if (!valid.ok()) return Internal(valid.WithContext("brute force: best schedule").message());
    solution.status = SolveStatus::kOptimal;
    solution.schedule = enumerator.best();
    solution.objective = ScheduleObjective(instance, enumerator.best());
    solution.solver_objective = solution.objective;
    solution.best_bound = solution.objective;
  } else {
    solution.status = SolveStatus::kInfeasible;
  }
  solution.solve_time = clock.Now().time_since_epoch();
  return solution;
}

}  // namespace gshare::exact
