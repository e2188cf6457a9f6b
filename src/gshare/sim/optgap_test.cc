#include "gshare/sim/optgap.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

using std::chrono::milliseconds;

exact::ExactInstance OneFunctionInstance() {
  exact::ExactInstance instance;
  instance.gpu.memory_bytes = 40 * kGiB;
  instance.gpu.h2d_bytes_per_second = 1e9;
  instance.gpu.restore_overhead = milliseconds(1);
  instance.num_gpus = 1;
  instance.functions.push_back({"f", 10'000'000, 256 * kMiB, milliseconds(10)});
  // Two requests: the second arrives while the first runs.
  instance.requests.push_back({0, AtSeconds(0.0), AtSeconds(0.100)});
  instance.requests.push_back({0, AtSeconds(0.015), AtSeconds(0.100)});
  return instance;
}

TEST(OptGapTest, OnlineScheduleOfAHandCaseIsValidAndScoredByHand) {
  auto online = ScheduleOnline(OneFunctionInstance(), "gshare");
  ASSERT_TRUE(online.ok()) << online.status().ToString();
  EXPECT_TRUE(online->validity.ok()) << online->validity.ToString();
  // Lazy binding with the 40% margin: the newest request must start by 100 - 2 x 14 - 11 - 4.4
  // = 56.6 ms; one residency: restore 56.6-67.6 ms, runs 67.6-77.6 and 77.6-87.6 ms; 256 MiB held
  // for 31 ms.
  ASSERT_EQ(online->schedule.residencies.size(), 1u);
  EXPECT_EQ(online->schedule.residencies[0].restore_start, AtSeconds(0.0566));
  EXPECT_EQ(online->schedule.residencies[0].end, AtSeconds(0.0876));
  EXPECT_NEAR(online->objective, 0.25 * 0.031, 1e-12);
  // The exact optimum is the same schedule.
  auto exact_solution = exact::SolveExact(OneFunctionInstance());
  ASSERT_TRUE(exact_solution.ok());
  ASSERT_EQ(exact_solution->status, exact::SolveStatus::kOptimal);
  EXPECT_NEAR(exact_solution->objective, online->objective, 1e-9);
}

TEST(OptGapTest, ScoresTheTimeASliceIsHeldNotOnlyItsActiveTime) {
  // Two functions of 10 MB and 256 MiB (restore 1 + 10 = 11 ms, run 10 ms) on one GPU: f is
  // called at 0 (deadline 100 ms), g at 500 ms (deadline 600 ms).
  exact::ExactInstance instance = OneFunctionInstance();
  instance.functions.push_back({"g", 10'000'000, 256 * kMiB, milliseconds(10)});
  instance.requests = {{0, AtSeconds(0.0), AtSeconds(0.100)},
                       {1, AtSeconds(0.500), AtSeconds(0.600)}};
  auto online = ScheduleOnline(instance, "gshare");
  ASSERT_TRUE(online.ok()) << online.status().ToString();
  EXPECT_TRUE(online->validity.ok()) << online->validity.ToString();
  ASSERT_EQ(online->schedule.residencies.size(), 2u);
  // f: lazy bind at 100 - 1.4 x 10 - 11 - 0.4 x 11 = 70.6 ms, restore to 81.6, run to 91.6; then
  // idle for a restore's time (ski rental) and released at 102.6 ms: held 32 ms, not the 21 ms
  // it was active.
  const auto& f = online->schedule.residencies[0];
  EXPECT_EQ(f.restore_start, AtSeconds(0.0706));
  EXPECT_EQ(online->schedule.executions[0].end, AtSeconds(0.0916));
  EXPECT_EQ(f.end, AtSeconds(0.1026));
  // g: restore 570.6-581.6, run to 591.6 ms, the last completion: the instance ends there, so the
  // slice (released at 602.6 ms) counts until 591.6 ms, 21 ms.
  const auto& g = online->schedule.residencies[1];
  EXPECT_EQ(g.restore_start, AtSeconds(0.5706));
  EXPECT_EQ(g.end, AtSeconds(0.5916));
  // 0.25 GiB x (32 + 21) ms.
  EXPECT_NEAR(online->objective, 0.25 * 0.053, 1e-12);
  EXPECT_NEAR(online->executor_gib_seconds, online->objective, 1e-9);
}

