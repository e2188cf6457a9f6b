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

TEST(GenerateExactInstanceTest, TheHotClassHasAHotFunctionAndDeadlinesUnderTwoColdStarts) {
  GeneratorOptions options;
  options.hot = true;
  int hot_requests = 0;
  int requests = 0;
  int at_risk = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const auto instance =
        GenerateExactInstance(seed, 40, 2, SampleFunctions(), SampleGpu(), options);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    for (const ExactRequest& r : instance->requests) {
      const Duration cold =
          instance->RestoreTime(r.function) + instance->functions[r.function].exec;
      const double slack = ToSeconds(r.deadline - r.release) / ToSeconds(cold);
      if (r.function % 2 == 0) {
        // At risk: a cold start fits, two do not.
        EXPECT_GE(slack, 1.2 - 1e-6) << seed;
        EXPECT_LE(slack, 1.8 + 1e-6) << seed;
        at_risk += 1;
      } else {
        EXPECT_GE(slack, 2.0 - 1e-6) << seed;
      }
      hot_requests += r.function == 0;
      requests += 1;
    }
  }
  // The hot function: 1/2 + 1/2 x 1/4 of the requests with four functions drawn.
  EXPECT_NEAR(static_cast<double>(hot_requests) / requests, 0.625, 0.06);
  EXPECT_GT(at_risk, requests / 2);
  // The default class is as before: no deadline under two cold starts.
  const auto plain = GenerateExactInstance(1, 40, 2, SampleFunctions(), SampleGpu());
  ASSERT_TRUE(plain.ok());
  for (const ExactRequest& r : plain->requests) {
    const Duration cold = plain->RestoreTime(r.function) + plain->functions[r.function].exec;
    EXPECT_GE(ToSeconds(r.deadline - r.release), 2.0 * ToSeconds(cold) - 1e-9);
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
