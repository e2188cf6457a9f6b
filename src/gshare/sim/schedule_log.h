// ScheduleLog: what a simulated policy did, action by action, for scoring a schedule offline
// (the optimality-gap study scores it with the exact solver's objective and validator).
#pragma once

#include <vector>

#include "gshare/common/units.h"
#include "gshare/model/request.h"

namespace gshare {

struct ScheduleLog {
  struct Residency {
    GpuId gpu = 0;
    FunctionId function = 0;
    TimePoint reserved{};                   // Restore called: memory reserved, copy queued
    TimePoint ready{};                      // restore done
    TimePoint released = TimePoint::max();  // memory freed (max: still held at the end)
  };
  struct Run {
    GpuId gpu = 0;
    FunctionId function = 0;
    std::size_t residency = 0;  // index into residencies
    std::vector<RequestId> batch;
    TimePoint start{};  // Run called
    TimePoint end{};    // completion
  };
  std::vector<Residency> residencies;
  std::vector<Run> runs;
};

}  // namespace gshare
