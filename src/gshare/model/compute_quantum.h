// The time slice in which runs sharing a GPU's compute engine take turns (the simulator's model
// of a GPU's time slicing, the live node's ComputeArbiter). One default for the whole program:
// the policies carry the value in use (PolicyOptions::quantum) and hand it to the executor that
// runs them, so a policy never predicts with one quantum while its GPUs slice with another.
#pragma once

#include "gshare/common/units.h"

namespace gshare {

inline constexpr Duration kDefaultComputeQuantum = std::chrono::milliseconds(20);

}  // namespace gshare
