// The gshare policy on cases checked by hand, and its safety on random workloads.
#include <gtest/gtest.h>

#include "gshare/common/random.h"
#include "gshare/sim/sim_test_util.h"
#include "gshare/sim/simulator.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::AddRequest;
using testing::MakeFunction;
using testing::RoundGpu;

SimulationOptions ExactOptions() {
  SimulationOptions options;
  options.policy.instance_start = Duration::zero();
  options.policy.pool_idle = seconds(10);
  options.policy.gshare.initial_margin = 0;  // predictions equal the profile
  options.policy.gshare.adapt_margin = false;
  return options;
}

TEST(GSharePolicyTest, TwoFunctionsOnOneGpuWhoWaitsAndWhoSwaps) {
  // a: 10 MB model (restore 1 + 10 ms), 10 ms run; b: 20 MB (1 + 20 ms), 20 ms run; SLO 100 ms.
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(MakeFunction("a", 10'000'000, 256 * kMiB, milliseconds(10), milliseconds(100)));
  w.functions.push_back(MakeFunction("b", 20'000'000, 256 * kMiB, milliseconds(20), milliseconds(100)));
  AddRequest(w, 0, 0.000);  // a0
  AddRequest(w, 1, 0.001);  // b0
  AddRequest(w, 0, 0.005);  // a1
  auto report = Simulate(w, "gshare", ExactOptions());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  // a0: first GPU, restore 0-11 ms, runs 11-21 ms.
  // b0: a new slice on the same GPU (best fit, meets its deadline): its restore queues behind
  //     a's on the copy engine (11-32 ms); it runs after a1, at 32-52 ms.
  // a1: waits for a's slice (lazy, no swap): runs 21-31 ms.
  ASSERT_EQ(report->functions.size(), 2u);
  EXPECT_EQ(report->peak_gpus, 1);
  EXPECT_EQ(report->swaps, 2u);  // one per function: a1 never swaps
  EXPECT_NEAR(report->functions[0].latency.max_ms, 26.0, 1e-6);  // a1: 5 -> 31 ms
  EXPECT_NEAR(report->functions[0].latency.p50_ms, 21.0, 1e-6);  // a0: 0 -> 21 ms
  EXPECT_NEAR(report->functions[1].latency.p50_ms, 51.0, 1e-6);  // b0: 1 -> 52 ms
  EXPECT_DOUBLE_EQ(report->slo_attainment, 1.0);
  EXPECT_NEAR(report->horizon_seconds, 0.052, 1e-9);
  EXPECT_NEAR(report->gpu_seconds, 0.052, 1e-9);
  // Slices are 256 MiB each: a from 0, b from 1 ms, to the horizon at 52 ms.
  EXPECT_NEAR(report->vgpu_gib_seconds, 0.25 * (0.052 + 0.051), 1e-9);
}

TEST(GSharePolicyTest, EvictsTheLeastRecentlyUsedIdleSliceWhenMemoryIsShort) {
  // Three 16 GiB functions, one 40 GiB GPU holds two: x, y, z, x swaps four times on one GPU.
  Workload w;
  w.gpu = RoundGpu();
  for (const char* name : {"x", "y", "z"}) {
    w.functions.push_back(MakeFunction(name, 1'000'000, 16 * kGiB, milliseconds(10), seconds(1)));
  }
  AddRequest(w, 0, 0.0);
  AddRequest(w, 1, 1.0);
  AddRequest(w, 2, 2.0);
  AddRequest(w, 0, 3.0);
  for (const char* policy : {"gshare", "gshare-no-fast-swap"}) {
    auto report = Simulate(w, policy, ExactOptions());
    ASSERT_TRUE(report.ok()) << policy << ": " << report.status().ToString();
    EXPECT_EQ(report->swaps, 4u) << policy;
    EXPECT_EQ(report->peak_gpus, 1) << policy;
    EXPECT_DOUBLE_EQ(report->slo_attainment, 1.0) << policy;
  }
  auto fast = Simulate(w, "gshare", ExactOptions());
  auto slow = Simulate(w, "gshare-no-fast-swap", ExactOptions());
  // z at 2 s: a restore of 1 + 1 ms, then 10 ms: 12 ms with fast swap; the checkpoint of x
  // (1 ms over the link) comes first without it.
  EXPECT_NEAR(fast->functions[2].latency.max_ms, 12.0, 1e-6);
  EXPECT_NEAR(slow->functions[2].latency.max_ms, 13.0, 1e-6);
}

