// The NVIDIA driver's implementation of cuda_checkpoint.h, for gshare_device (which alone knows
// whether it was built). Everyone else calls OpenProcessCheckpointApi and
// ProbeProcessCheckpointApi.
#pragma once

#include <memory>
#include <string>

#include "gshare/device/cuda/cuda_checkpoint.h"

namespace gshare {

Result<std::unique_ptr<ProcessCheckpointApi>> OpenDriverProcessCheckpointApi();
std::string ProbeDriverProcessCheckpointApi();

}  // namespace gshare
