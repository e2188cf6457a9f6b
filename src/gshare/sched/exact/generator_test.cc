#include "gshare/sched/exact/generator.h"

#include <gtest/gtest.h>

#include <set>

namespace gshare::exact {
namespace {

TEST(GenerateExactInstanceTest, SameSeedSameInstance) {
  const auto a = GenerateExactInstance(42, 20, 3, SampleFunctions(), SampleGpu());
  const auto b = GenerateExactInstance(42, 20, 3, SampleFunctions(), SampleGpu());
  const auto c = GenerateExactInstance(43, 20, 3, SampleFunctions(), SampleGpu());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_EQ(a->requests.size(), 20u);
  ASSERT_EQ(a->functions.size(), b->functions.size());
  bool differs = a->functions.size() != c->functions.size();
  for (std::size_t r = 0; r < a->requests.size(); ++r) {
    EXPECT_EQ(a->requests[r].function, b->requests[r].function);
    EXPECT_EQ(a->requests[r].release, b->requests[r].release);
    EXPECT_EQ(a->requests[r].deadline, b->requests[r].deadline);
    differs = differs || a->requests[r].release != c->requests[r].release;
  }
  EXPECT_TRUE(differs);
}

TEST(GenerateExactInstanceTest, ShapeAndDeadlines) {
  GeneratorOptions options;
  options.functions_per_instance = 3;
  options.slo_floor = 2.0;
  const auto instance = GenerateExactInstance(7, 30, 4, SampleFunctions(), SampleGpu(), options);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  EXPECT_EQ(instance->num_gpus, 4);
  EXPECT_EQ(instance->functions.size(), 3u);
  EXPECT_EQ(instance->gpu.memory_bytes, 40 * kGiB);
  EXPECT_EQ(instance->requests[0].release, TimePoint{});
  std::set<std::string> names;
  for (const ExactFunction& function : instance->functions) names.insert(function.name);
  EXPECT_EQ(names.size(), 3u);
  for (std::size_t r = 0; r < instance->requests.size(); ++r) {
    const ExactRequest& request = instance->requests[r];
    if (r > 0) {
      EXPECT_GE(request.release, instance->requests[r - 1].release);
    }
    const Duration cold = instance->RestoreTime(request.function) + instance->ExecTime(r);
    // Deadline = release + max(SLO, 2 x cold start): at least the floor (within rounding).
    EXPECT_GE(request.deadline - request.release, 2 * cold - Duration(2));
  }
}

TEST(GenerateExactInstanceTest, RejectsBadInput) {
  EXPECT_FALSE(GenerateExactInstance(1, 0, 1, SampleFunctions(), SampleGpu()).ok());
  EXPECT_FALSE(GenerateExactInstance(1, 5, 0, SampleFunctions(), SampleGpu()).ok());
  EXPECT_FALSE(GenerateExactInstance(1, 5, 1, {}, SampleGpu()).ok());
  GeneratorOptions options;
  options.load = 0;
  EXPECT_FALSE(GenerateExactInstance(1, 5, 1, SampleFunctions(), SampleGpu(), options).ok());
}

}  // namespace
}  // namespace gshare::exact
