#include "gshare/sched/exact/best_fit.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include <fmt/format.h>

namespace gshare::exact {
namespace {

// What one GPU has been given so far.
struct GpuPlan {
  TimePoint compute_free{};              // end of the last run bound to it
  TimePoint copy_free{};                 // end of the last restore bound to it
  std::vector<std::size_t> residencies;  // indices into the schedule's residencies
};

// One way to place a request on one GPU.
struct Placement {
  int gpu = 0;
  std::optional<std::size_t> join;  // the residency it joins; none: a new one
  TimePoint restore_start{};        // of the new residency
  TimePoint start{};
  TimePoint end{};
  std::uint64_t free_bytes = 0;  // free memory on the GPU at the release
};

class BestFit {
 public:
  explicit BestFit(const ExactInstance& instance)
      : instance_(instance), gpus_(static_cast<std::size_t>(instance.num_gpus)) {
    schedule_.executions.resize(instance.requests.size());
  }

  ExactSchedule Run() {
    std::vector<std::size_t> order(instance_.requests.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return instance_.requests[a].release < instance_.requests[b].release;
    });
    for (std::size_t r : order) Bind(r);
    return std::move(schedule_);
  }

 private:
  // Memory held on `gpu` at instant t by its residencies other than `except`.
  std::uint64_t HeldAt(int gpu, TimePoint t, std::optional<std::size_t> except) const {
    std::uint64_t bytes = 0;
    for (std::size_t q : gpus_[gpu].residencies) {
      const Residency& residency = schedule_.residencies[q];
      if (q != except && residency.restore_start <= t && t < residency.end) {
        bytes += instance_.SliceBytes(residency.function);
      }
    }
    return bytes;
  }

  // The most memory held on `gpu` during [from, to) by its residencies other than `except`. It
  // only grows at restore starts, so it is checked at `from` and at each restore start inside.
  std::uint64_t MaxHeld(int gpu, TimePoint from, TimePoint to,
                        std::optional<std::size_t> except) const {
    std::uint64_t most = HeldAt(gpu, from, except);
    for (std::size_t q : gpus_[gpu].residencies) {
      const TimePoint t = schedule_.residencies[q].restore_start;
      if (from < t && t < to) most = std::max(most, HeldAt(gpu, t, except));
    }
    return most;
  }

  // The placement of request r on `gpu` (there always is one: the GPU empties eventually).
  Placement Place(std::size_t r, int gpu) const {
    const ExactRequest& request = instance_.requests[r];
    const std::size_t f = request.function;
    const GpuPlan& plan = gpus_[gpu];
    const std::uint64_t memory = instance_.gpu.memory_bytes;
    const std::uint64_t slice = instance_.SliceBytes(f);
    Placement p;
    p.gpu = gpu;
    p.free_bytes = memory - HeldAt(gpu, request.release, std::nullopt);

    // The residency of f on this GPU not yet released at the release, if any (one at most).
    std::optional<std::size_t> held;
    for (std::size_t q : plan.residencies) {
      const Residency& residency = schedule_.residencies[q];
      if (residency.function == f && residency.end > request.release) held = q;
    }
    if (held) {
      const Residency& residency = schedule_.residencies[*held];
      p.start = std::max(
          {request.release, plan.compute_free, residency.restore_start + instance_.RestoreTime(f)});
      p.end = p.start + instance_.ExecTime(r);
      if (MaxHeld(gpu, residency.end, p.end, held) + slice <= memory) {
        p.join = held;
        return p;
      }
    }

    // A new residency: at the first time from `earliest` on (then at each release after it)
    // where the slice fits from its restore until the run ends.
    const TimePoint earliest =
        std::max({request.release, plan.copy_free,
                  held ? schedule_.residencies[*held].end : TimePoint::min()});
    std::vector<TimePoint> candidates = {earliest};
    for (std::size_t q : plan.residencies) {
      if (schedule_.residencies[q].end > earliest) {
        candidates.push_back(schedule_.residencies[q].end);
      }
    }
    std::sort(candidates.begin(), candidates.end());
    for (TimePoint t : candidates) {
      p.restore_start = t;
      p.start = std::max(t + instance_.RestoreTime(f), plan.compute_free);
      p.end = p.start + instance_.ExecTime(r);
      if (MaxHeld(gpu, t, p.end, std::nullopt) + slice <= memory) return p;
    }
    return p;  // not reached: after the last release the GPU is empty, and the slice fits
  }

  void Bind(std::size_t r) {
    const ExactRequest& request = instance_.requests[r];
    std::optional<Placement> best;   // meets the deadline, least free memory
    std::optional<Placement> first;  // ends first
    for (int g = 0; g < instance_.num_gpus; ++g) {
      const Placement p = Place(r, g);
      if (p.end <= request.deadline && (!best || p.free_bytes < best->free_bytes)) best = p;
      if (!first || p.end < first->end) first = p;
    }
    const Placement& chosen = best ? *best : *first;
    GpuPlan& plan = gpus_[chosen.gpu];
    std::size_t q;
    if (chosen.join) {
      q = *chosen.join;
    } else {
      q = schedule_.residencies.size();
      schedule_.residencies.push_back(
          Residency{request.function, chosen.gpu, chosen.restore_start, chosen.end});
      plan.residencies.push_back(q);
      plan.copy_free = chosen.restore_start + instance_.RestoreTime(request.function);
    }
    schedule_.residencies[q].end = chosen.end;  // released after its last run
    schedule_.executions[r] = Execution{q, chosen.start, chosen.end};
    plan.compute_free = chosen.end;
  }

  const ExactInstance& instance_;
  std::vector<GpuPlan> gpus_;
  ExactSchedule schedule_;
};

}  // namespace

Result<ExactSchedule> ScheduleBestFit(const ExactInstance& instance) {
  GSHARE_RETURN_IF_ERROR(ValidateInstance(instance));
  for (std::size_t f = 0; f < instance.functions.size(); ++f) {
    if (instance.SliceBytes(f) > instance.gpu.memory_bytes) {
      return InvalidArgument(
          fmt::format("function '{}' needs {} of slices; a GPU has {}", instance.functions[f].name,
                      FormatBytes(instance.SliceBytes(f)), FormatBytes(instance.gpu.memory_bytes)));
    }
  }
  return BestFit(instance).Run();
}

}  // namespace gshare::exact