TEST(OptGapTest, RunsAFewInstancesAndReportsRatiosAtMostOne) {
  OptGapOptions options;
  options.instances = 3;
  options.requests = 6;
  options.gpus = 2;
  options.exact.time_limit = std::chrono::seconds(20);
  auto summary = RunOptGap(options, exact::SampleFunctions(), exact::SampleGpu());
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->rows.size(), 3u);
  EXPECT_GT(summary->solved_optimally, 0);
  for (const auto& row : summary->rows) {
    if (row.status == exact::SolveStatus::kOptimal && row.online.valid) {
      // The optimum is never worse than a valid online schedule.
      EXPECT_LE(row.online.quality_ratio, 1.0 + 1e-9) << "instance " << row.index;
      EXPECT_GT(row.online.quality_ratio, 0.0);
    } else {
      EXPECT_EQ(row.online.quality_ratio, 0.0);
    }
    if (row.status == exact::SolveStatus::kOptimal) {
      EXPECT_GE(row.exact_gpus, 1);
      EXPECT_GE(row.online.gpus, 1);
      EXPECT_LE(row.online.gpus, options.gpus);
      EXPECT_DOUBLE_EQ(row.gpu_ratio, static_cast<double>(row.exact_gpus) / row.online.gpus);
    }
  }
  EXPECT_EQ(summary->not_solved, 3 - summary->solved_optimally);
  EXPECT_EQ(summary->online_misses + summary->optimal_with_valid_online, summary->solved_optimally);
  EXPECT_GT(summary->mean_speedup, 0.0);
}

OptGapRow Row(exact::SolveStatus status, bool valid, double ratio, double gpu_ratio,
              double exact_seconds) {
  OptGapRow row;
  row.status = status;
  row.exact_seconds = exact_seconds;
  row.online.valid = valid;
  row.online.quality_ratio = ratio;
  row.online.seconds = 0.001;
  row.gpu_ratio = gpu_ratio;
  return row;
}

TEST(OptGapTest, AMissCountsZeroAndUnsolvedInstancesAreLeftOut) {
  using exact::SolveStatus;
  std::vector<OptGapRow> rows = {
      Row(SolveStatus::kOptimal, true, 0.8, 0.5, 2.0),
      Row(SolveStatus::kOptimal, false, 0.0, 1.0, 1.0),     // the online schedule misses
      Row(SolveStatus::kFeasible, true, 0.0, 0.0, 20.0),    // not proven optimal
      Row(SolveStatus::kTimedOut, false, 0.0, 0.0, 20.0)};  // no schedule
  const OptGapSummary summary = SummarizeOptGap(rows);
  EXPECT_EQ(summary.instances, 4);
  EXPECT_EQ(summary.solved_optimally, 2);
  EXPECT_EQ(summary.not_solved, 2);
  EXPECT_EQ(summary.online_misses, 1);
  EXPECT_EQ(summary.optimal_with_valid_online, 1);
  EXPECT_DOUBLE_EQ(summary.mean_quality_ratio, (0.8 + 0.0) / 2);
  EXPECT_DOUBLE_EQ(summary.min_quality_ratio, 0.8);
  EXPECT_DOUBLE_EQ(summary.mean_gpu_ratio, (0.5 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(summary.mean_speedup, (2000.0 + 1000.0) / 2);
  EXPECT_EQ(summary.rows.size(), 4u);

  // Nothing solved: every mean is 0, and the counts say why.
  const OptGapSummary none = SummarizeOptGap({rows[2], rows[3]});
  EXPECT_EQ(none.solved_optimally, 0);
  EXPECT_EQ(none.not_solved, 2);
  EXPECT_EQ(none.mean_quality_ratio, 0.0);
  EXPECT_EQ(none.mean_gpu_ratio, 0.0);
  EXPECT_EQ(none.mean_speedup, 0.0);
}

}  // namespace
}  // namespace gshare
