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

// Predictions from the learned mean with a fixed 40% margin, the fixed hold and eager first
// restores, so that the schedules can be worked by hand; the tests of the quantile predictions,
// the cost-aware hold and the lazy first restore (GShareRulesTest) turn each on.
SimulationOptions HandOptions(int max_gpus = 0) {
  SimulationOptions options;
  options.policy.instance_start = Duration::zero();
  options.policy.pool_idle = seconds(10);
  options.policy.max_gpus = max_gpus;
  options.policy.gshare.exec_quantile = 0.0;
  options.policy.gshare.safety_margin = 0.4;
  options.policy.gshare.adapt_margin = false;
  options.policy.gshare.cost_aware_hold = false;
  options.policy.gshare.lazy_first_restore = false;
  return options;
}

TEST(GSharePolicyTest, TwoFunctionsOnOneGpuWhoWaitsAndWhoSwaps) {
  // a: 10 MB model (restore 1 + 10 = 11 ms), 10 ms run; b: 20 MB (21 ms), 20 ms run; SLO 100 ms.
  // Predicted runs are 40% longer (14 and 28 ms), safety 40% of a restore (4.4 and 8.4 ms).
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(
      MakeFunction("a", 10'000'000, 256 * kMiB, milliseconds(10), milliseconds(100)));
  w.functions.push_back(
      MakeFunction("b", 20'000'000, 256 * kMiB, milliseconds(20), milliseconds(100)));
  AddRequest(w, 0, 0.000);  // a0, deadline 100 ms
  AddRequest(w, 1, 0.001);  // b0, deadline 101 ms
  AddRequest(w, 0, 0.005);  // a1, deadline 105 ms
  auto report = Simulate(w, "gshare", HandOptions(/*max_gpus=*/1));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  // Work-conserving: a0 finds no slice, so one is made at once (the GPU is acquired at 0, a
  // restores 0-11 ms); b0 likewise, its copy after a's on the copy engine (11-32 ms). a1 (5 ms)
  // waits for a's slice, predicted to serve it by 11 + 2 x 14 = 39 ms, within its deadline: no
  // second swap. a0 runs 11-21, a1 21-31, b0 32-52 ms.
  ASSERT_EQ(report->functions.size(), 2u);
  EXPECT_EQ(report->peak_gpus, 1);
  EXPECT_EQ(report->swaps, 2u);
  // Latencies are kept as float: compare to 1e-4 ms.
  EXPECT_NEAR(report->functions[0].latency.p50_ms, 21.0, 1e-4);  // a0: 0 -> 21 ms
  EXPECT_NEAR(report->functions[0].latency.max_ms, 26.0, 1e-4);  // a1: 5 -> 31 ms
  EXPECT_NEAR(report->functions[1].latency.p50_ms, 51.0, 1e-4);  // b0: 1 -> 52 ms
  EXPECT_DOUBLE_EQ(report->slo_attainment, 1.0);
  EXPECT_NEAR(report->horizon_seconds, 0.052, 1e-9);
  EXPECT_NEAR(report->gpu_seconds, 0.052, 1e-9);
  // 256 MiB slices: a from 0 until released one restore (11 ms) after its last run, at 42 ms; b
  // from its copy's start (11 ms) to the horizon.
  EXPECT_NEAR(report->vgpu_gib_seconds, 0.25 * (0.042 + (0.052 - 0.011)), 1e-9);
}

TEST(GSharePolicyTest, NoRunStartsThatWouldMakeARestoringRequestLate) {
  // One GPU. l: 1 MB model (restore 2 ms), 50 ms run, SLO 1 s. u: 20 MB (restore 21 ms), 10 ms
  // run, SLO 40 ms (at risk: 1.4 x 21 + 14 > 40). l0 at 0 restores 0-2 ms and runs 2-52 ms. u0 at
  // 40 ms restores 40-61 ms; its latest start is 80 - 14 = 66 ms. l1 at 45 ms waits for l's slice.
  // When l0 ends at 52 ms, l1's run (predicted 70 ms) would end after u0's latest start, so the
  // GPU idles until u0's slice is ready: u0 runs 61-71 ms, l1 71-121 ms. (Starting l1 at 52 ms
  // would hold u0 until 102 ms: a miss, since runs are not preempted.)
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(MakeFunction("l", 1'000'000, 256 * kMiB, milliseconds(50), seconds(1)));
  w.functions.push_back(
      MakeFunction("u", 20'000'000, 256 * kMiB, milliseconds(10), milliseconds(40)));
  AddRequest(w, 0, 0.000);
  AddRequest(w, 1, 0.040);
  AddRequest(w, 0, 0.045);
  auto report = Simulate(w, "gshare", HandOptions(/*max_gpus=*/1));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_DOUBLE_EQ(report->slo_attainment, 1.0);
  EXPECT_NEAR(report->functions[1].latency.max_ms, 31.0, 1e-4);  // u0: 40 -> 71 ms
  EXPECT_NEAR(report->functions[0].latency.max_ms, 76.0, 1e-4);  // l1: 45 -> 121 ms
  EXPECT_NEAR(report->horizon_seconds, 0.121, 1e-9);
}

