// ExactInstance: a small, closed scheduling problem that the exact solver, the brute-force
// enumerator and any online policy can be scored on identically (docs/scheduling.md).
//
// Value types. An instance is a set of functions (model bytes, GPU memory, execution time), a set
// of requests (function, release time, deadline) and `num_gpus` identical GPUs of one type. All
// times are on one timeline that starts at TimePoint{} (zero); releases are at or after zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/model/gpu_type.h"

namespace gshare::exact {

// GPU memory is handed out in slices of this size: a function holds its GPU memory rounded up to
// a whole number of slices.
inline constexpr std::uint64_t kSliceBytes = 128 * kMiB;

struct ExactFunction {
  std::string name;
  std::uint64_t model_bytes = 0;       // copied host-to-device by a restore
  std::uint64_t gpu_memory_bytes = 0;  // held from the start of a restore until eviction
  Duration exec{};                     // execution time of one request (batch 1), > 0
};

struct ExactRequest {
  std::size_t function = 0;  // index into ExactInstance::functions
  TimePoint release{};       // the request arrives; nothing may start for it earlier
  TimePoint deadline{};      // its execution must end by then
};

// What the instance needs of its GPU type.
struct ExactGpu {
  std::uint64_t memory_bytes = 0;   // memory usable by functions on one GPU
  double h2d_bytes_per_second = 0;  // restore copy bandwidth, > 0
  Duration restore_overhead{};      // fixed cost of one restore
};

ExactGpu ExactGpuFrom(const GpuType& type);

struct ExactInstance {
  std::vector<ExactFunction> functions;
  std::vector<ExactRequest> requests;
  ExactGpu gpu;
  int num_gpus = 1;

  // GPU memory of function `f` rounded up to whole slices. Precondition: f indexes functions.
  std::uint64_t SliceBytes(std::size_t f) const;
  // Number of kSliceBytes slices that function `f` holds.
  std::uint64_t Slices(std::size_t f) const { return SliceBytes(f) / kSliceBytes; }
  // Duration of one restore of `f`: the fixed overhead plus model bytes over the link bandwidth,
  // rounded to whole nanoseconds.
  Duration RestoreTime(std::size_t f) const;
  Duration ExecTime(std::size_t request) const {
    return functions[requests[request].function].exec;
  }
};

// Checks that the instance is well formed: at least one GPU, positive bandwidth and execution
// times, model bytes <= GPU memory bytes, function indices in range, 0 <= release <= deadline.
// InvalidArgument naming the first offending entry otherwise. It does not decide feasibility.
Status ValidateInstance(const ExactInstance& instance);

}  // namespace gshare::exact
