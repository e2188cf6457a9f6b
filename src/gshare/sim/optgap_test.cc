#include "gshare/sim/optgap.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "gshare/sched/exact/test_instances.h"

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
  // No slice: one is made at once (work-conserving); one residency: restore 0-11 ms, runs 11-21
  // and, the second request waiting for the slice, 21-31 ms; 256 MiB held for 31 ms.
  ASSERT_EQ(online->schedule.residencies.size(), 1u);
  EXPECT_EQ(online->schedule.residencies[0].restore_start, AtSeconds(0.0));
  EXPECT_EQ(online->schedule.residencies[0].end, AtSeconds(0.031));
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
  // The fixed hold keeps a slice after its run (gshare's cost-aware hold releases a slice of a
  // function seen once at once).
  auto online = ScheduleOnline(instance, "gshare-fixed-hold");
  ASSERT_TRUE(online.ok()) << online.status().ToString();
  EXPECT_TRUE(online->validity.ok()) << online->validity.ToString();
  ASSERT_EQ(online->schedule.residencies.size(), 2u);
  // f: no GPU yet, so restored at once: 0-11 ms, run to 21; then idle for a restore's time (ski
  // rental: too few gaps seen to size the hold from them) and released at 32 ms: held 32 ms, not
  // the 21 ms it was active.
  const auto& f = online->schedule.residencies[0];
  EXPECT_EQ(f.restore_start, AtSeconds(0.0));
  EXPECT_EQ(online->schedule.executions[0].end, AtSeconds(0.021));
  EXPECT_EQ(f.end, AtSeconds(0.032));
  // g: restore 500-511 (a function seen once is restored at once: no request would join a
  // deferred restore), run to 521 ms, the last completion: the instance ends there, so the slice
  // counts until 521 ms, 21 ms.
  const auto& g = online->schedule.residencies[1];
  EXPECT_EQ(g.restore_start, AtSeconds(0.5));
  EXPECT_EQ(g.end, AtSeconds(0.521));
  // 0.25 GiB x (32 + 21) ms.
  EXPECT_NEAR(online->objective, 0.25 * 0.053, 1e-9);
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

// One GPU; a (2 slices, restore 5 ms, run 50 ms) is called at 0 with a deadline at 200 ms, b (2
// slices, restore 5 ms, run 10 ms) at 1 ms with a deadline at `b_deadline_ms`.
exact::ExactInstance LongThenShort(double b_deadline_ms) {
  using exact::fixtures::RequestAt;
  using exact::fixtures::RoundFunction;
  exact::ExactInstance instance = exact::fixtures::RoundInstance(1);
  instance.functions = {RoundFunction("a", 2, 50), RoundFunction("b", 2, 10)};
  instance.requests = {RequestAt(0, 0, 200), RequestAt(1, 1, b_deadline_ms)};
  return instance;
}

