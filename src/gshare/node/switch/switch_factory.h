// Choosing a switch driver for a function instance: by mechanism, on the node's kind of GPU.
//
//   shim        the node's slice memory is the function's device memory, sent over the control
//               channel (fn/control_channel.h): a memfd segment on an emulated GPU, which the
//               function library maps; on a CUDA GPU a virtual-memory allocation exported as a
//               file descriptor, which the allocator shim (libgshare-cuda-shim.so, preloaded into
//               an unmodified CUDA program) maps. Bytes move through the node's restore engine and
//               snapshot store. Fast swap applies only to the function library's frozen images:
//               the shim reports every image written. ChannelSwitch drives both.
//   checkpoint  the driver's process checkpoint API on the function's pid (CUDA only); the driver
//               keeps the bytes in the process's host memory.
//
// Threading: CreateSwitchDriver on the event loop of `context`; the checkpoint switch runs the
// driver's blocking calls on `context.driver_calls` (on `context.copies` where that is null).
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "gshare/common/clock.h"
#include "gshare/common/status.h"
#include "gshare/device/cuda/cuda_checkpoint.h"
#include "gshare/device/device.h"
#include "gshare/fn/control_channel.h"
#include "gshare/model/switch_mechanism.h"
#include "gshare/node/switch/channel_switch.h"
#include "gshare/node/switch/switch_driver.h"

namespace gshare {

// The library a CUDA function process preloads for the shim mechanism; it lies beside gshare.
inline constexpr const char* kCudaShimLibrary = "libgshare-cuda-shim.so";

// Whether `mechanism` can switch functions on `gpu` here; Unavailable naming the reason
// otherwise (the checkpoint API is probed: ProbeProcessCheckpointApi).
Status SwitchMechanismSupported(SwitchMechanism mechanism, const DeviceInfo& gpu);

struct SwitchTarget {
  SwitchMechanism mechanism = SwitchMechanism::kShim;
  std::string name;            // unique per instance: the snapshot's id (shim), for messages
  std::int64_t pid = 0;        // the function's process (checkpoint)
  fn::ControlChannel channel;  // the node's end of the control channel (shim)
  // checkpoint: the driver's API and the clock that times its calls; both outlive the switch.
  ProcessCheckpointApi* checkpoint_api = nullptr;
  const Clock* clock = nullptr;
  // Called once, on the loop, when the switch fails outside an operation (the shim's function
  // died or broke the protocol); may be empty. The checkpoint switch never fails that way.
  std::function<void(Status)> on_failure;
};

Result<std::shared_ptr<SwitchDriver>> CreateSwitchDriver(SwitchContext context,
                                                         SwitchTarget target);

// How a node makes its instances' switches (the live node's is CreateSwitchDriver; a test may
// give its own).
using SwitchFactory =
    std::function<Result<std::shared_ptr<SwitchDriver>>(SwitchContext, SwitchTarget)>;

}  // namespace gshare