TEST(GSharePolicyTest, HoldsASliceForTheGapsItHasSeen) {
  // a (restore 11 ms, run 10 ms, SLO 100 ms) is called every 300 ms, twenty times. Until eight
  // gaps are seen, an idle slice is held one restore time (11 ms) and released: r0..r8 each
  // restore. From r8 on the hold is the longest gap seen plus an eighth (337.5 ms): the slice is
  // still there when the next request comes, and r9..r19 run at once (10 ms).
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(
      MakeFunction("a", 10'000'000, 256 * kMiB, milliseconds(10), milliseconds(100)));
  for (int i = 0; i < 20; ++i) AddRequest(w, 0, 0.3 * i);
  auto report = Simulate(w, "gshare", HandOptions());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->swaps, 9u);
  const auto& sorted = report->sorted_latency_ms;
  ASSERT_EQ(sorted.size(), 20u);
  EXPECT_NEAR(sorted[0], 10.0, 1e-4);
  EXPECT_NEAR(sorted[10], 10.0, 1e-4);  // eleven ran without a restore
  EXPECT_NEAR(sorted[11], 21.0, 1e-4);  // nine with one
  EXPECT_NEAR(sorted[19], 21.0, 1e-4);
}

TEST(GSharePolicyTest, AnUrgentRunSharesTheGpuWithALongOne) {
  // One GPU. s (400 MB model: a 401 ms restore, far beyond its 60 ms SLO, so it is in the cache
  // queue and stays resident) runs 5 ms; l (same model size, SLO 10 s) runs 200 ms. s is called
  // at 0 (a cold start, a miss), l at 1.0 s (restore 1.0-1.401, run from 1.401), s again at
  // 1.41 s, deadline 1.47 s. Behind l's run it would end at 1.606 s; sharing the compute it ends
  // within a quantum plus twice its predicted 7 ms (1.444 s): it runs beside l. The simulated GPU
  // gives it the quantum after l's current one (1.421-1.426 s): 16 ms. l ends 5 ms later.
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(
      MakeFunction("s", 400'000'000, 256 * kMiB, milliseconds(5), milliseconds(60)));
  w.functions.push_back(MakeFunction("l", 400'000'000, 256 * kMiB, milliseconds(200), seconds(10)));
  AddRequest(w, 0, 0.0);
  AddRequest(w, 1, 1.0);
  AddRequest(w, 0, 1.41);
  auto shared = Simulate(w, "gshare", HandOptions(/*max_gpus=*/1));
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  EXPECT_NEAR(shared->functions[0].latency.max_ms, 406.0, 1e-4);  // the cold start
  EXPECT_NEAR(shared->functions[0].latency.p50_ms, 16.0, 1e-4);
  EXPECT_NEAR(shared->functions[1].latency.max_ms, 606.0, 1e-4);
  EXPECT_EQ(shared->swaps, 2u);
  // Without time slicing s waits for l's run: 1.601-1.606 s, a miss.
  auto alone = Simulate(w, "gshare-no-timeslice", HandOptions(/*max_gpus=*/1));
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_NEAR(alone->functions[0].latency.p50_ms, 196.0, 1e-4);
  EXPECT_NEAR(alone->functions[1].latency.max_ms, 601.0, 1e-4);
}

TEST(GSharePolicyTest, EvictsTheLeastRecentlyUsedIdleSliceWhenMemoryIsShort) {
  // Three 16 GiB functions, one 40 GiB GPU holds two. 400 MB models restore in 401 ms, so with a
  // 500 ms SLO a slice cannot come back in time and stays cached until memory is needed: x, y, z, x
  // swap four times on one GPU, z evicting x (least recently used) and x evicting y.
  Workload w;
  w.gpu = RoundGpu();
  for (const char* name : {"x", "y", "z"}) {
    w.functions.push_back(
        MakeFunction(name, 400'000'000, 16 * kGiB, milliseconds(10), milliseconds(500)));
  }
  AddRequest(w, 0, 0.0);
  AddRequest(w, 1, 1.0);
  AddRequest(w, 2, 2.0);
  AddRequest(w, 0, 3.0);
  auto fast = Simulate(w, "gshare", HandOptions());
  auto slow = Simulate(w, "gshare-no-fast-swap", HandOptions());
  for (auto* report : {&fast, &slow}) {
    ASSERT_TRUE(report->ok()) << report->status().ToString();
    EXPECT_EQ((*report)->swaps, 4u);
    EXPECT_EQ((*report)->peak_gpus, 1);
  }
  // With fast swap an eviction costs nothing: z takes 401 + 10 ms. Without it, x's 400 MB are
  // first copied back to the host (400 ms), so z and the second x miss the 500 ms SLO.
  EXPECT_NEAR(fast->functions[2].latency.max_ms, 411.0, 1e-4);
  EXPECT_NEAR(slow->functions[2].latency.max_ms, 811.0, 1e-4);
  EXPECT_DOUBLE_EQ(fast->slo_attainment, 1.0);
  EXPECT_DOUBLE_EQ(slow->slo_attainment, 0.5);
}

