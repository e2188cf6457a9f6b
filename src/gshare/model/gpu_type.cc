#include "gshare/model/gpu_type.h"

#include <cmath>

namespace gshare {

double GpuType::BatchScale(int batch) const {
  if (batch <= 1) return 1.0;
  if (batch_scaling.empty()) return static_cast<double>(batch);
  const double position = std::log2(static_cast<double>(batch));
  const auto lower = static_cast<std::size_t>(std::floor(position));
  if (lower + 1 >= batch_scaling.size()) {
    // Beyond the table: grow linearly from the last entry.
    const std::size_t last = batch_scaling.size() - 1;
    const double last_batch = std::ldexp(1.0, static_cast<int>(last));
    return batch_scaling[last] * static_cast<double>(batch) / last_batch;
  }
  const double lo_batch = std::ldexp(1.0, static_cast<int>(lower));
  const double fraction = (static_cast<double>(batch) - lo_batch) / lo_batch;
  return batch_scaling[lower] + fraction * (batch_scaling[lower + 1] - batch_scaling[lower]);
}

}  // namespace gshare
