// The parts of cuda_checkpoint.h that need no driver, and the opener where CUDA was not built.
// Part of gshare_device, which alone knows whether the CUDA backend was built (GSHARE_HAVE_CUDA).
#include <fmt/format.h>

#include "gshare/device/cuda/cuda_checkpoint.h"

#if defined(GSHARE_HAVE_CUDA)
#include "gshare/device/cuda/cuda_checkpoint_driver.h"
#endif

namespace gshare {
std::string_view ProcessCheckpointStateName(ProcessCheckpointState state) {
  switch (state) {
    case ProcessCheckpointState::kRunning:
      return "running";
    case ProcessCheckpointState::kLocked:
      return "locked";
    case ProcessCheckpointState::kCheckpointed:
      return "checkpointed";
    case ProcessCheckpointState::kFailed:
      return "failed";
  }
  return "unknown";
}

Result<std::unique_ptr<ProcessCheckpointApi>> OpenProcessCheckpointApi() {
#if defined(GSHARE_HAVE_CUDA)
  return OpenDriverProcessCheckpointApi();
#else
  return Unavailable("the process checkpoint API is not available: gshare was built without CUDA");
#endif
}

std::string ProbeProcessCheckpointApi() {
#if defined(GSHARE_HAVE_CUDA)
  return ProbeDriverProcessCheckpointApi();
#else
  return "unsupported: gshare was built without CUDA";
#endif
}

}  // namespace gshare
