// Small hand-made workloads for simulator tests and benchmarks.
#pragma once

#include <string>
#include <vector>

#include "gshare/sim/workload/workload.h"

namespace gshare::testing {

// A GPU type with round numbers: 40 GiB, 1 GB/s link, 1 ms restore overhead, USD 3.60/hour.
inline GpuType RoundGpu() {
  GpuType gpu;
  gpu.name = "round";
  gpu.memory_bytes = 40 * kGiB;
  gpu.h2d_bytes_per_second = 1e9;
  gpu.restore_overhead = std::chrono::milliseconds(1);
  gpu.price_per_hour_usd = 3.6;
  return gpu;
}

inline ResolvedFunction MakeFunction(std::string name, std::uint64_t model_bytes,
                                     std::uint64_t gpu_memory_bytes, Duration exec, Duration slo,
                                     int max_batch = 1) {
  ResolvedFunction f;
  f.name = std::move(name);
  f.tenant = "t";
  f.model_bytes = model_bytes;
  f.gpu_memory_bytes = gpu_memory_bytes;
  f.max_batch = max_batch;
  for (int b = 1; b <= max_batch; ++b) f.exec_by_batch.push_back(exec);
  f.slo = slo;
  return f;
}

// Adds a request of `function` arriving at `seconds`; keeps ids dense and arrivals sorted.
inline void AddRequest(Workload& w, FunctionId function, double seconds) {
  Request r;
  r.id = w.requests.size();
  r.function = function;
  r.arrival = AtSeconds(seconds);
  r.deadline = r.arrival + w.functions[function].slo;
  w.requests.push_back(r);
}

}  // namespace gshare::testing
