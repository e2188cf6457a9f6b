#include "gshare/sched/exact/solver.h"

#include <gtest/gtest.h>

#include <cmath>

#include "gshare/sched/exact/generator.h"
#include "gshare/sched/exact/test_instances.h"

namespace gshare::exact {
namespace {

using fixtures::AtMs;
using fixtures::RequestAt;
using fixtures::RoundFunction;
using fixtures::RoundInstance;
using fixtures::SliceMs;

ExactSolution Solve(const ExactInstance& instance) {
  Result<ExactSolution> solution = SolveExact(instance);
  EXPECT_TRUE(solution.ok()) << solution.status().ToString();
  if (!solution.ok()) return {};
  if (solution->schedule) {
    const Status valid = ValidateSchedule(instance, *solution->schedule);
    EXPECT_TRUE(valid.ok()) << valid.ToString();
    EXPECT_DOUBLE_EQ(solution->objective, ScheduleObjective(instance, *solution->schedule));
  }
  return std::move(solution).value();
}

// Two requests of one function on one GPU: one restore [0, 5], then the two runs back to back
// [5, 7] and [7, 9]. The slice (2 x 128 MiB) is held for 9 ms: 0.25 GiB x 0.009 s.
TEST(SolveExactTest, HandComputedTwoRequestsOneRestore) {
  ExactInstance instance = RoundInstance(1);
  instance.functions = {RoundFunction("f", 2, 2)};
  instance.requests = {RequestAt(0, 0, 20), RequestAt(0, 0, 20)};
  const ExactSolution solution = Solve(instance);
  ASSERT_EQ(solution.status, SolveStatus::kOptimal);
  EXPECT_NEAR(solution.objective, 0.00225, 1e-12);
  EXPECT_NEAR(solution.solver_objective, solution.objective, 1e-9);
  ASSERT_TRUE(solution.schedule.has_value());
  ASSERT_EQ(solution.schedule->residencies.size(), 1u);
  EXPECT_EQ(solution.schedule->residencies[0].restore_start, AtMs(0));
  EXPECT_EQ(solution.schedule->residencies[0].end, AtMs(9));
}

// Requests 100 ms apart: two short residencies (7 ms each) beat holding the slice for 107 ms.
TEST(SolveExactTest, EvictsAcrossALongGap) {
  ExactInstance instance = RoundInstance(1);
  instance.functions = {RoundFunction("f", 1, 2)};
  instance.requests = {RequestAt(0, 0, 20), RequestAt(0, 100, 120)};
  const ExactSolution solution = Solve(instance);
  ASSERT_EQ(solution.status, SolveStatus::kOptimal);
  EXPECT_NEAR(solution.objective, SliceMs(1, 14), 1e-12);
  EXPECT_EQ(solution.schedule->residencies.size(), 2u);
}

TEST(SolveExactTest, DeadlineShorterThanColdStartIsInfeasible) {
  ExactInstance instance = RoundInstance(2);
  instance.functions = {RoundFunction("f", 1, 2)};
  instance.requests = {RequestAt(0, 0, 6.5)};  // restore 5 ms + run 2 ms > 6.5 ms
  const ExactSolution solution = Solve(instance);
  EXPECT_EQ(solution.status, SolveStatus::kInfeasible);
  EXPECT_FALSE(solution.schedule.has_value());
}

// A and B arrive together on one GPU. The copy engine restores one at a time: A [0,5] runs
// [5,7]; B copies [5,10] and runs [10,12]. A deadline of 11.9 ms for B is out of reach, which
// the branch and bound must prove (no single request is infeasible alone).
TEST(SolveExactTest, CopyEngineSerializationDecidesFeasibility) {
  ExactInstance instance = RoundInstance(1);
  instance.functions = {RoundFunction("a", 1, 2), RoundFunction("b", 1, 2)};
  instance.requests = {RequestAt(0, 0, 7), RequestAt(1, 0, 12)};
  ExactSolution solution = Solve(instance);
  ASSERT_EQ(solution.status, SolveStatus::kOptimal);
  EXPECT_NEAR(solution.objective, SliceMs(1, 7) + SliceMs(1, 7), 1e-12);

  instance.requests[1].deadline = AtMs(11.9);
  EXPECT_EQ(Solve(instance).status, SolveStatus::kInfeasible);

  instance.num_gpus = 2;  // a second GPU has its own copy engine
  solution = Solve(instance);
  ASSERT_EQ(solution.status, SolveStatus::kOptimal);
  EXPECT_NEAR(solution.objective, SliceMs(1, 7) + SliceMs(1, 7), 1e-12);
}

// Memory: A and B take 2 slices each. With 4 slices B restores while A runs and ends at 12 ms;
// with 2 slices B must wait for A to leave at 7 ms and ends at 14 ms.
TEST(SolveExactTest, MemoryCapacityDelaysARestore) {
  ExactInstance instance = RoundInstance(1, 4 * kSliceBytes);
  instance.functions = {RoundFunction("a", 2, 2), RoundFunction("b", 2, 2)};
  instance.requests = {RequestAt(0, 0, 7), RequestAt(1, 0, 13)};
  ExactSolution solution = Solve(instance);
  ASSERT_EQ(solution.status, SolveStatus::kOptimal);
  EXPECT_NEAR(solution.objective, SliceMs(2, 7) + SliceMs(2, 7), 1e-12);

  instance.gpu.memory_bytes = 2 * kSliceBytes;
  EXPECT_EQ(Solve(instance).status, SolveStatus::kInfeasible);

  instance.requests[1].deadline = AtMs(14);
  solution = Solve(instance);
  ASSERT_EQ(solution.status, SolveStatus::kOptimal);
  EXPECT_EQ(solution.schedule->executions[1].end, AtMs(14));
}

TEST(SolveExactTest, FunctionLargerThanTheGpuIsInfeasible) {
  ExactInstance instance = RoundInstance(2, 2 * kSliceBytes);
  instance.functions = {RoundFunction("big", 3, 2)};
  instance.requests = {RequestAt(0, 0, 100)};
  EXPECT_EQ(Solve(instance).status, SolveStatus::kInfeasible);
}

TEST(SolveExactTest, EmptyInstanceCostsNothing) {
  ExactInstance instance = RoundInstance(1);
  instance.functions = {RoundFunction("f", 1, 2)};
  const ExactSolution solution = Solve(instance);
  ASSERT_EQ(solution.status, SolveStatus::kOptimal);
  EXPECT_EQ(solution.objective, 0);
}

TEST(SolveExactTest, RejectsMalformedInstance) {
  ExactInstance instance = RoundInstance(0);
  EXPECT_EQ(SolveExact(instance).status().code(), StatusCode::kInvalidArgument);
}

// On generated instances the MILP's own objective equals the score of the schedule it returns.
TEST(SolveExactTest, MilpObjectiveEqualsScheduleObjective) {
  int optimal = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    Result<ExactInstance> instance =
        GenerateExactInstance(seed, 8, 2, SampleFunctions(), SampleGpu());
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    const ExactSolution solution = Solve(*instance);
    if (solution.status != SolveStatus::kOptimal) continue;
    ++optimal;
    EXPECT_NEAR(solution.solver_objective, solution.objective, 1e-6 * solution.objective + 1e-12)
        << "seed " << seed;
    EXPECT_LE(solution.best_bound, solution.objective * (1 + 1e-6) + 1e-12);
  }
  EXPECT_GT(optimal, 0);
}

}  // namespace
}  // namespace gshare::exact
