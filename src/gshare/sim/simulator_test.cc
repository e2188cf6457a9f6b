#include "gshare/sim/simulator.h"

#include <gtest/gtest.h>

#include "gshare/common/random.h"
#include "gshare/sim/report.h"
#include "gshare/sim/sim_test_util.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;
using testing::AddRequest;
using testing::MakeFunction;
using testing::RoundGpu;

// Twenty functions of mixed sizes with bursty Poisson arrivals drawn from `seed`.
Workload RandomWorkload(std::uint64_t seed) {
  Random rng(seed);
  Workload w;
  w.gpu = RoundGpu();
  for (int f = 0; f < 20; ++f) {
    const auto model = static_cast<std::uint64_t>(rng.Uniform(20e6, 2e9));
    const auto memory = (model / (128 * kMiB) + 2) * 128 * kMiB;
    const Duration exec = FromMilliseconds(rng.Uniform(1, 40));
    w.functions.push_back(MakeFunction("f" + std::to_string(f), model, memory, exec, exec * 3, 4));
  }
  std::vector<std::pair<double, FunctionId>> arrivals;
  for (FunctionId f = 0; f < 20; ++f) {
    const double rate = std::pow(10.0, rng.Uniform(-2, 1.5));
    for (double t = rng.Exponential(rate); t < 600; t += rng.Exponential(rate)) {
      arrivals.emplace_back(t, f);
    }
  }
  std::sort(arrivals.begin(), arrivals.end());
  for (const auto& [t, f] : arrivals) AddRequest(w, f, t);
  return w;
}

TEST(SimulatorTest, SameInputsGiveAByteIdenticalSummary) {
  const Workload a = RandomWorkload(7);
  const Workload b = RandomWorkload(7);
  SimulationOptions options;
  std::vector<PolicyReport> ra, rb;
  for (const char* policy : {"keepalive", "faaswap"}) {
    auto x = Simulate(a, policy, options);
    auto y = Simulate(b, policy, options);
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    ra.push_back(*x);
    rb.push_back(*y);
  }
  RunInfo info{7, "random", "test", "round"};
  const std::string ja = SummaryJson(info, a, ra);
  EXPECT_EQ(ja, SummaryJson(info, b, rb));
  EXPECT_GT(ra[0].requests, 100u);
  // A different seed gives a different workload and summary.
  const Workload c = RandomWorkload(8);
  auto z = Simulate(c, "keepalive", options);
  ASSERT_TRUE(z.ok());
  EXPECT_NE(ja, SummaryJson(info, c, {*z, rb[1]}));
}

TEST(SimulatorTest, EveryRequestCompletesAfterItArrives) {
  const Workload w = RandomWorkload(3);
  for (const char* policy : {"keepalive", "faaswap"}) {
    auto report = Simulate(w, policy, SimulationOptions{});
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->requests, w.requests.size());
    // Latency is never below the fastest possible execution (1 ms in this workload).
    EXPECT_GE(report->sorted_latency_ms.front(), 1.0f);
    EXPECT_GE(report->slo_attainment, 0.0);
    EXPECT_LE(report->slo_attainment, 1.0);
    EXPECT_GE(report->gpu_seconds, 0.0);
    EXPECT_LE(report->avg_gpus, report->peak_gpus);
  }
}

TEST(SimulatorTest, SlicesHoldLessGpuMemoryThanWholeGpus) {
  const Workload w = RandomWorkload(11);
  auto keepalive = Simulate(w, "keepalive", SimulationOptions{});
  ASSERT_TRUE(keepalive.ok());
  for (const char* policy : {"faaswap", "gshare"}) {
    auto pooled = Simulate(w, policy, SimulationOptions{});
    ASSERT_TRUE(pooled.ok()) << policy;
    EXPECT_LT(pooled->vgpu_gib_seconds, keepalive->vgpu_gib_seconds) << policy;
  }
}

TEST(PercentileTest, NearestRank) {
  const std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(Percentile(v, 50), 5);
  EXPECT_EQ(Percentile(v, 95), 10);
  EXPECT_EQ(Percentile(v, 10), 1);
  EXPECT_EQ(Percentile({}, 50), 0);
}

}  // namespace
}  // namespace gshare

namespace gshare {
namespace {

TEST(ComputeGpuSecondsTest, EachRequestCostsItsFunctionsMostEfficientBatchShare) {
  Workload w;
  w.gpu = testing::RoundGpu();
  ResolvedFunction f =
      testing::MakeFunction("f", 1'000'000, 128 * kMiB, milliseconds(10), milliseconds(100), 4);
  // Batches of 1..4 take 10, 16, 18 and 40 ms: per request 10, 8, 6 and 10 ms; 6 ms is the best.
  f.exec_by_batch = {milliseconds(10), milliseconds(16), milliseconds(18), milliseconds(40)};
  w.functions.push_back(f);
  for (double t : {0.5, 1.0, 2.0, 3.0}) testing::AddRequest(w, 0, t);
  EXPECT_NEAR(ComputeGpuSeconds(w, TimePoint{}), 4 * 0.006, 1e-12);
  // The window leaves out what arrived before its start.
  EXPECT_NEAR(ComputeGpuSeconds(w, AtSeconds(1.0)), 3 * 0.006, 1e-12);
  // The trace's durations and the execution noise scale a request as they scale its runs.
  w.exec_times = {milliseconds(20), Duration::zero(), Duration::zero(), Duration::zero()};
  w.exec_factors = {1.0f, 0.5f, 1.0f, 1.0f};
  EXPECT_NEAR(ComputeGpuSeconds(w, TimePoint{}), 0.012 + 0.003 + 0.006 + 0.006, 1e-9);
}

TEST(ComputeGpuSecondsTest, TheReportsUtilisationIsItOverTheGpuSeconds) {
  Workload w;
  w.gpu = testing::RoundGpu();
  w.functions.push_back(
      testing::MakeFunction("f", 1'000'000, 128 * kMiB, milliseconds(10), milliseconds(500)));
  for (int i = 0; i < 20; ++i) testing::AddRequest(w, 0, 0.1 * i);
  auto report = Simulate(w, "gshare", SimulationOptions{});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_NEAR(report->compute_gpu_seconds, 20 * 0.010, 1e-12);
  ASSERT_GT(report->gpu_seconds, 0);
  EXPECT_DOUBLE_EQ(report->utilisation, report->compute_gpu_seconds / report->gpu_seconds);
  EXPECT_LT(report->utilisation, 1.0);
}

}  // namespace
}  // namespace gshare
