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
    if (row.status == exact::SolveStatus::kOptimal && row.online_valid) {
      // The optimum is never worse than a valid online schedule.
      EXPECT_LE(row.quality_ratio, 1.0 + 1e-9) << "instance " << row.index;
      EXPECT_GT(row.quality_ratio, 0.0);
    }
  }
  EXPECT_GT(summary->mean_speedup, 1.0);
}

}  // namespace
}  // namespace gshare
