#include "gshare/sched/exact/schedule.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace gshare::exact {
namespace {

double Ms(TimePoint t) { return ToMilliseconds(t.time_since_epoch()); }

Status Violation(std::string_view constraint, std::string detail) {
  return FailedPrecondition(fmt::format("{}: {}", constraint, detail));
}

Status CheckShape(const ExactInstance& instance, const ExactSchedule& schedule) {
  if (schedule.executions.size() != instance.requests.size()) {
    return Violation("shape", fmt::format("{} executions for {} requests",
                                          schedule.executions.size(), instance.requests.size()));
  }
  for (std::size_t q = 0; q < schedule.residencies.size(); ++q) {
    const Residency& residency = schedule.residencies[q];
    if (residency.function >= instance.functions.size()) {
      return Violation(
          "shape", fmt::format("residency {}: function {} out of range", q, residency.function));
    }
    if (residency.gpu < 0 || residency.gpu >= instance.num_gpus) {
      return Violation("shape", fmt::format("residency {}: GPU {} out of range", q, residency.gpu));
    }
  }
  for (std::size_t r = 0; r < schedule.executions.size(); ++r) {
    const std::size_t q = schedule.executions[r].residency;
    if (q >= schedule.residencies.size()) {
      return Violation("shape", fmt::format("request {}: residency {} out of range", r, q));
    }
    if (schedule.residencies[q].function != instance.requests[r].function) {
      return Violation("shape", fmt::format("request {} of function {} is served by residency {} "
                                            "of function {}",
                                            r, instance.requests[r].function, q,
                                            schedule.residencies[q].function));
    }
  }
  return Status::Ok();
}

Status CheckRequests(const ExactInstance& instance, const ExactSchedule& schedule) {
  for (std::size_t r = 0; r < schedule.executions.size(); ++r) {
    const Execution& execution = schedule.executions[r];
    const ExactRequest& request = instance.requests[r];
    const Residency& residency = schedule.residencies[execution.residency];
    if (execution.end - execution.start != instance.ExecTime(r)) {
      return Violation("duration", fmt::format("request {} runs {:.6f} ms, its execution time is "
                                               "{:.6f} ms",
                                               r, ToMilliseconds(execution.end - execution.start),
                                               ToMilliseconds(instance.ExecTime(r))));
    }
    if (execution.start < request.release) {
      return Violation("release", fmt::format("request {} starts at {:.6f} ms before its release "
                                              "at {:.6f} ms",
                                              r, Ms(execution.start), Ms(request.release)));
    }
    if (execution.end > request.deadline) {
      return Violation("deadline", fmt::format("request {} ends at {:.6f} ms after its deadline "
                                               "at {:.6f} ms",
                                               r, Ms(execution.end), Ms(request.deadline)));
    }
    const TimePoint restored = residency.restore_start + instance.RestoreTime(residency.function);
    if (execution.start < restored || execution.end > residency.end) {
      return Violation("restore-before",
                       fmt::format("request {} runs [{:.6f}, {:.6f}] ms outside residency {} "
                                   "(restored at {:.6f} ms, ends at {:.6f} ms)",
                                   r, Ms(execution.start), Ms(execution.end), execution.residency,
                                   Ms(restored), Ms(residency.end)));
    }
  }
  return Status::Ok();
}

Status CheckResidencies(const ExactInstance& instance, const ExactSchedule& schedule) {
  std::vector<TimePoint> earliest_release(schedule.residencies.size(), TimePoint::max());
  for (std::size_t r = 0; r < schedule.executions.size(); ++r) {
    TimePoint& earliest = earliest_release[schedule.executions[r].residency];
    earliest = std::min(earliest, instance.requests[r].release);
  }
  for (std::size_t q = 0; q < schedule.residencies.size(); ++q) {
    const Residency& residency = schedule.residencies[q];
    if (residency.restore_start < TimePoint{}) {
      return Violation("prefetch", fmt::format("residency {} starts before time zero", q));
    }
    if (residency.restore_start < earliest_release[q]) {
      if (earliest_release[q] != TimePoint::max()) {
        return Violation("prefetch",
                         fmt::format("residency {} restores at {:.6f} ms before the "
                                     "first release it serves at {:.6f} ms",
                                     q, Ms(residency.restore_start), Ms(earliest_release[q])));
      }
    }
    const TimePoint restored = residency.restore_start + instance.RestoreTime(residency.function);
    if (residency.end < restored) {
      return Violation("restore-before", fmt::format("residency {} ends at {:.6f} ms before its "
                                                     "restore finishes at {:.6f} ms",
                                                     q, Ms(residency.end), Ms(restored)));
    }
  }
  return Status::Ok();
}

// Intervals [begin, end) with an owner index, checked pairwise-disjoint after sorting.
struct Interval {
  TimePoint begin;
  TimePoint end;
  std::size_t owner;
};

Status CheckDisjoint(std::vector<Interval> intervals, std::string_view constraint,
                     std::string_view what, int gpu) {
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) {
    return std::pair(a.begin, a.owner) < std::pair(b.begin, b.owner);
  });
  for (std::size_t i = 1; i < intervals.size(); ++i) {
    if (intervals[i].begin < intervals[i - 1].end) {
      return Violation(constraint, fmt::format("{} {} and {} overlap on GPU {} at {:.6f} ms", what,
                                               intervals[i - 1].owner, intervals[i].owner, gpu,
                                               Ms(intervals[i].begin)));
    }
  }
  return Status::Ok();
}