TEST(GSharePolicyTest, BatchesRequestsThatWaitForTheSameSlice) {
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(MakeFunction("a", 10'000'000, 256 * kMiB, milliseconds(10),
                                     milliseconds(100), /*max_batch=*/4));
  AddRequest(w, 0, 0.000);
  AddRequest(w, 0, 0.002);
  AddRequest(w, 0, 0.004);
  auto report = Simulate(w, "gshare", HandOptions());
  ASSERT_TRUE(report.ok());
  // The first makes a slice at once (restore 0-11 ms); the others wait for it, and the three run
  // as one batch (11-21 ms).
  EXPECT_NEAR(report->latency.max_ms, 21.0, 1e-4);
  EXPECT_NEAR(report->latency.p50_ms, 19.0, 1e-4);
  EXPECT_EQ(report->swaps, 1u);
}

TEST(GSharePolicyTest, ReleasesAnIdleSliceThatCanComeBackInTime) {
  // Ski rental: a slice whose restore (11 ms) fits in the SLO with room is released after 11 ms
  // idle, so a call 1 s later swaps again; one whose restore does not fit stays.
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(
      MakeFunction("cheap", 10'000'000, 256 * kMiB, milliseconds(10), milliseconds(100)));
  w.functions.push_back(
      MakeFunction("dear", 400'000'000, 256 * kMiB, milliseconds(10), milliseconds(500)));
  AddRequest(w, 0, 0.0);
  AddRequest(w, 1, 0.0);
  AddRequest(w, 0, 1.0);
  AddRequest(w, 1, 1.0);
  auto report = Simulate(w, "gshare", HandOptions());
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->functions[0].swaps, 2u);
  EXPECT_EQ(report->functions[1].swaps, 1u);
  EXPECT_DOUBLE_EQ(report->slo_attainment, 1.0);
  // Without the cache queue, dear's slice is released like cheap's: its second call restores
  // again (401 ms + 10 ms, within its 500 ms SLO only because nothing else waits).
  auto uncached = Simulate(w, "gshare-no-cache-queue", HandOptions());
  ASSERT_TRUE(uncached.ok());
  EXPECT_EQ(uncached->functions[1].swaps, 2u);
}

