// A sweep: one workload simulated under many (policy, knob setting) points, on a few threads.
//
// Every run builds its own executor and scheduler over the shared, read-only workload (the
// simulator and the policies keep no global state), and a run is deterministic, so the figures do
// not depend on the number of threads or on the order the runs finish in.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/sim/knob_grid.h"
#include "gshare/sim/pareto.h"
#include "gshare/sim/simulator.h"
#include "gshare/sim/workload/workload.h"

namespace gshare {

struct SweepPoint {
  std::string policy;
  KnobSetting knobs;
};

struct SweepOptions {
  SimulationOptions base;  // every run starts from these, then sets its knobs (no progress)
  int jobs = 1;            // threads (at least one)
  // Called after each run that succeeds with its index in the points, its figures and its wall
  // time in seconds; one call at a time, in the order the runs finish. May be empty.
  std::function<void(std::size_t, const RunFigures&, double)> done;
};

// "keep_alive=1m concurrency_target=0.5", or "(defaults)" for no knobs: for messages.
std::string DescribeKnobs(const KnobSetting& knobs);

// Simulates every point of `points` on `workload` on up to options.jobs threads. Returns one
// RunFigures per point, in `points` order. Errors: that of the first point (in `points` order)
// whose knobs or run fail, with the policy and knobs as context; after a failure no new run
// starts.
Result<std::vector<RunFigures>> RunSweep(const Workload& workload,
                                         const std::vector<SweepPoint>& points,
                                         const SweepOptions& options);

}  // namespace gshare