Status CheckGpu(const ExactInstance& instance, const ExactSchedule& schedule, int gpu) {
  std::vector<Interval> runs;
  for (std::size_t r = 0; r < schedule.executions.size(); ++r) {
    const Execution& execution = schedule.executions[r];
    if (schedule.residencies[execution.residency].gpu == gpu) {
      runs.push_back({execution.start, execution.end, r});
    }
  }
  GSHARE_RETURN_IF_ERROR(CheckDisjoint(std::move(runs), "gpu-exclusive", "requests", gpu));

  std::vector<Interval> copies;
  std::vector<std::vector<Interval>> held_by_function(instance.functions.size());
  for (std::size_t q = 0; q < schedule.residencies.size(); ++q) {
    const Residency& residency = schedule.residencies[q];
    if (residency.gpu != gpu) continue;
    copies.push_back({residency.restore_start,
                      residency.restore_start + instance.RestoreTime(residency.function), q});
    held_by_function[residency.function].push_back({residency.restore_start, residency.end, q});
  }
  GSHARE_RETURN_IF_ERROR(CheckDisjoint(copies, "copy-engine", "restores of residencies", gpu));
  for (auto& held : held_by_function) {
    GSHARE_RETURN_IF_ERROR(CheckDisjoint(std::move(held), "single-copy", "residencies", gpu));
  }

  // Memory is piecewise constant and only grows at restore starts; releases at the same instant
  // come first because intervals are half-open.
  struct Event {
    TimePoint at;
    bool acquire;
    std::uint64_t bytes;
  };
  std::vector<Event> events;
  for (const Interval& copy : copies) {
    const Residency& residency = schedule.residencies[copy.owner];
    const std::uint64_t bytes = instance.SliceBytes(residency.function);
    events.push_back({residency.restore_start, true, bytes});
    events.push_back({residency.end, false, bytes});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.at != b.at ? a.at < b.at : (!a.acquire && b.acquire);
  });
  std::uint64_t held_bytes = 0;
  for (const Event& event : events) {
    if (!event.acquire) {
      held_bytes -= event.bytes;
      continue;
    }
    held_bytes += event.bytes;
    if (held_bytes > instance.gpu.memory_bytes) {
      return Violation("memory", fmt::format("GPU {} holds {} at {:.6f} ms, more than its {}", gpu,
                                             FormatBytes(held_bytes), Ms(event.at),
                                             FormatBytes(instance.gpu.memory_bytes)));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateSchedule(const ExactInstance& instance, const ExactSchedule& schedule) {
  GSHARE_RETURN_IF_ERROR(ValidateInstance(instance));
  GSHARE_RETURN_IF_ERROR(CheckShape(instance, schedule));
  GSHARE_RETURN_IF_ERROR(CheckRequests(instance, schedule));
  GSHARE_RETURN_IF_ERROR(CheckResidencies(instance, schedule));
  for (int gpu = 0; gpu < instance.num_gpus; ++gpu) {
    GSHARE_RETURN_IF_ERROR(CheckGpu(instance, schedule, gpu));
  }
  return Status::Ok();
}

int PeakGpus(const ExactSchedule& schedule) {
  // Each GPU's busy periods (overlapping or touching residencies merged), then a sweep over them.
  std::map<int, std::vector<std::pair<TimePoint, TimePoint>>> held;
  for (const Residency& residency : schedule.residencies) {
    held[residency.gpu].emplace_back(residency.restore_start, residency.end);
  }
  std::vector<std::pair<TimePoint, int>> changes;  // (+1 busy period starts, -1 ends)
  for (auto& [gpu, intervals] : held) {
    std::sort(intervals.begin(), intervals.end());
    TimePoint begin = intervals.front().first;
    TimePoint end = intervals.front().second;
    for (const auto& [b, e] : intervals) {
      if (b > end) {
        changes.emplace_back(begin, +1);
        changes.emplace_back(end, -1);
        begin = b;
      }
      end = std::max(end, e);
    }
    changes.emplace_back(begin, +1);
    changes.emplace_back(end, -1);
  }
  std::sort(changes.begin(), changes.end());  // at one instant, ends (-1) before starts
  int busy = 0, peak = 0;
  for (const auto& [at, delta] : changes) peak = std::max(peak, busy += delta);
  return peak;
}

double SliceSeconds(std::uint64_t slices, Duration held) {
  constexpr double kSliceGiB = static_cast<double>(kSliceBytes) / static_cast<double>(kGiB);
  return static_cast<double>(slices) * kSliceGiB * ToSeconds(held);
}

double ScheduleObjective(const ExactInstance& instance, const ExactSchedule& schedule) {
  double total = 0;
  for (const Residency& residency : schedule.residencies) {
    total +=
        SliceSeconds(instance.Slices(residency.function), residency.end - residency.restore_start);
  }
  return total;
}

}  // namespace gshare::exact
