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

// Nearest-rank percentile (0 < p <= 100) of sorted values; 0 when empty.
double Percentile(const std::vector<float>& sorted, double p);

}  // namespace gshare