TEST(OptGapTest, AnOnlineMissCountsZeroInTheMeanAndOneInTheMisses) {
  using exact::fixtures::SliceMs;
  // The online schedule here is the best-fit greedy's, which binds each request at its release:
  // a restores [0, 5) and runs [5, 55); b restores [5, 10) and runs after a, [55, 65).
  OptGapOptions options;
  options.policy = std::string(kBestFit);
  // Deadline 200: valid, a held 55 ms and b 60 ms. The optimum restores b at 50 (held 15 ms):
  // a can be held no less than its restore and run (55 ms), nor b (15 ms).
  auto valid = RunOptGapInstance(LongThenShort(200), options);
  ASSERT_TRUE(valid.ok()) << valid.status().ToString();
  ASSERT_EQ(valid->status, exact::SolveStatus::kOptimal);
  EXPECT_NEAR(valid->exact_objective, SliceMs(2, 70), 1e-12);
  EXPECT_TRUE(valid->online.valid) << valid->online.violation;
  EXPECT_NEAR(valid->online.objective, SliceMs(2, 55) + SliceMs(2, 60), 1e-12);
  EXPECT_NEAR(valid->online.quality_ratio, 70.0 / 115.0, 1e-9);
  EXPECT_EQ(valid->exact_gpus, 1);
  EXPECT_EQ(valid->online.gpus, 1);
  EXPECT_DOUBLE_EQ(valid->gpu_ratio, 1.0);
  // Deadline 30: b ends at 65 and misses. The optimum still holds 70 ms: b restores at 1 and
  // runs [6, 16), a restores [11, 16) and runs [16, 66).
  auto missed = RunOptGapInstance(LongThenShort(30), options);
  ASSERT_TRUE(missed.ok()) << missed.status().ToString();
  ASSERT_EQ(missed->status, exact::SolveStatus::kOptimal);
  EXPECT_NEAR(missed->exact_objective, SliceMs(2, 70), 1e-12);
  EXPECT_FALSE(missed->online.valid);
  EXPECT_EQ(missed->online.violation.rfind("deadline:", 0), 0u) << missed->online.violation;
  EXPECT_EQ(missed->online.quality_ratio, 0.0);

  const OptGapSummary summary = SummarizeOptGap({*valid, *missed});
  EXPECT_EQ(summary.solved_optimally, 2);
  EXPECT_EQ(summary.not_solved, 0);
  EXPECT_EQ(summary.online_misses, 1);
  EXPECT_EQ(summary.optimal_with_valid_online, 1);
  EXPECT_NEAR(summary.mean_quality_ratio, (70.0 / 115.0 + 0.0) / 2, 1e-9);
  EXPECT_NEAR(summary.min_quality_ratio, 70.0 / 115.0, 1e-9);
  // The baselines are scored by the same rules: best-fit's figures are the policy's here.
  ASSERT_EQ(summary.baselines.size(), 2u);
  EXPECT_EQ(summary.baselines[0].name, "fifo");
  EXPECT_EQ(summary.baselines[1].name, "best-fit");
  EXPECT_NEAR(summary.baselines[1].mean_quality_ratio, summary.mean_quality_ratio, 1e-12);
  EXPECT_EQ(summary.baselines[1].online_misses, 1);
  // The aggregate is over the valid instance only: 70 / 115 here too.
  EXPECT_NEAR(summary.aggregate_quality_ratio, 70.0 / 115.0, 1e-9);
  EXPECT_NEAR(summary.baselines[1].aggregate_quality_ratio, 70.0 / 115.0, 1e-9);

  // Where the GiB-seconds go. Best-fit's valid schedule: a held [0, 55): restore 5, run 50; b
  // held [5, 65): restore 5, idle 45 ms waiting for a's run, run 10. The optimum: a [0, 55) the
  // same; b restored at 50, run [55, 65): restore 5, idle 0, run 10.
  const HeldBreakdown& online = valid->online.held;
  EXPECT_NEAR(online.restore, SliceMs(2, 10), 1e-12);
  EXPECT_NEAR(online.execution, SliceMs(2, 60), 1e-12);
  EXPECT_NEAR(online.idle_before_first, SliceMs(2, 45), 1e-12);
  EXPECT_NEAR(online.between_runs + online.after_last, 0.0, 1e-12);
  EXPECT_NEAR(online.total(), valid->online.objective, 1e-12);
  EXPECT_NEAR(valid->exact_held.total(), valid->exact_objective, 1e-12);
  EXPECT_NEAR(valid->exact_held.idle_before_first, 0.0, 1e-12);
  EXPECT_NEAR(summary.held.total(), valid->online.objective, 1e-12);  // the valid instance only
  EXPECT_NEAR(summary.optimum_held.total(), valid->exact_objective, 1e-12);
}

TEST(OptGapTest, HeldBreakdownSplitsEachResidencyAroundItsRuns) {
  using exact::fixtures::SliceMs;
  // One residency of a (2 slices, 5 ms restore, 50 ms runs) held [0, 200) serving runs at
  // [10, 60) and [100, 150): restore 5, idle before 5, runs 100, between 40, after 50.
  exact::ExactInstance instance = LongThenShort(200);
  exact::ExactSchedule schedule;
  schedule.residencies = {{0, 0, TimePoint{}, AtSeconds(0.2)}};
  schedule.executions = {{0, AtSeconds(0.1), AtSeconds(0.15)},
                         {0, AtSeconds(0.01), AtSeconds(0.06)}};
  const HeldBreakdown held = BreakDownHeld(instance, schedule);
  EXPECT_NEAR(held.restore, SliceMs(2, 5), 1e-12);
  EXPECT_NEAR(held.idle_before_first, SliceMs(2, 5), 1e-12);
  EXPECT_NEAR(held.execution, SliceMs(2, 100), 1e-12);
  EXPECT_NEAR(held.between_runs, SliceMs(2, 40), 1e-12);
  EXPECT_NEAR(held.after_last, SliceMs(2, 50), 1e-12);
  EXPECT_NEAR(held.total(), exact::ScheduleObjective(instance, schedule), 1e-12);
  // A residency that serves nothing is all restore and idle before a first run.
  schedule.executions.clear();
  const HeldBreakdown unused = BreakDownHeld(instance, schedule);
  EXPECT_NEAR(unused.idle_before_first, SliceMs(2, 195), 1e-12);
  EXPECT_NEAR(unused.total(), SliceMs(2, 200), 1e-12);
}

