// SimulateComputeSharing: the simulator's model of one GPU's compute engine, asked directly.
//
// The runs are given to a SimulatedExecutor on one GPU (every function already resident, so no
// copy delays them) at their arrival times, and the completion times it gives are returned: the
// time slicing of sim_executor.h (round-robin exclusive quanta, a quantum never cut short by a
// newcomer, a run alone runs to completion), with nothing else in the way. Used to check the
// live node's ComputeArbiter against the model, and by `gshare bench timeslice` to predict the
// latency of functions sharing an emulated GPU.
#pragma once

#include <span>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/units.h"

namespace gshare {

struct ComputeRun {
  Duration arrival{};  // since the start of the scenario
  Duration compute{};  // the run's compute time alone on the GPU; positive
};

// Completion time of each run (same order), since the start of the scenario. InvalidArgument
// for a negative arrival or a compute time that is not positive.
Result<std::vector<Duration>> SimulateComputeSharing(std::span<const ComputeRun> runs,
                                                     Duration quantum);

}  // namespace gshare
