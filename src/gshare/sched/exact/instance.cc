#include "gshare/sched/exact/instance.h"

#include <fmt/format.h>

namespace gshare::exact {

ExactGpu ExactGpuFrom(const GpuType& type) {
  return ExactGpu{type.memory_bytes, type.h2d_bytes_per_second, type.restore_overhead};
}

std::uint64_t ExactInstance::SliceBytes(std::size_t f) const {
  const std::uint64_t bytes = functions[f].gpu_memory_bytes;
  const std::uint64_t slices = (bytes + kSliceBytes - 1) / kSliceBytes;
  return (slices == 0 ? 1 : slices) * kSliceBytes;
}

Duration ExactInstance::RestoreTime(std::size_t f) const {
  return gpu.restore_overhead + TransferTime(functions[f].model_bytes, gpu.h2d_bytes_per_second);
}

Status ValidateInstance(const ExactInstance& instance) {
  if (instance.num_gpus < 1) return InvalidArgument("instance: num_gpus must be at least 1");
  if (instance.gpu.h2d_bytes_per_second <= 0) {
    return InvalidArgument("instance: GPU bandwidth must be positive");
  }
  if (instance.gpu.restore_overhead < Duration::zero()) {
    return InvalidArgument("instance: restore overhead must not be negative");
  }
  for (std::size_t f = 0; f < instance.functions.size(); ++f) {
    const ExactFunction& function = instance.functions[f];
    if (function.exec <= Duration::zero()) {
      return InvalidArgument(
          fmt::format("instance: function {} ({}): execution time must be "
                      "positive",
                      f, function.name));
    }
    if (function.model_bytes > function.gpu_memory_bytes) {
      return InvalidArgument(fmt::format(
          "instance: function {} ({}): model bytes exceed GPU memory bytes", f, function.name));
    }
    if (instance.RestoreTime(f) <= Duration::zero()) {
      return InvalidArgument(fmt::format(
          "instance: function {} ({}): restore time must be positive", f, function.name));
    }
  }
  for (std::size_t r = 0; r < instance.requests.size(); ++r) {
    const ExactRequest& request = instance.requests[r];
    if (request.function >= instance.functions.size()) {
      return InvalidArgument(
          fmt::format("instance: request {}: function {} out of range", r, request.function));
    }
    if (request.release < TimePoint{} || request.deadline < request.release) {
      return InvalidArgument(fmt::format("instance: request {}: need 0 <= release <= deadline", r));
    }
  }
  return Status::Ok();
}

}  // namespace gshare::exact