TEST(OptGapTest, JsonHasEveryContractField) {
  OptGapOptions options;
  options.instances = 2;
  options.requests = 5;
  options.gpus = 2;
  options.exact.time_limit = std::chrono::seconds(20);
  auto summary = RunOptGap(options, exact::SampleFunctions(), exact::SampleGpu());
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  const auto doc = nlohmann::json::parse(OptGapJson(options, *summary));
  for (const char* field : {"instances", "solved_optimally", "not_solved", "online_misses",
                            "optimal_with_valid_online", "seed", "requests", "gpus"}) {
    ASSERT_TRUE(doc.contains(field)) << field;
    EXPECT_TRUE(doc[field].is_number_integer()) << field;
  }
  for (const char* field : {"mean_quality_ratio", "min_quality_ratio", "mean_gpu_ratio",
                            "mean_speedup", "time_limit_seconds"}) {
    ASSERT_TRUE(doc.contains(field)) << field;
    ASSERT_TRUE(doc[field].is_number_float()) << field;
    EXPECT_TRUE(std::isfinite(doc[field].get<double>())) << field;
  }
  EXPECT_EQ(doc["instances"], 2);
  EXPECT_EQ(doc["policy"], "gshare");
  ASSERT_TRUE(doc["baselines"].is_object());
  EXPECT_EQ(doc["baselines"].size(), 2u);
  for (const char* name : {"fifo", "best-fit"}) {
    ASSERT_TRUE(doc["baselines"].contains(name)) << name;
    const auto& b = doc["baselines"][name];
    ASSERT_TRUE(b["mean_quality_ratio"].is_number_float()) << name;
    EXPECT_TRUE(std::isfinite(b["mean_quality_ratio"].get<double>())) << name;
    EXPECT_TRUE(b["online_misses"].is_number_integer()) << name;
    EXPECT_TRUE(std::isfinite(b["aggregate_quality_ratio"].get<double>())) << name;
    EXPECT_TRUE(b["held_gib_s"].contains("after_last_run")) << name;
    EXPECT_TRUE(b["optimum_held_gib_s"].contains("total")) << name;
  }
  EXPECT_FALSE(doc.contains("sizes"));  // only with --sizes
  OptGapSummary with_sizes = *summary;
  with_sizes.sizes = {SizeReach{6, 2, 5, 4, 1.5, 60}};
  const auto sized = nlohmann::json::parse(OptGapJson(options, with_sizes));
  ASSERT_EQ(sized["sizes"].size(), 1u);
  EXPECT_EQ(sized["sizes"][0]["requests"], 6);
  EXPECT_EQ(sized["sizes"][0]["gpus"], 2);
  EXPECT_EQ(sized["sizes"][0]["solved_optimally"], 4);
  EXPECT_DOUBLE_EQ(sized["sizes"][0]["mean_solve_seconds"].get<double>(), 1.5);
  ASSERT_EQ(doc["rows"].size(), 2u);
  for (const auto& row : doc["rows"]) {
    for (const char* field :
         {"index", "seed", "exact_status", "exact_objective_gib_s", "exact_seconds", "exact_gpus",
          "online_objective_gib_s", "online_valid", "online_seconds", "online_gpus",
          "quality_ratio", "gpu_ratio", "baselines"}) {
      EXPECT_TRUE(row.contains(field)) << field;
    }
    EXPECT_TRUE(row["baselines"].contains("fifo"));
    EXPECT_TRUE(row["baselines"].contains("best-fit"));
  }
}

TEST(OptGapTest, SizeLadderStopsAtTheFirstSizeNotAllProvenOptimal) {
  OptGapOptions options;
  options.gpus = 2;
  options.exact.time_limit = std::chrono::seconds(20);
  // No branching (CBC's node limit, not a clock): an instance is proven optimal only where the
  // root node closes the gap, as it does on tiny instances and not on larger ones.
  options.exact.cbc_arguments = "-maxNodes 0";
  std::vector<std::pair<int, int>> progress;
  auto reach = RunSizeLadder(options, {3, 24, 32}, 2, exact::SampleFunctions(), exact::SampleGpu(),
                             [&](int requests, int done, int total) {
                               EXPECT_EQ(total, 2);
                               progress.emplace_back(requests, done);
                             });
  ASSERT_TRUE(reach.ok()) << reach.status().ToString();
  ASSERT_EQ(reach->size(), 2u);  // 32 is not tried
  EXPECT_EQ((*reach)[0].requests, 3);
  EXPECT_EQ((*reach)[0].gpus, 2);
  EXPECT_EQ((*reach)[0].instances, 2);
  EXPECT_EQ((*reach)[0].solved_optimally, 2);
  EXPECT_EQ((*reach)[1].requests, 24);
  EXPECT_LT((*reach)[1].solved_optimally, 2);
  EXPECT_DOUBLE_EQ((*reach)[1].time_limit_seconds, 20.0);
  const std::vector<std::pair<int, int>> expected = {{3, 1}, {3, 2}, {24, 1}, {24, 2}};
  EXPECT_EQ(progress, expected);

  EXPECT_EQ(RunSizeLadder(options, {8, 8}, 2, exact::SampleFunctions(), exact::SampleGpu())
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      RunSizeLadder(options, {}, 2, exact::SampleFunctions(), exact::SampleGpu()).status().code(),
      StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gshare
