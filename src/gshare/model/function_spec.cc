#include "gshare/model/function_spec.h"

#include <fmt/format.h>
#include <algorithm>

namespace gshare {
namespace {

const GpuType* FindType(const std::vector<GpuType>& types, const std::string& name) {
  for (const auto& t : types) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Latency of `batch` from a table with batch 1 present: exact, else linear between neighbours,
// else batch-1 latency scaled by the GPU's batch curve.
Duration LatencyFromTable(const BatchLatency& table, int batch, double scale_from_batch1) {
  if (auto it = table.by_batch.find(batch); it != table.by_batch.end()) return it->second;
  auto upper = table.by_batch.lower_bound(batch);
  if (upper != table.by_batch.end() && upper != table.by_batch.begin()) {
    auto lower = std::prev(upper);
    const double f = static_cast<double>(batch - lower->first) /
                     static_cast<double>(upper->first - lower->first);
    const double ns = static_cast<double>(lower->second.count()) +
                      f * static_cast<double>((upper->second - lower->second).count());
    return Duration(static_cast<std::int64_t>(ns));
  }
  const Duration batch1 = table.by_batch.at(1);
  return Duration(
      static_cast<std::int64_t>(static_cast<double>(batch1.count()) * scale_from_batch1));
}

}  // namespace

Duration FunctionSpec::RequestTimeout() const { return timeout.value_or(kDefaultRequestTimeout); }

Result<ResolvedFunction> ResolveFunction(const FunctionSpec& spec, const GpuType& gpu,
                                         const std::vector<GpuType>& known_types,
                                         std::optional<Duration> p90_exec) {
  if (spec.gpu_memory_bytes < spec.model_bytes) {
    return InvalidArgument(
        fmt::format("function '{}': gpu_memory ({}) is smaller than model_size ({})", spec.name,
                    FormatBytes(spec.gpu_memory_bytes), FormatBytes(spec.model_bytes)));
  }
  if (spec.gpu_memory_bytes +
          spec.batch_memory_bytes * static_cast<std::uint64_t>(std::max(0, spec.max_batch - 1)) >
      gpu.memory_bytes) {
    return ResourceExhausted(
        fmt::format("function '{}' needs {} of GPU memory at batch {}; {} has {}", spec.name,
                    FormatBytes(spec.gpu_memory_bytes +
                                spec.batch_memory_bytes *
                                    static_cast<std::uint64_t>(std::max(0, spec.max_batch - 1))),
                    spec.max_batch, gpu.name, FormatBytes(gpu.memory_bytes)));
  }
  const BatchLatency* table = nullptr;
  double factor = 1.0;
  if (auto it = spec.exec_latency.find(gpu.name); it != spec.exec_latency.end()) {
    table = &it->second;
  } else if (auto ref = spec.exec_latency.find(spec.reference_gpu);
             ref != spec.exec_latency.end()) {
    const GpuType* reference = FindType(known_types, spec.reference_gpu);
    if (reference == nullptr) {
      return NotFound(fmt::format("function '{}': unknown reference GPU type '{}'", spec.name,
                                  spec.reference_gpu));
    }
    table = &ref->second;
    factor = gpu.relative_latency / reference->relative_latency;
  }
  if (table == nullptr || !table->by_batch.contains(1)) {
    return NotFound(fmt::format("function '{}' has no batch-1 execution latency for GPU type '{}'",
                                spec.name, gpu.name));
  }
  ResolvedFunction out;
  out.name = spec.name;
  out.tenant = spec.tenant;
  out.model_bytes = spec.model_bytes;
  out.gpu_memory_bytes = spec.gpu_memory_bytes;
  out.max_batch = std::max(1, spec.max_batch);
  out.batch_memory_bytes = spec.batch_memory_bytes;
  out.min_instances = spec.min_instances;
  out.max_instances = spec.max_instances;
  out.exec_by_batch.reserve(static_cast<std::size_t>(out.max_batch));
  for (int b = 1; b <= out.max_batch; ++b) {
    const Duration base = LatencyFromTable(*table, b, gpu.BatchScale(b));
    out.exec_by_batch.push_back(
        Duration(static_cast<std::int64_t>(static_cast<double>(base.count()) * factor)));
  }
  if (spec.slo) {
    out.slo = *spec.slo;
  } else {
    const Duration p90 = p90_exec.value_or(out.exec_by_batch.front());
    out.slo = Duration(static_cast<std::int64_t>(static_cast<double>(p90.count()) *
                                                 spec.slo_factor.value_or(kDefaultSloFactor)));
  }
  if (out.slo <= Duration::zero()) {
    return InvalidArgument(fmt::format("function '{}': the SLO must be positive", spec.name));
  }
  return out;
}

}  // namespace gshare
