#include "gshare/model/function_spec.h"

#include <gtest/gtest.h>

#include "gshare/model/catalog.h"

namespace gshare {
namespace {

using std::chrono::microseconds;

const GpuType& Type(std::string_view name) {
  for (const auto& type : BuiltinGpuTypes()) {
    if (type.name == name) return type;
  }
  ADD_FAILURE() << "no built-in type " << name;
  return BuiltinGpuTypes().front();
}

FunctionSpec Resnet() {
  FunctionSpec spec;
  spec.name = "resnet50";
  spec.model_bytes = 98 * kMiB;
  spec.gpu_memory_bytes = 384 * kMiB;
  spec.exec_latency["a100-40gb"].by_batch[1] = microseconds(2128);
  spec.max_batch = 16;
  return spec;
}

TEST(ResolveFunctionTest, ScalesReferenceLatencyByTheBuiltinTable) {
  auto on_t4 = ResolveFunction(Resnet(), Type("t4"), BuiltinGpuTypes());
  ASSERT_TRUE(on_t4.ok()) << on_t4.status().ToString();
  // 2.128 ms x 1.411 (T4 / A100 at batch 1) = 3.0026 ms, close to the measured 3.003 ms.
  EXPECT_EQ(on_t4->ExecLatency(1), Duration(3'002'608));
  // Batch 16 on the T4: 2.128 ms x 1.411 x 5.033.
  EXPECT_NEAR(ToMilliseconds(on_t4->ExecLatency(16)), 2.128 * 1.411 * 5.033, 1e-3);
  // Default SLO: 1.5 x batch-1 latency.
  EXPECT_EQ(on_t4->slo, Duration(4'503'912));

  auto on_a100 =
      ResolveFunction(Resnet(), Type("a100-40gb"), BuiltinGpuTypes(), Duration(10'000'000));
  ASSERT_TRUE(on_a100.ok());
  EXPECT_EQ(on_a100->ExecLatency(1), microseconds(2128));
  EXPECT_EQ(on_a100->slo, Duration(15'000'000));  // 1.5 x the given p90
}

TEST(ResolveFunctionTest, RejectsFunctionsLargerThanTheGpu) {
  FunctionSpec spec = Resnet();
  spec.model_bytes = 20 * kGiB;
  spec.gpu_memory_bytes = 20 * kGiB;
  auto resolved = ResolveFunction(spec, Type("t4"), BuiltinGpuTypes());
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace gshare