// Random functions and arrivals on a small (8 GiB) GPU type, so memory is short. The SLO is 1.2
// restores plus 2 runs: a cold start fits, and with the 40% margin the functions whose restore
// outweighs three runs are at risk (the cache queue's).
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
    const Duration restore =
        w.gpu.restore_overhead + TransferTime(model, w.gpu.h2d_bytes_per_second);
    w.functions.push_back(MakeFunction("f" + std::to_string(f), model, memory, exec,
                                       restore + restore / 5 + exec * 2,
                                       1 + static_cast<int>(rng.Below(4))));
  }
  std::vector<std::pair<double, FunctionId>> arrivals;
  for (FunctionId f = 0; f < 30; ++f) {
    const double rate = std::pow(10.0, rng.Uniform(-1.5, 1.5));
    for (double t = rng.Exponential(rate); t < 300; t += rng.Exponential(rate))
      arrivals.emplace_back(t, f);
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

TEST(GSharePolicyTest, EveryVariantChangesSomeResult) {
  // A variant that never changes a result is dead code: each differs from gshare on crowded
  // workloads (in GPU-seconds, swaps, memory-time or attainment) on at least one seed, with the
  // hold priced by the GPU (the simulator's default) or by memory-time (optgap's), at the
  // margin of 0.4. (gshare-eager-restore does not: these SLOs leave a first restore no time to
  // wait; nor gshare-queue-batch: these functions run one request at a time. GShareRulesTest's
  // ALazyFirstRestoreServesTheRequestsThatArriveMeanwhile and
  // ABatchIsNoLargerThanItsHeadsDeadlineAllows show what each changes.)
  auto signature = [](const PolicyReport& r) {
    return std::tuple(r.gpu_seconds, r.swaps, r.vgpu_gib_seconds, r.slo_attainment);
  };
  for (const char* variant :
       {"fifo", "gshare-no-lazy", "gshare-no-fast-swap", "gshare-no-cache-queue",
        "gshare-no-timeslice", "gshare-adaptive-margin", "gshare-mean-margin", "gshare-fixed-hold",
        "gshare-reactive-replicas"}) {
    bool differs = false;
    for (const auto price :
         {PolicyOptions::GShare::HoldPrice::kGpu, PolicyOptions::GShare::HoldPrice::kMemoryTime}) {
      SimulationOptions options;
      options.policy.gshare.hold_price = price;
      options.policy.gshare.safety_margin = 0.4;
      for (std::uint64_t seed : {1, 2, 3}) {
        const Workload w = CrowdedWorkload(seed);
        auto base = Simulate(w, "gshare", options);
        auto other = Simulate(w, variant, options);
        ASSERT_TRUE(base.ok() && other.ok()) << variant;
        differs = differs || signature(*base) != signature(*other);
      }
    }
    EXPECT_TRUE(differs) << variant << " gives gshare's results on every seed";
  }
}

// The defaults (quantile predictions, cost-aware hold, lazy first restore) with instant instance
// starts, the hold priced by memory-time (as `gshare optgap` scores it), and `change` applied.
template <typename Change>
SimulationOptions RuleOptions(Change change) {
  SimulationOptions options;
  options.policy.instance_start = Duration::zero();
  options.policy.pool_idle = seconds(10);
  options.policy.gshare.hold_price = PolicyOptions::GShare::HoldPrice::kMemoryTime;
  change(options.policy.gshare);
  return options;
}

TEST(GShareRulesTest, TheCostAwareHoldReleasesAFunctionSeenOnceAtOnce) {
  // One request of f and, later, one of g (each: restore 11 ms, run 10 ms, SLO 1 s). A function
  // seen once is expected never again, so each slice is held for its restore and its run only
  // (wherever the restore starts). The fixed hold keeps f's one restore time longer.
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(MakeFunction("f", 10'000'000, 256 * kMiB, milliseconds(10), seconds(1)));
  w.functions.push_back(MakeFunction("g", 10'000'000, 256 * kMiB, milliseconds(10), seconds(1)));
  AddRequest(w, 0, 0.0);
  AddRequest(w, 1, 2.0);
  auto costed = Simulate(w, "gshare", RuleOptions([](auto&) {}));
  auto fixed = Simulate(w, "gshare-fixed-hold", RuleOptions([](auto&) {}));
  ASSERT_TRUE(costed.ok() && fixed.ok());
  EXPECT_NEAR(costed->vgpu_gib_seconds, 0.25 * 0.042, 1e-9);
  EXPECT_GT(fixed->vgpu_gib_seconds, 0.25 * 0.053);
  EXPECT_DOUBLE_EQ(costed->slo_attainment, 1.0);
}

TEST(GShareRulesTest, TheCostAwareHoldWeighsTheGapsAgainstARestore) {
  // f is called every `gap` (restore 11 ms, run 2 ms, SLO 1 s); eager first restores isolate the
  // hold. After a run, the next request of a 40 ms rhythm is 38 ms away, longer than a restore:
  // holding the slice costs more memory-time than restoring it, so the cost-aware hold releases
  // it (one swap per request), where the fixed hold keeps it once it has seen 8 gaps (ski rental
  // on the longest gap). In a 5 ms rhythm the next request is 3 ms away: both keep the slice
  // (the cost-aware hold after the second request: the first, a function seen once, is not).
  for (const double gap : {0.040, 0.005}) {
    Workload w;
    w.gpu = RoundGpu();
    w.functions.push_back(MakeFunction("f", 10'000'000, 256 * kMiB, milliseconds(2), seconds(1)));
    for (int i = 0; i < 40; ++i) AddRequest(w, 0, gap * i);
    const auto eager = [](PolicyOptions::GShare& g) { g.lazy_first_restore = false; };
    auto costed = Simulate(w, "gshare", RuleOptions(eager));
    auto fixed = Simulate(w, "gshare-fixed-hold", RuleOptions(eager));
    ASSERT_TRUE(costed.ok() && fixed.ok());
    EXPECT_DOUBLE_EQ(costed->slo_attainment, 1.0) << gap;
    if (gap > 0.01) {
      EXPECT_EQ(costed->swaps, 40u) << gap;
      EXPECT_LE(fixed->swaps, 10u) << gap;
      EXPECT_LT(costed->vgpu_gib_seconds, fixed->vgpu_gib_seconds) << gap;
    } else {
      EXPECT_LE(costed->swaps, 2u) << gap;
      EXPECT_EQ(fixed->swaps, 1u) << gap;
    }
  }
}

TEST(GShareRulesTest, AFunctionAtRiskIsHeldWhereARestoreWouldMissItsDeadline) {
  // f's SLO (15 ms) admits its run (10 ms) but not a restore (11 ms) before it: a request is
  // served in time only where the slice is resident, and a miss is priced at 1 / (1 - 0.99)
  // restores, so once f has been seen twice its slice stays through gaps of 50 ms. The first
  // two requests miss (a cold start; then a function seen once is released). Without the cache
  // queue's pricing (gshare-no-cache-queue) a gap longer than a restore releases it, and every
  // request misses.
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(
      MakeFunction("f", 10'000'000, 256 * kMiB, milliseconds(10), milliseconds(15)));
  for (int i = 0; i < 20; ++i) AddRequest(w, 0, 0.05 * i);
  auto held = Simulate(w, "gshare", RuleOptions([](auto&) {}));
  auto unpriced = Simulate(w, "gshare-no-cache-queue", RuleOptions([](auto&) {}));
  ASSERT_TRUE(held.ok() && unpriced.ok());
  EXPECT_EQ(held->swaps, 2u);
  EXPECT_NEAR(held->slo_attainment, 18.0 / 20.0, 1e-12);
  EXPECT_EQ(unpriced->swaps, 20u);
  EXPECT_DOUBLE_EQ(unpriced->slo_attainment, 0.0);
}

TEST(GShareRulesTest, PricedByTheGpuAnIdleSliceStaysUntilItsMemoryIsNeeded) {
  // f every 40 ms (restore 11 ms, run 2 ms), as in the test above: priced by memory-time, the
  // hold releases f's slice after each run; priced by the GPU (the default of `sim`), nothing
  // is saved by releasing it while its GPU stays up, so it stays: one swap.
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(MakeFunction("f", 10'000'000, 256 * kMiB, milliseconds(2), seconds(1)));
  for (int i = 0; i < 40; ++i) AddRequest(w, 0, 0.040 * i);
  const auto eager = [](PolicyOptions::GShare& g) { g.lazy_first_restore = false; };
  auto memory_time = Simulate(w, "gshare", RuleOptions(eager));
  auto gpu = Simulate(w, "gshare", RuleOptions([](PolicyOptions::GShare& g) {
                        g.lazy_first_restore = false;
                        g.hold_price = PolicyOptions::GShare::HoldPrice::kGpu;
                      }));
  ASSERT_TRUE(memory_time.ok() && gpu.ok());
  EXPECT_EQ(memory_time->swaps, 40u);
  EXPECT_EQ(gpu->swaps, 1u);
  // It holds the memory longer: that is what it does not pay for.
  EXPECT_GT(gpu->vgpu_gib_seconds, memory_time->vgpu_gib_seconds);
}

TEST(GShareRulesTest, ASliceAtRiskThatIsExpectedBackGetsItsOwnGpu) {
  // GPUs of 1 GiB hold one slice of 768 MiB. f (SLO 15 ms: a restore, 11 ms, and its 10 ms run do
  // not fit; at risk) is called at 0 and every 100 ms; g (SLO 60 ms) once at 50 ms (seen once,
  // restored at once). Protected, f's slice is not evicted for g's, which gets a second GPU:
  // f misses only its cold start (--protect-horizon 15m). Without (the default), g evicts f
  // (idle), and f's next request misses too.
  Workload w;
  w.gpu = RoundGpu();
  w.gpu.memory_bytes = kGiB;
  w.functions.push_back(
      MakeFunction("f", 10'000'000, 768 * kMiB, milliseconds(10), milliseconds(15)));
  w.functions.push_back(
      MakeFunction("g", 10'000'000, 768 * kMiB, milliseconds(10), milliseconds(60)));
  for (int i = 0; i < 10; ++i) {
    AddRequest(w, 0, 0.1 * i);
    if (i == 0) AddRequest(w, 1, 0.05);
  }
  // Priced by the GPU (the default): an idle slice stays until its memory is needed.
  const auto gpu = [](PolicyOptions::GShare& g) {
    g.hold_price = PolicyOptions::GShare::HoldPrice::kGpu;
  };
  auto kept = Simulate(w, "gshare", RuleOptions([&](PolicyOptions::GShare& g) {
                         gpu(g);
                         g.protect_horizon = std::chrono::minutes(15);
                       }));
  auto evicted = Simulate(w, "gshare", RuleOptions(gpu));
  ASSERT_TRUE(kept.ok() && evicted.ok());
  EXPECT_EQ(kept->peak_gpus, 2);
  EXPECT_EQ(evicted->peak_gpus, 1);
  EXPECT_NEAR(kept->slo_attainment, 10.0 / 11.0, 1e-12);
  EXPECT_NEAR(evicted->slo_attainment, 9.0 / 11.0, 1e-12);
}

// w (1 MB, 128 MiB, run 1 ms, SLO `w_slo`) and f (10 MB, 256 MiB, run 10 ms, SLO 200 ms, batches
// of up to 4) on the round GPU; no requests.
Workload WorkloadOfWAndF(Duration w_slo) {
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(MakeFunction("w", 1'000'000, 128 * kMiB, milliseconds(1), w_slo));
  w.functions.push_back(MakeFunction("f", 10'000'000, 256 * kMiB, milliseconds(10),
                                     milliseconds(200), /*max_batch=*/4));
  return w;
}

// The lazy first restore against gshare-eager-restore on `w`, whose f (256 MiB, restore 11 ms,
// run 10 ms) is restored once where eagerly it is restored twice: every request in time, and f
// holds one residency of a restore and one run of two, against two of a restore and a run each.
void ExpectOneRestoreOfFFewerThanEager(const Workload& w) {
  auto lazy = Simulate(w, "gshare", RuleOptions([](auto&) {}));
  auto eager = Simulate(w, "gshare-eager-restore", RuleOptions([](auto&) {}));
  ASSERT_TRUE(lazy.ok() && eager.ok());
  EXPECT_EQ(lazy->swaps + 1, eager->swaps);
  EXPECT_DOUBLE_EQ(lazy->slo_attainment, 1.0);
  EXPECT_DOUBLE_EQ(eager->slo_attainment, 1.0);
  EXPECT_NEAR(eager->vgpu_gib_seconds - lazy->vgpu_gib_seconds, 0.25 * 0.021, 1e-9);
}

TEST(GShareRulesTest, ALazyFirstRestoreServesTheRequestsThatArriveMeanwhile) {
  // A GPU is in the pool (w, called at 0). f (restore 11 ms, run 10 ms, batches of up to 4, SLO
  // 200 ms) is called at 50, 100 and 140 ms. The first call is restored at once (the pool has
  // seen no repeat call of any function: none is expected to join) and released after its run
  // (a function seen once is expected never again). Lazy: the
  // second call's restore waits for its latest start (less one blocking run and the restore's
  // spread), the third joins it, and one restore serves both in one batch. Eager: the slice is
  // made at once, serves the second call and is released (the next call is expected 50 ms
  // later, more than a restore away); the third needs another restore.
  Workload w = WorkloadOfWAndF(seconds(1));
  AddRequest(w, 0, 0.0);
  AddRequest(w, 1, 0.050);
  AddRequest(w, 1, 0.100);
  AddRequest(w, 1, 0.140);
  ExpectOneRestoreOfFFewerThanEager(w);
}

TEST(GShareRulesTest, AFunctionSeenOnceWaitsForJoinersWhereThePoolSeesRepeatCalls) {
  // w (restore 2 ms, run 1 ms, SLO 4 ms: no time to wait) is called every 10 ms from 0 to 40 ms.
  // f (restore 11 ms, run 10 ms, batches of up to 4, SLO 200 ms) is first called at 50 ms, again
  // at 80 ms. Of the two functions seen then, one was called again, 10 ms after its first call:
  // a second call of f before its latest start (about 150 ms away) is about 50% likely, so f's
  // first restore waits for it, and one restore serves both, in one batch. Eager, f is restored
  // at once, released after its run (seen once), and restored again for the second call. Were
  // the pool's calls each of a new function (the test above), nothing would wait.
  Workload w = WorkloadOfWAndF(milliseconds(4));
  for (int i = 0; i < 5; ++i) AddRequest(w, 0, 0.010 * i);
  AddRequest(w, 1, 0.050);
  AddRequest(w, 1, 0.080);
  ExpectOneRestoreOfFFewerThanEager(w);
}

TEST(GShareRulesTest, TheHoldLooksAgainAsTheOpenGapLengthens) {
  // f (restore 11 ms, run 2 ms, SLO 1 s) is called at 0, 5 and 10 ms, then at 1 s. After the third
  // run its two gaps (5 ms) are shorter than a restore, so the hold keeps the slice: expected
  // back soon. The gap still open counts in the rate: once it makes the mean gap longer than a
  // restore (at about 12 ms after the last call: (5 + 5 + 12) / 2 = 11), holding costs more than
  // restoring; the hold looks again then and releases the slice. The call at 1 s restores it.
  // Held to the cap (10 s) instead, it would stay through the whole second (one swap, and about
  // 0.25 GiB-s).
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(MakeFunction("f", 10'000'000, 256 * kMiB, milliseconds(2), seconds(1)));
  for (const double at : {0.0, 0.005, 0.010, 1.0}) AddRequest(w, 0, at);
  auto run = Simulate(w, "gshare", RuleOptions([](auto&) {}));
  ASSERT_TRUE(run.ok());
  EXPECT_DOUBLE_EQ(run->slo_attainment, 1.0);
  EXPECT_EQ(run->swaps, 2u);
  EXPECT_LT(run->vgpu_gib_seconds, 0.25 * 0.1);
}

TEST(GShareRulesTest, LoadSizedReplicasServeBurstsThatOneSliceCannot) {
  // g and h (30 GiB each, called once at 0) bring two GPUs of 40 GiB into the pool, nearly idle.
  // f (restore 11 ms, run 10 ms, SLO 15 ms: at risk) is called every 40 ms for 4 s (one slice
  // serves it), then twice at once every 20 ms for 2 s: a load of one slice, in pairs. On one
  // slice the second of each pair waits a run and misses; a replica made for it would be ready
  // after a restore, later than waiting, so the reactive rule (gshare-reactive-replicas) makes
  // none: 100 of the pairs' requests miss. Sized by the load (the peak of its rate over 20 runs x
  // 10 ms, with the spread of the gaps), f gets a replica on the other GPU as the pairs come,
  // and nearly every pair is served at once.
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(
      MakeFunction("f", 10'000'000, 256 * kMiB, milliseconds(10), milliseconds(15)));
  w.functions.push_back(MakeFunction("g", 10'000'000, 30 * kGiB, milliseconds(1), seconds(1)));
  w.functions.push_back(MakeFunction("h", 10'000'000, 30 * kGiB, milliseconds(1), seconds(1)));
  AddRequest(w, 1, 0.0);
  AddRequest(w, 2, 0.0);
  for (int i = 0; i < 100; ++i) AddRequest(w, 0, 0.040 * i);
  for (int i = 0; i < 100; ++i) {
    AddRequest(w, 0, 4.0 + 0.020 * i);
    AddRequest(w, 0, 4.0 + 0.020 * i);
  }
  const auto gpu = [](PolicyOptions::GShare& g) {
    g.hold_price = PolicyOptions::GShare::HoldPrice::kGpu;
  };
  auto sized = Simulate(w, "gshare", RuleOptions(gpu));
  auto reactive = Simulate(w, "gshare-reactive-replicas", RuleOptions(gpu));
  ASSERT_TRUE(sized.ok() && reactive.ok());
  EXPECT_EQ(sized->peak_gpus, 3);
  EXPECT_EQ(reactive->peak_gpus, 3);
  // f's first call misses either way (a cold start does not fit its SLO).
  EXPECT_NEAR(reactive->slo_attainment, 201.0 / 302.0, 1e-9);
  EXPECT_GT(sized->slo_attainment, 0.95);
  EXPECT_GT(sized->swaps, reactive->swaps);
}

TEST(GShareRulesTest, ABatchIsNoLargerThanItsHeadsDeadlineAllows) {
  // f's batches take 10, 16, 22 and 28 ms (SLO 30 ms); its slice is resident (a first call at 0,
  // held: priced by the GPU). Four calls come at once at 1 s: the first runs alone at once (10
  // ms), and the other three wait for it. In one batch (gshare-queue-batch) they take 22 ms and
  // end at 32 ms, past their deadlines: 2 of 5 calls in time. Cut to what the head's deadline
  // allows by the predicted runs, the batches end in time: all 5.
  Workload w;
  w.gpu = RoundGpu();
  ResolvedFunction f =
      MakeFunction("f", 10'000'000, 256 * kMiB, milliseconds(10), milliseconds(30), 4);
  f.exec_by_batch = {milliseconds(10), milliseconds(16), milliseconds(22), milliseconds(28)};
  w.functions.push_back(f);
  AddRequest(w, 0, 0.0);
  for (int i = 0; i < 4; ++i) AddRequest(w, 0, 1.0);
  const auto gpu = [](PolicyOptions::GShare& g) {
    g.hold_price = PolicyOptions::GShare::HoldPrice::kGpu;
  };
  auto capped = Simulate(w, "gshare", RuleOptions(gpu));
  auto whole = Simulate(w, "gshare-queue-batch", RuleOptions(gpu));
  ASSERT_TRUE(capped.ok() && whole.ok());
  EXPECT_DOUBLE_EQ(capped->slo_attainment, 1.0);
  EXPECT_DOUBLE_EQ(whole->slo_attainment, 2.0 / 5.0);
}

TEST(GShareRulesTest, ABatchIsNotCutWhereTheRequestsLeftBehindWouldMiss) {
  // f's batches of b take 10 + 2 (b - 1) ms (SLO 30 ms), predicted exactly (the learned mean, no
  // margin). Its slice is resident (a call at 0, held: priced by the GPU). x comes at 1.000 s and
  // runs alone until 1.010; h at 1.001 (deadline 1.031) and seven more at 1.009 (1.039) wait.
  // Cut to the head's deadline, a batch of 6 ends at 1.030 and the other two at 1.042: 2 miss.
  // The whole batch of 8 ends at 1.034: only h misses. The whole batch runs.
  Workload w;
  w.gpu = RoundGpu();
  ResolvedFunction f =
      MakeFunction("f", 10'000'000, 256 * kMiB, milliseconds(10), milliseconds(30), 8);
  for (int b = 1; b <= 8; ++b) f.exec_by_batch[b - 1] = milliseconds(10 + 2 * (b - 1));
  w.functions.push_back(f);
  AddRequest(w, 0, 0.0);
  AddRequest(w, 0, 1.000);
  AddRequest(w, 0, 1.001);
  for (int i = 0; i < 7; ++i) AddRequest(w, 0, 1.009);
  auto run = Simulate(w, "gshare", RuleOptions([](PolicyOptions::GShare& g) {
                        g.hold_price = PolicyOptions::GShare::HoldPrice::kGpu;
                        g.exec_quantile = 0.0;
                      }));
  ASSERT_TRUE(run.ok());
  EXPECT_DOUBLE_EQ(run->slo_attainment, 9.0 / 10.0);
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
    const Duration restore =
        w.gpu.restore_overhead + TransferTime(model, w.gpu.h2d_bytes_per_second);
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

namespace gshare {
namespace {

TEST(GSharePolicyTest, ASliceGrowsForABatchAndShrinksAfterIt) {
  // As in BatchesRequestsThatWaitForTheSameSlice, with 512 MiB of memory per request beyond the
  // first: the 256 MiB slice grows to 1280 MiB for the batch of three (11-21 ms) and shrinks
  // back when it ends.
  Workload w;
  w.gpu = testing::RoundGpu();
  w.functions.push_back(testing::MakeFunction("a", 10'000'000, 256 * kMiB,
                                              std::chrono::milliseconds(10),
                                              std::chrono::milliseconds(100), /*max_batch=*/4));
  w.functions[0].batch_memory_bytes = 512 * kMiB;
  testing::AddRequest(w, 0, 0.000);
  testing::AddRequest(w, 0, 0.002);
  testing::AddRequest(w, 0, 0.004);
  SimulationOptions options;
  options.policy.instance_start = Duration::zero();
  options.policy.gshare.adapt_margin = false;
  auto report = Simulate(w, "gshare", options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_NEAR(report->latency.max_ms, 21.0, 1e-4);
  // 0.25 GiB for the restore (0-11 ms), 1.25 GiB for the batch (11-21 ms); the run ends the
  // horizon.
  EXPECT_NEAR(report->vgpu_gib_seconds, 0.25 * 0.011 + 1.25 * 0.010, 1e-9);
  EXPECT_NEAR(report->functions[0].active_gib_seconds, 1.25 * 0.010, 1e-9);
  // faaswap reserves for its largest batch (4: 1792 MiB) from the start.
  auto faaswap = Simulate(w, "faaswap-fifo", options);
  ASSERT_TRUE(faaswap.ok()) << faaswap.status().ToString();
  EXPECT_GT(faaswap->vgpu_gib_seconds, report->vgpu_gib_seconds);
}

TEST(GSharePolicyTest, ATenantWithinItsShareTakesBorrowedMemoryBack) {
  // One 40 GiB GPU. Tenant x's two functions hold 19 GiB each, with 50 requests queued each at 0
  // (20 ms runs, SLO 100 s): they alternate on the compute for 2 s, and the one not running always
  // has requests waiting. Tenant y's function (10 GiB, restore 11 ms, run 10 ms, SLO 0.5 s) is
  // called at 0.1 s: 2 GiB are free. Two tenants hold or ask, so each one's share is 20 GiB: x
  // borrows 18. With tenants' shares, y takes the slice of x's waiting function (nothing is
  // preempted): it restores 0.1-0.111 s and runs when the run in flight ends (by 0.12 s), its
  // deadline first; the evicted function is bound again once y's slice is released. Without them
  // y waits for x's backlog to end.
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(MakeFunction("x1", 10'000'000, 19 * kGiB, milliseconds(20), seconds(100)));
  w.functions.push_back(MakeFunction("x2", 10'000'000, 19 * kGiB, milliseconds(20), seconds(100)));
  w.functions.push_back(
      MakeFunction("y", 10'000'000, 10 * kGiB, milliseconds(10), milliseconds(500)));
  w.functions[0].tenant = "x";
  w.functions[1].tenant = "x";
  w.functions[2].tenant = "y";
  for (int i = 0; i < 50; ++i) {
    AddRequest(w, 0, 0.0);
    AddRequest(w, 1, 0.0);
  }
  AddRequest(w, 2, 0.1);
  auto shared = Simulate(w, "gshare", HandOptions(/*max_gpus=*/1));
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  EXPECT_EQ(shared->failed_requests, 0u);
  EXPECT_EQ(shared->peak_gpus, 1);
  EXPECT_DOUBLE_EQ(shared->slo_attainment, 1.0);
  // Restore 11 ms, then at most one 20 ms run of x ahead, then its own 10 ms.
  EXPECT_LE(shared->functions[2].latency.max_ms, 41.0 + 1e-4);
  EXPECT_GE(shared->functions[2].latency.max_ms, 21.0 - 1e-4);
  EXPECT_EQ(shared->functions[0].requests + shared->functions[1].requests, 100u);

  SimulationOptions without = HandOptions(/*max_gpus=*/1);
  without.policy.gshare.tenant_shares = false;
  auto unshared = Simulate(w, "gshare", without);
  ASSERT_TRUE(unshared.ok()) << unshared.status().ToString();
  EXPECT_GT(unshared->functions[2].latency.max_ms, 500.0);  // a miss: behind x's backlog
  EXPECT_LT(unshared->slo_attainment, 1.0);
}

TEST(GSharePolicyTest, ATenantHoldingNothingGetsASliceLargerThanItsShare) {
  // One 40 GiB GPU. Tenant y's two 10 GiB functions are called every 50 ms and, their SLO below a
  // predicted restore and run, stay cached. Tenant x holds nothing and asks at 0.2 s for 25 GiB,
  // more than its 20 GiB share: as a tenant with nothing it takes what is idle like anyone.
  Workload w;
  w.gpu = RoundGpu();
  for (int i = 0; i < 2; ++i) {
    w.functions.push_back(MakeFunction("y" + std::to_string(i), 10'000'000, 10 * kGiB,
                                       milliseconds(10), milliseconds(25)));
    w.functions.back().tenant = "y";
  }
  w.functions.push_back(MakeFunction("x", 10'000'000, 25 * kGiB, milliseconds(10), seconds(1)));
  w.functions.back().tenant = "x";
  for (int i = 0; i < 20; ++i) {
    AddRequest(w, 0, 0.05 * i);
    if (i == 4) AddRequest(w, 2, 0.21);  // in arrival order
    AddRequest(w, 1, 0.05 * i + 0.02);
  }
  auto report = Simulate(w, "gshare", HandOptions(/*max_gpus=*/1));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->failed_requests, 0u);
  EXPECT_LT(report->functions[2].latency.max_ms, 100.0);
}

TEST(GSharePolicyTest, TenantSharesServeEveryRequestOnACrowdedCappedPool) {
  // Three tenants' crowded functions on a pool capped at three GPUs: memory is contended.
  for (std::uint64_t seed : {1, 2, 3}) {
    Workload w = CrowdedWorkload(seed);
    for (std::size_t f = 0; f < w.functions.size(); ++f) {
      w.functions[f].tenant = std::string(1, static_cast<char>('a' + f % 3));
    }
    SimulationOptions options;
    options.policy.max_gpus = 3;
    auto shared = Simulate(w, "gshare", options);
    ASSERT_TRUE(shared.ok()) << "seed " << seed << ": " << shared.status().ToString();
    options.policy.gshare.tenant_shares = false;
    auto unshared = Simulate(w, "gshare", options);
    ASSERT_TRUE(unshared.ok()) << "seed " << seed << ": " << unshared.status().ToString();
    // Symmetric tenants gain nothing from shares; what taking memory back costs stays small
    // (measured: 0.958 vs 0.975, 0.976 vs 0.979, 0.637 vs 0.643).
    EXPECT_GE(shared->slo_attainment, unshared->slo_attainment - 0.03) << "seed " << seed;
  }
}

}  // namespace
}  // namespace gshare
