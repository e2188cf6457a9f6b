// Request: one invocation of a function, as the scheduler sees it.
#pragma once

#include <cstdint>

#include "gshare/common/units.h"

namespace gshare {

using FunctionId = std::uint32_t;  // a function of the registry; never reused in one run
using RequestId = std::uint64_t;   // index into the workload's request table
using GpuId = std::uint32_t;       // a GPU handed out by an Executor; never reused in one run

struct Request {
  RequestId id = 0;
  FunctionId function = 0;
  TimePoint arrival{};
  TimePoint deadline{};  // arrival + the function's SLO
  // The latest time its run may start (Clockwork's window): a request not started by then is
  // cancelled by the executor and never runs (Scheduler::OnRequestCancelled). The server sets it
  // to the deadline (a late answer is worth nothing to its client); a trace replayed in the
  // simulator has none unless asked.
  TimePoint latest_start = TimePoint::max();
};
// A request carries nothing about how long it will run: a policy learns execution times from
// runs that ended (sched/exec_estimator.h), as a live system must.

}  // namespace gshare
