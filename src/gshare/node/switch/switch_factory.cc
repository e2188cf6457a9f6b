#include "gshare/node/switch/switch_factory.h"

#include <fmt/format.h>

#include <utility>

#include "gshare/node/switch/checkpoint_api_switch.h"

namespace gshare {

Status SwitchMechanismSupported(SwitchMechanism mechanism, const DeviceInfo& gpu) {
  if (mechanism == SwitchMechanism::kShim) {
    if (gpu.memory_exportable) return Status::Ok();
    return Unavailable(
        fmt::format("the CUDA shim needs GPU memory that exports to a function "
                    "process, which {} lacks: {}",
                    gpu.name, gpu.memory_export_note));
  }
  if (gpu.kind != DeviceKind::kCuda) {
    return Unavailable(
        "the process checkpoint API needs a CUDA GPU; this node's GPUs are emulated");
  }
  // Whether the driver has the API. Whether it allows it here (a sandbox runtime may not) shows
  // at the first lock, which the checkpoint switch reports as not supported.
  auto api = OpenProcessCheckpointApi();
  if (!api.ok())
    return Unavailable(fmt::format("the process checkpoint API: {}", api.status().message()));
  return Status::Ok();
}

Result<std::shared_ptr<SwitchDriver>> CreateSwitchDriver(SwitchContext context,
                                                         SwitchTarget target) {
  if (target.mechanism == SwitchMechanism::kCheckpoint) {
    if (target.checkpoint_api == nullptr || target.clock == nullptr || target.pid <= 0) {
      return InvalidArgument("the checkpoint mechanism needs the driver's API, a clock and a pid");
    }
    return std::shared_ptr<SwitchDriver>(CheckpointApiSwitch::Create(
        {context.loop, context.driver_calls != nullptr ? *context.driver_calls : context.copies,
         *target.checkpoint_api, *target.clock},
        std::move(target.name), static_cast<int>(target.pid)));
  }
  if (!target.channel.valid()) return InvalidArgument("the shim mechanism needs a control channel");
  return std::shared_ptr<SwitchDriver>(ChannelSwitch::Create(
      context, std::move(target.name), std::move(target.channel), std::move(target.on_failure)));
}

}  // namespace gshare