TEST(GSharePolicyTest, BatchesRequestsThatWaitForTheSameSlice) {
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(
      MakeFunction("a", 10'000'000, 256 * kMiB, milliseconds(10), milliseconds(100), /*max_batch=*/4));
  AddRequest(w, 0, 0.000);
  AddRequest(w, 0, 0.002);
  AddRequest(w, 0, 0.004);
  auto report = Simulate(w, "gshare", ExactOptions());
  ASSERT_TRUE(report.ok());
  // All three wait for the restore (0-11 ms) and run as one batch of three (11-21 ms).
  EXPECT_NEAR(report->latency.max_ms, 21.0, 1e-6);
  EXPECT_NEAR(report->latency.p50_ms, 19.0, 1e-6);
  EXPECT_EQ(report->swaps, 1u);
}

// Random functions and arrivals on a small (8 GiB) GPU type, so memory is short.
Workload CrowdedWorkload(std::uint64_t seed) {
  Random rng(seed);
  Workload w;
  w.gpu = RoundGpu();
  w.gpu.memory_bytes = 8 * kGiB;
  w.gpu.h2d_bytes_per_second = 16e9;
  for (int f = 0; f < 30; ++f) {
    const auto model = static_cast<std::uint64_t>(rng.Uniform(10e6, 3e9));
    const std::uint64_t memory = (model / (128 * kMiB) + 1) * 128 * kMiB;
    const Duration exec = FromMilliseconds(rng.Uniform(1, 30));
    const Duration restore = w.gpu.restore_overhead + TransferTime(model, w.gpu.h2d_bytes_per_second);
    w.functions.push_back(MakeFunction("f" + std::to_string(f), model, memory, exec,
                                       (restore + exec) * 2, 1 + static_cast<int>(rng.Below(4))));
  }
  std::vector<std::pair<double, FunctionId>> arrivals;
  for (FunctionId f = 0; f < 30; ++f) {
    const double rate = std::pow(10.0, rng.Uniform(-1.5, 1.5));
    for (double t = rng.Exponential(rate); t < 300; t += rng.Exponential(rate)) arrivals.emplace_back(t, f);
  }
  std::sort(arrivals.begin(), arrivals.end());
  for (const auto& [t, f] : arrivals) AddRequest(w, f, t);
  return w;
}

TEST(GSharePolicyTest, NeverExceedsMemoryAndServesEveryRequest) {
  // The simulated executor fails the run on any reservation beyond a GPU's memory, on a run of a
  // function that is not resident, and on an unserved request.
  for (std::uint64_t seed : {1, 2, 3}) {
    const Workload w = CrowdedWorkload(seed);
    for (const char* policy : {"gshare", "fifo", "gshare-no-lazy", "gshare-no-fast-swap"}) {
      auto report = Simulate(w, policy, SimulationOptions{});
      ASSERT_TRUE(report.ok()) << policy << " seed " << seed << ": " << report.status().ToString();
      EXPECT_EQ(report->requests, w.requests.size());
      EXPECT_GT(report->swaps, 0u);
    }
  }
}

TEST(GSharePolicyTest, ARequestFeasibleAloneMeetsItsDeadlineOnAnIdleGpu) {
  // A GPU is in the pool (warmed by function w at 0 s) and idle when f's only request arrives;
  // the SLO leaves exactly the restore and the run, plus 1 us.
  Random rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    Workload w;
    w.gpu = RoundGpu();
    w.functions.push_back(MakeFunction("warm", 1'000'000, 128 * kMiB, milliseconds(1), seconds(1)));
    const auto model = static_cast<std::uint64_t>(rng.Uniform(1e6, 5e9));
    const Duration exec = FromMilliseconds(rng.Uniform(0.5, 50));
    const Duration restore = w.gpu.restore_overhead + TransferTime(model, w.gpu.h2d_bytes_per_second);
    w.functions.push_back(MakeFunction("f", model, (model / (128 * kMiB) + 1) * 128 * kMiB, exec,
                                       restore + exec + std::chrono::microseconds(1)));
    AddRequest(w, 0, 0.0);
    AddRequest(w, 1, 1.0);
    SimulationOptions options;
    options.policy.instance_start = Duration::zero();
    auto report = Simulate(w, "gshare", options);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_DOUBLE_EQ(report->functions[1].slo_attainment, 1.0) << "trial " << trial;
  }
}

}  // namespace
}  // namespace gshare
