// Solves a batch of generated instances at the sizes of the optimality-gap study (label "slow").
// It asserts correctness only (every schedule returned validates, bounds are consistent); how
// many instances are solved optimally depends on the machine and is reported by `gshare optgap`.
#include <gtest/gtest.h>

#include "gshare/sched/exact/generator.h"
#include "gshare/sched/exact/solver.h"

namespace gshare::exact {
namespace {

TEST(ExactSolveRateTest, GeneratedInstancesYieldValidSchedules) {
  ExactOptions options;
  options.time_limit = std::chrono::seconds(5);
  for (std::uint64_t seed = 100; seed < 110; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int requests = 10 + static_cast<int>(seed % 3) * 5;
    const int gpus = 2 + static_cast<int>(seed % 3);
    Result<ExactInstance> instance =
        GenerateExactInstance(seed, requests, gpus, SampleFunctions(), SampleGpu());
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    Result<ExactSolution> solution = SolveExact(*instance, options);
    ASSERT_TRUE(solution.ok()) << solution.status().ToString();
    if (solution->schedule) {
      EXPECT_TRUE(ValidateSchedule(*instance, *solution->schedule).ok());
      EXPECT_LE(solution->best_bound, solution->objective * (1 + 1e-6) + 1e-12);
    }
  }
}

}  // namespace
}  // namespace gshare::exact
