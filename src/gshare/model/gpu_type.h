// GpuType: what a kind of GPU offers to the scheduler, and what it costs.
//
// Value type. A catalog holds the known types; `data/gpu-types.yaml` is the shipped table, which
// the binary embeds as its default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gshare/common/units.h"

namespace gshare {

struct GpuType {
  std::string name;                 // "a100-40gb"
  std::string description;          // "NVIDIA A100 40GB SXM4"
  std::uint64_t memory_bytes = 0;   // device memory usable by functions
  double h2d_bytes_per_second = 0;  // effective host-to-device copy bandwidth (pinned)
  Duration restore_overhead{};      // fixed cost of one restore (allocation, mapping, launch)
  double price_per_hour_usd = 0;    // on-demand price of one such GPU
  std::string price_source;         // where the price comes from
  // Execution time relative to the reference type (a100-40gb = 1.0): used when a function's
  // profile has no figure for this type.
  double relative_latency = 1.0;
  // Batch-b latency as a multiple of batch-1 latency, for b = 1, 2, 4, 8, ... (index i is batch
  // 2^i); used when a function's profile gives batch 1 only. Interpolated between powers of two.
  std::vector<double> batch_scaling;
  // Serverless bill: compute units per GB-second of GPU memory while a function runs, and while
  // it is held idle, at `serverless_usd_per_cu` per unit.
  double serverless_cu_active = 2.1;
  double serverless_cu_idle = 0.5;
  double serverless_usd_per_cu = 0.00002;

  // Multiple of batch-1 latency for `batch` (>= 1), from batch_scaling; linear in batch when the
  // table is empty.
  double BatchScale(int batch) const;

  // Time to restore `model_bytes` onto a GPU of this type: the fixed overhead plus the bytes over
  // the host-to-device link. The one formula every policy and the simulator use.
  Duration RestoreTime(std::uint64_t model_bytes) const {
    return restore_overhead + TransferTime(model_bytes, h2d_bytes_per_second);
  }
};

}  // namespace gshare
