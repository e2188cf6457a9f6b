// Simulator: replays a workload under one policy and reports what happened.
//
// The same scheduler code that runs on a live node runs here against SimulatedExecutor. Runs are
// deterministic: the same workload, policy and options give the same report, byte for byte.
#pragma once

#include <functional>
#include <string_view>

#include "gshare/common/status.h"
#include "gshare/sched/policy_options.h"
#include "gshare/sim/policy_report.h"
#include "gshare/sim/sim_executor.h"
#include "gshare/sim/workload/workload.h"

namespace gshare {

struct SimulationOptions {
  PolicyOptions policy;  // its quantum is the executor's (executor.quantum)
  SimulatedExecutor::Options executor;
  // Called now and then with (simulated seconds, completed requests); may be empty.
  std::function<void(double, std::uint64_t)> progress;
};

// Runs `policy` (a name known to MakePolicy) over `workload`. Errors: unknown policy; a policy
// that breaks an executor precondition or leaves requests unserved (Internal).
Result<PolicyReport> Simulate(const Workload& workload, std::string_view policy,
                              const SimulationOptions& options);

// A policy's report from the Meter of its run: the one accounting of simulated and live runs.
// `totals` is meter.Totals(the horizon); the window starts at `start`; `functions` by id.
PolicyReport MakePolicyReport(std::string policy, const Meter& meter, MeterTotals totals,
                              std::span<const ResolvedFunction> functions, const GpuType& gpu,
                              TimePoint start, std::uint64_t events);

// The trace's compute in GPU-seconds: the sum over the requests that arrive at or after `start`
// of their function's execution time at its most efficient batch size b divided by b (the least
// GPU time a request can cost, so no policy can raise it by batching worse), scaled as the
// executor scales a run by the trace's duration and the execution noise of the request.
// Utilisation is this over a policy's GPU-seconds.
double ComputeGpuSeconds(const Workload& workload, TimePoint start);

// Nearest-rank percentile (0 < p <= 100) of sorted values; 0 when empty.
double Percentile(const std::vector<float>& sorted, double p);

}  // namespace gshare
