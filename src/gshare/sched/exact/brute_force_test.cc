#include "gshare/sched/exact/brute_force.h"

#include <gtest/gtest.h>

#include "gshare/common/random.h"

#include "gshare/sched/exact/generator.h"
#include "gshare/sched/exact/solver.h"
#include "gshare/sched/exact/test_instances.h"

namespace gshare::exact {
namespace {

using fixtures::RequestAt;
using fixtures::RoundFunction;
using fixtures::RoundInstance;

TEST(BruteForceTest, HandComputedTwoRequestsOneRestore) {
  ExactInstance instance = RoundInstance(1);
  instance.functions = {RoundFunction("f", 2, 2)};
  instance.requests = {RequestAt(0, 0, 20), RequestAt(0, 0, 20)};
  Result<ExactSolution> solution = SolveBruteForce(instance);
  ASSERT_TRUE(solution.ok()) << solution.status().ToString();
  ASSERT_EQ(solution->status, SolveStatus::kOptimal);
  EXPECT_NEAR(solution->objective, 0.00225, 1e-12);
}

TEST(BruteForceTest, RefusesLargeInstances) {
  ExactInstance instance = RoundInstance(1);
  instance.functions = {RoundFunction("f", 1, 2)};
  for (int i = 0; i < 7; ++i) instance.requests.push_back(RequestAt(0, i, i + 50));
  EXPECT_EQ(SolveBruteForce(instance).status().code(), StatusCode::kInvalidArgument);
}

struct CrossCheckCase {
  std::uint64_t seed;
  int requests;
  int gpus;
  std::uint64_t memory_bytes;  // 0: the sample GPU's 40 GiB
  double load;
  bool light;  // only the three smallest sample functions (3, 3 and 6 slices)
};

std::vector<ResolvedFunction> LightFunctions() {
  std::vector<ResolvedFunction> functions = SampleFunctions();
  functions.resize(3);  // resnet50, mobilenet, vit-base
  return functions;
}

// The MILP optimum equals the exhaustive optimum, including which instances are infeasible.
// High loads make the GPUs contend; the light cases on a GPU of 6 or 8 slices (for functions of
// 3, 3 and 6 slices) make the memory constraints bind.
TEST(BruteForceTest, MilpMatchesBruteForceOnTinyInstances) {
  const std::vector<CrossCheckCase> cases = {
      {1, 4, 1, 0, 0.5, false},          {2, 4, 2, 0, 1.0, false},
      {3, 5, 1, 0, 1.0, false},          {4, 5, 2, 0, 2.0, false},
      {5, 4, 1, 2 * kGiB, 1.0, false},   {7, 5, 1, 3 * kGiB, 1.0, false},
      {8, 4, 2, 3 * kGiB, 3.0, false},   {9, 5, 1, 0, 3.0, false},
      {12, 5, 2, 0, 0.5, false},         {21, 5, 1, 768 * kMiB, 1.0, true},
      {22, 5, 1, 768 * kMiB, 2.0, true}, {23, 5, 1, 768 * kMiB, 3.0, true},
      {24, 5, 2, 768 * kMiB, 3.0, true}, {25, 5, 2, 768 * kMiB, 4.0, true},
      {26, 6, 1, kGiB, 2.0, true},       {27, 5, 1, 768 * kMiB, 5.0, true},
      {28, 5, 2, 768 * kMiB, 6.0, true}, {29, 5, 1, kGiB, 3.0, true},
      {30, 5, 1, 768 * kMiB, 2.0, true},
  };
  int feasible = 0;
  for (const CrossCheckCase& c : cases) {
    SCOPED_TRACE("seed " + std::to_string(c.seed));
    GeneratorOptions options;
    options.load = c.load;
    options.functions_per_instance = 3;
    GpuType gpu = SampleGpu();
    if (c.memory_bytes > 0) gpu.memory_bytes = c.memory_bytes;
    Result<ExactInstance> instance = GenerateExactInstance(
        c.seed, c.requests, c.gpus, c.light ? LightFunctions() : SampleFunctions(), gpu, options);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();

    Result<ExactSolution> brute = SolveBruteForce(*instance);
    ASSERT_TRUE(brute.ok()) << brute.status().ToString();
    Result<ExactSolution> milp = SolveExact(*instance);
    ASSERT_TRUE(milp.ok()) << milp.status().ToString();
    ASSERT_NE(milp->status, SolveStatus::kTimedOut);
    ASSERT_NE(milp->status, SolveStatus::kFeasible);
    ASSERT_EQ(milp->status, brute->status);
    if (brute->status != SolveStatus::kOptimal) continue;
    ++feasible;
    EXPECT_NEAR(milp->objective, brute->objective, 1e-9 + 1e-6 * brute->objective);
    EXPECT_TRUE(ValidateSchedule(*instance, *brute->schedule).ok());
  }
  EXPECT_GE(feasible, 12);
}

// Round-figure instances with tight memory: 2 or 3 functions of 2 to 4 slices on GPUs of 5
// slices, overlapping windows. Compared with the same instance on a roomy GPU, so that the test
// also shows that memory changed the optimum somewhere.
ExactInstance TightMemoryInstance(std::uint64_t seed) {
  Random random(seed);
  ExactInstance instance = RoundInstance(1 + static_cast<int>(random.Below(2)), 5 * kSliceBytes);
  const int functions = 2 + static_cast<int>(random.Below(2));
  for (int f = 0; f < functions; ++f) {
    instance.functions.push_back(
        RoundFunction("f", 2 + random.Below(3), 1.0 + static_cast<double>(random.Below(4))));
  }
  const int requests = 4 + static_cast<int>(random.Below(2));
  for (int r = 0; r < requests; ++r) {
    const double release = static_cast<double>(random.Below(21));
    const double window = 8 + static_cast<double>(random.Below(23));
    instance.requests.push_back(
        RequestAt(random.Below(static_cast<std::uint64_t>(functions)), release, release + window));
  }
  return instance;
}

TEST(BruteForceTest, MilpMatchesBruteForceUnderTightMemory) {
  int feasible = 0, memory_mattered = 0;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ExactInstance instance = TightMemoryInstance(seed);
    Result<ExactSolution> brute = SolveBruteForce(instance);
    ASSERT_TRUE(brute.ok()) << brute.status().ToString();
    Result<ExactSolution> milp = SolveExact(instance);
    ASSERT_TRUE(milp.ok()) << milp.status().ToString();
    ASSERT_EQ(milp->status, brute->status);
    if (brute->status != SolveStatus::kOptimal) continue;
    ++feasible;
    EXPECT_NEAR(milp->objective, brute->objective, 1e-9 + 1e-6 * brute->objective);

    instance.gpu.memory_bytes = 40 * kGiB;
    Result<ExactSolution> roomy = SolveBruteForce(instance);
    ASSERT_TRUE(roomy.ok());
    ASSERT_EQ(roomy->status, SolveStatus::kOptimal);
    EXPECT_LE(roomy->objective, brute->objective + 1e-12);
    if (roomy->objective < brute->objective - 1e-9) ++memory_mattered;
  }
  EXPECT_GE(feasible, 12);
  EXPECT_GE(memory_mattered, 2);
}

}  // namespace
}  // namespace gshare::exact
