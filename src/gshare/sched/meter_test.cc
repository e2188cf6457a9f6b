#include "gshare/sched/meter.h"

#include <gtest/gtest.h>

#include "gshare/sched/exec_estimator.h"
#include "gshare/sched/function_registry.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;

GpuType Priced(std::string name, double usd_per_hour) {
  GpuType gpu;
  gpu.name = std::move(name);
  gpu.memory_bytes = kGiB;
  gpu.price_per_hour_usd = usd_per_hour;
  return gpu;
}

Request At(FunctionId function, double arrival, double slo) {
  Request r;
  r.function = function;
  r.arrival = AtSeconds(arrival);
  r.deadline = AtSeconds(arrival + slo);
  return r;
}

TEST(MeterTest, IntegratesWithinTheWindowAndPricesEachGpuType) {
  const std::vector<GpuType> types = {Priced("a", 3600), Priced("b", 7200)};  // 1 and 2 USD/s
  Meter meter(types, AtSeconds(10));
  meter.GpuAcquired(AtSeconds(0), 0);  // type a held 0..30: 20 s in the window
  meter.GpuAcquired(AtSeconds(5), 1);  // type b held 5..15: 5 s in the window
  meter.Reserved(AtSeconds(5), 0, 100);
  meter.Restored(AtSeconds(5), 0, 1000);  // before the window: not counted
  meter.GpuReleased(AtSeconds(15), 1);
  meter.Restored(AtSeconds(20), 0, 500);
  meter.Active(AtSeconds(20), 0, 100);
  meter.Active(AtSeconds(25), 0, -100);
  meter.Answered(AtSeconds(20), At(0, 9, 5), AnswerOutcome::kOk);     // before the window: left out
  meter.Answered(AtSeconds(21), At(0, 20, 0.5), AnswerOutcome::kOk);  // late
  meter.Answered(AtSeconds(22), At(0, 21.9, 0.5), AnswerOutcome::kOk);
  meter.Answered(AtSeconds(23), At(0, 22, 0.5), AnswerOutcome::kFailed);
  meter.Answered(AtSeconds(24), At(0, 23, 0.5), AnswerOutcome::kNeverRan);
  meter.Freeze(AtSeconds(30));
  meter.GpuReleased(AtSeconds(40), 0);  // after the freeze: ignored
  const MeterTotals t = meter.Totals(AtSeconds(50));
  EXPECT_EQ(t.horizon, AtSeconds(30));
  EXPECT_DOUBLE_EQ(t.gpu_seconds, 25);
  EXPECT_DOUBLE_EQ(t.cost_usd, 20 * 1 + 5 * 2);
  EXPECT_EQ(t.peak_gpus, 2);
  EXPECT_DOUBLE_EQ(t.reserved_byte_seconds, 100 * 20);
  ASSERT_EQ(t.functions.size(), 1u);
  EXPECT_DOUBLE_EQ(t.functions[0].active_byte_seconds, 100 * 5);
  EXPECT_EQ(t.restores, 1u);
  EXPECT_EQ(t.restore_bytes, 500u);
  EXPECT_EQ(t.requests, 4u);
  EXPECT_EQ(t.met, 1u);
  EXPECT_EQ(t.failed, 2u);     // the one that failed and the one that never ran
  EXPECT_EQ(t.never_ran, 1u);  // counted beside the misses
  EXPECT_EQ(t.functions[0].never_ran, 1u);
  EXPECT_DOUBLE_EQ(t.slo_attainment(), 1.0 / 4);
  EXPECT_EQ(t.functions[0].latency_ms.size(), 2u);  // the failed ones have no latency
  // The timeline runs from time zero to the freeze.
  ASSERT_FALSE(meter.gpu_timeline().empty());
  EXPECT_EQ(meter.gpu_timeline().front(), (std::pair<TimePoint, int>{AtSeconds(0), 1}));
  EXPECT_EQ(meter.gpu_timeline().back(), (std::pair<TimePoint, int>{AtSeconds(30), 1}));
}

TEST(MeterTest, ThePeakCountsOnlyTheWindow) {
  const std::vector<GpuType> types = {Priced("a", 1)};
  Meter meter(types, AtSeconds(10));
  for (int i = 0; i < 5; ++i) meter.GpuAcquired(AtSeconds(1), 0);
  for (int i = 0; i < 4; ++i) meter.GpuReleased(AtSeconds(2), 0);
  meter.GpuAcquired(AtSeconds(12), 0);
  EXPECT_EQ(meter.Totals(AtSeconds(20)).peak_gpus, 2);
}

TEST(ExecTimeEstimatorTest, StartsAtTheProfileAndLearnsFromRuns) {
  ResolvedFunction f;
  f.name = "f";
  f.max_batch = 4;
  f.exec_by_batch = {milliseconds(10), milliseconds(12), milliseconds(14), milliseconds(16)};
  FunctionRegistry registry({f});
  ExecTimeEstimator estimator(&registry);
  EXPECT_EQ(estimator.Estimate(0, 1), milliseconds(10));
  EXPECT_EQ(estimator.Estimate(0, 9), milliseconds(16));  // clamped to max_batch
  // Runs that take exactly the profile leave it exactly.
  for (int i = 0; i < 100; ++i) estimator.Observe(0, 2, milliseconds(12));
  EXPECT_EQ(estimator.Estimate(0, 2), milliseconds(12));
  // Slower runs move the estimate a quarter of the way each time, per batch size.
  estimator.Observe(0, 1, milliseconds(30));
  EXPECT_EQ(estimator.Estimate(0, 1), milliseconds(15));
  for (int i = 0; i < 60; ++i) estimator.Observe(0, 1, milliseconds(30));
  EXPECT_NEAR(static_cast<double>(estimator.Estimate(0, 1).count()), 30e6, 10);
  EXPECT_EQ(estimator.Estimate(0, 3), milliseconds(14));  // not observed: still the profile
  estimator.Forget(0);
  EXPECT_EQ(estimator.Estimate(0, 1), milliseconds(10));
}

TEST(FunctionRegistryTest, IdsAreNeverReusedAndRemovalIsChecked) {
  FunctionRegistry registry;
  ResolvedFunction f;
  f.name = "a";
  EXPECT_EQ(registry.Add(f), 0u);
  f.name = "b";
  EXPECT_EQ(registry.Add(f), 1u);
  EXPECT_TRUE(registry.Remove(0).ok());
  EXPECT_FALSE(registry.active(0));
  EXPECT_TRUE(registry.active(1));
  EXPECT_EQ(registry.Get(0).name, "a");  // kept for runs in flight
  EXPECT_EQ(registry.Remove(0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry.Remove(7).code(), StatusCode::kNotFound);
  f.name = "c";
  EXPECT_EQ(registry.Add(f), 2u);
}

}  // namespace
}  // namespace gshare
