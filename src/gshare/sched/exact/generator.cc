#include "gshare/sched/exact/generator.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "gshare/common/random.h"

namespace gshare::exact {
namespace {

ResolvedFunction Profile(std::string name, std::uint64_t model_bytes, std::uint64_t gpu_bytes,
                         double exec_ms, double slo_ms) {
  ResolvedFunction function;
  function.name = std::move(name);
  function.tenant = "sample";
  function.model_bytes = model_bytes;
  function.gpu_memory_bytes = gpu_bytes;
  function.exec_by_batch = {FromMilliseconds(exec_ms)};
  function.slo = FromMilliseconds(slo_ms);
  return function;
}

}  // namespace

std::vector<ResolvedFunction> SampleFunctions() {
  return {
      Profile("resnet50", 98 * kMiB, 384 * kMiB, 2.128, 50),
      Profile("mobilenet", 21 * kMiB, 384 * kMiB, 1.1, 1.5 * 1.1),
      Profile("vit-base", 330 * kMiB, 768 * kMiB, 4.5, 1.5 * 4.5),
      Profile("convnext-large", 754 * kMiB, 1280 * kMiB, 9, 1.5 * 9),
      Profile("vit-huge", 2420 * kMiB, 3 * kGiB, 21, 1.5 * 21),
  };
}

GpuType SampleGpu() {
  GpuType gpu;
  gpu.name = "a100-40gb";
  gpu.memory_bytes = 40 * kGiB;
  gpu.h2d_bytes_per_second = 24.4e9;
  gpu.restore_overhead = std::chrono::milliseconds(1);
  return gpu;
}

Result<ExactInstance> GenerateExactInstance(std::uint64_t seed, int num_requests, int num_gpus,
                                            const std::vector<ResolvedFunction>& functions,
                                            const GpuType& gpu, const GeneratorOptions& options) {
  if (num_requests < 1 || num_gpus < 1) {
    return InvalidArgument("generator: need at least one request and one GPU");
  }
  if (functions.empty()) return InvalidArgument("generator: no function profiles");
  if (options.load <= 0 || options.slo_floor < 1 || options.functions_per_instance < 0) {
    return InvalidArgument("generator: need load > 0, slo_floor >= 1, functions_per_instance >= 0");
  }
  for (const ResolvedFunction& function : functions) {
    if (function.exec_by_batch.empty() || function.ExecLatency(1) <= Duration::zero()) {
      return InvalidArgument(
          fmt::format("generator: function {} has no positive batch-1 latency", function.name));
    }
  }

  Random random(seed);
  // Draw the functions of this instance without replacement (partial Fisher-Yates).
  std::vector<std::size_t> order(functions.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const std::size_t count =
      options.functions_per_instance == 0
          ? functions.size()
          : std::min(functions.size(), static_cast<std::size_t>(options.functions_per_instance));
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t j = i + static_cast<std::size_t>(random.Below(order.size() - i));
    std::swap(order[i], order[j]);
  }
  order.resize(count);
  std::sort(order.begin(), order.end());

  ExactInstance instance;
  instance.gpu = ExactGpuFrom(gpu);
  instance.num_gpus = num_gpus;
  std::vector<Duration> slo;
  double mean_cold_start_s = 0;
  for (const std::size_t index : order) {
    const ResolvedFunction& profile = functions[index];
    instance.functions.push_back(ExactFunction{
        profile.name, profile.model_bytes, std::max(profile.gpu_memory_bytes, profile.model_bytes),
        profile.ExecLatency(1)});
    const std::size_t f = instance.functions.size() - 1;
    const Duration cold_start = instance.RestoreTime(f) + instance.functions[f].exec;
    const Duration floor = FromSeconds(options.slo_floor * ToSeconds(cold_start));
    slo.push_back(std::max(profile.slo, floor));
    mean_cold_start_s += ToSeconds(cold_start) / static_cast<double>(count);
  }

  if (options.hot) {
    for (std::size_t k = 0; k < count; k += 2) {
      const Duration cold_start = instance.RestoreTime(k) + instance.functions[k].exec;
      slo[k] = FromSeconds(random.Uniform(1.2, 1.8) * ToSeconds(cold_start));
    }
  }
  const double rate_per_s = options.load * num_gpus / mean_cold_start_s;
  TimePoint now{};
  for (int i = 0; i < num_requests; ++i) {
    if (i > 0) now += FromSeconds(random.Exponential(rate_per_s));
    // Round releases to whole microseconds: readable instances, exact arithmetic.
    const TimePoint release(
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()));
    const std::size_t f =
        options.hot && random.Bernoulli(0.5) ? 0 : static_cast<std::size_t>(random.Below(count));
    instance.requests.push_back(ExactRequest{f, release, release + slo[f]});
  }
  GSHARE_RETURN_IF_ERROR(ValidateInstance(instance));
  return instance;
}

}  // namespace gshare::exact
