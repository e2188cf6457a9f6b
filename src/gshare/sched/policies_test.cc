// The baselines against schedules computed by hand (docs/simulator.md walks through them).
#include <gtest/gtest.h>

#include <cmath>

#include "gshare/sim/sim_test_util.h"
#include "gshare/sim/simulator.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::AddRequest;
using testing::MakeFunction;
using testing::RoundGpu;

// One function: 100 MB model (101 ms restore on the 1 GB/s link with 1 ms overhead), 256 MiB of
// GPU memory, 10 ms execution, 50 ms SLO. Requests at 0, 0.5, 5 and 20 s.
Workload HandWorkload() {
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(
      MakeFunction("f", 100'000'000, 256 * kMiB, milliseconds(10), milliseconds(50)));
  for (double t : {0.0, 0.5, 5.0, 20.0}) AddRequest(w, 0, t);
  return w;
}

SimulationOptions HandOptions() {
  SimulationOptions options;
  options.policy.keep_alive = seconds(10);
  options.policy.pool_idle = seconds(10);
  options.policy.instance_start = seconds(1);
  options.policy.proxy_overhead_fraction = 0.4;  // 4 ms
  return options;
}

TEST(KeepAlivePolicyTest, MatchesTheHandComputedSchedule) {
  const Workload w = HandWorkload();
  auto report = Simulate(w, "keepalive", HandOptions());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  // r0: instance 0 starts at 0, ready at 1.0, loaded at 1.101, runs to 1.111.
  // r1 (0.5): queues behind r0 and would miss its deadline, but a second instance would be ready
  //     at 1.601, later than instance 0 serves r1 (1.111-1.121), so none starts.
  // r2 (5.0): instance 0 is warm: 10 ms. It expires at 5.010 + 10 = 15.010.
  // r3 (20.0): a cold start again: 1 s + 101 ms + 10 ms.
  const auto& sorted = report->sorted_latency_ms;
  ASSERT_EQ(sorted.size(), 4u);
  EXPECT_NEAR(sorted[0], 10.0, 1e-3);
  EXPECT_NEAR(sorted[1], 621.0, 1e-3);
  EXPECT_NEAR(sorted[2], 1111.0, 1e-3);
  EXPECT_NEAR(sorted[3], 1111.0, 1e-3);
  EXPECT_DOUBLE_EQ(report->slo_attainment, 0.25);
  EXPECT_NEAR(report->horizon_seconds, 21.111, 1e-9);
  // GPUs held: 0 -> 15.010 and 20 -> 21.111 (the horizon).
  EXPECT_NEAR(report->gpu_seconds, 15.010 + 1.111, 1e-6);
  EXPECT_EQ(report->peak_gpus, 1);
  EXPECT_EQ(report->swaps, 2u);
  EXPECT_EQ(report->swap_bytes, 200'000'000u);
  // Each instance reserves the whole 40 GiB GPU from its restore on.
  EXPECT_NEAR(report->vgpu_gib_seconds, 40.0 * (14.010 + 0.111), 1e-6);
  EXPECT_NEAR(report->cost_usd, (15.010 + 1.111) * 0.001, 1e-9);
}

TEST(KeepAlivePolicyTest, AWarmUpLeavesTheStartOutOfTheFigures) {
  SimulationOptions options = HandOptions();
  options.executor.accounting_start = AtSeconds(10);
  auto report = Simulate(HandWorkload(), "keepalive", options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  // The window is 10 s to 21.111 s: only r3 arrives in it; instance 0 is held until 15.010 s and
  // r3's cold instance from 20 s; one restore (r3's).
  EXPECT_EQ(report->requests, 1u);
  EXPECT_NEAR(report->horizon_seconds, 11.111, 1e-9);
  EXPECT_NEAR(report->gpu_seconds, 5.010 + 1.111, 1e-6);
  EXPECT_EQ(report->peak_gpus, 1);
  EXPECT_EQ(report->swaps, 1u);
  EXPECT_DOUBLE_EQ(report->slo_attainment, 0.0);
  options.executor.accounting_start = AtSeconds(30);
  EXPECT_EQ(Simulate(HandWorkload(), "keepalive", options).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(KeepAlivePolicyTest, ScalesOutWhenTheBacklogWouldMissTheSlo) {
  // 10 ms runs, 50 ms SLO; a cold start takes 1 s + 101 ms. Twenty requests at once: with s
  // instances starting, the k-th would finish after ceil(k / s) runs, past its deadline either
  // way, and more instances shorten the backlog while it takes more than one round: every
  // request gets an instance. (A concurrency target of 10 per instance keeps the other rule out.)
  Workload burst;
  burst.gpu = RoundGpu();
  burst.functions.push_back(
      MakeFunction("f", 100'000'000, 256 * kMiB, milliseconds(10), milliseconds(50)));
  for (int i = 0; i < 20; ++i) AddRequest(burst, 0, 0.0);
  SimulationOptions options = HandOptions();
  options.policy.concurrency_target = 10;
  auto report = Simulate(burst, "keepalive", options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->peak_gpus, 20);
  // Twenty requests 50 ms apart with a 5 s SLO: the k-th would finish 1.101 + 0.01 k s after the
  // start, within its deadline: one instance serves them all.
  Workload spaced = burst;
  spaced.functions[0].slo = seconds(5);
  spaced.requests.clear();
  for (int i = 0; i < 20; ++i) AddRequest(spaced, 0, 0.05 * i);
  report = Simulate(spaced, "keepalive", options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->peak_gpus, 1);
  EXPECT_NEAR(report->latency.max_ms, 1111.0, 1e-3);  // the first waits longest: the cold start
  // r_k runs 1.101 + 0.01 k to + 0.01: latency 1111 - 40 k ms; the median (k = 10) is 711 ms.
  EXPECT_NEAR(report->latency.p50_ms, 711.0, 1e-3);
}

TEST(KeepAlivePolicyTest, CountsTheRunInFlightWhenItWeighsTheBacklog) {
  // 2 s runs, 3 s SLO, instances start at once (a cold start is the 101 ms load). r0 at 0 runs on
  // instance 0 from 0.101 to 2.101. r1 at 0.2 would run after it, to 4.101, past its deadline
  // (3.2); a new instance serves it by 0.2 + 0.101 + 2 = 2.301, so one starts. (Taking the busy
  // instance as free now, r1 would seem to finish at 2.2 and wait, and miss.)
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(MakeFunction("f", 100'000'000, 256 * kMiB, seconds(2), seconds(3)));
  AddRequest(w, 0, 0.0);
  AddRequest(w, 0, 0.2);
  SimulationOptions options = HandOptions();
  options.policy.instance_start = Duration::zero();
  options.policy.concurrency_target = 10;
  auto report = Simulate(w, "keepalive", options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->peak_gpus, 2);
  EXPECT_DOUBLE_EQ(report->slo_attainment, 1.0);
  ASSERT_EQ(report->sorted_latency_ms.size(), 2u);
  EXPECT_NEAR(report->sorted_latency_ms[0], 2101.0, 1e-3);
  EXPECT_NEAR(report->sorted_latency_ms[1], 2101.0, 1e-3);
}

TEST(KeepAlivePolicyTest, ScalesOutWhileConcurrencyExceedsItsTarget) {
  // One request every 10 ms for 240 s, each running 8 ms (the SLO, 5 s, never binds): about 0.8
  // requests queued or running on average (the 60 s average reaches 0.78 by the end). A target
  // of 0.7 per instance asks for two instances, a target of 5 for one.
  Workload steady;
  steady.gpu = RoundGpu();
  steady.functions.push_back(
      MakeFunction("f", 100'000'000, 256 * kMiB, milliseconds(8), seconds(5)));
  for (int i = 0; i < 24000; ++i) AddRequest(steady, 0, 0.01 * i);
  SimulationOptions options = HandOptions();
  options.policy.keep_alive = seconds(300);  // none expires: the peak is what was started
  options.policy.instance_start = Duration::zero();
  options.policy.concurrency_target = 0.7;
  auto tight = Simulate(steady, "keepalive", options);
  ASSERT_TRUE(tight.ok()) << tight.status().ToString();
  options.policy.concurrency_target = 5;
  auto loose = Simulate(steady, "keepalive", options);
  ASSERT_TRUE(loose.ok()) << loose.status().ToString();
  EXPECT_EQ(loose->peak_gpus, 1);
  EXPECT_GE(tight->peak_gpus, 2);
}

TEST(KeepAlivePolicyTest, CapsItsBatchAtTheLargestThatMeetsTheSlo) {
  // max_batch 8; a batch of b runs 10 ms x sqrt(b): 10, 14.1, 17.3, 20, ..., 28.3 ms. One
  // instance (max_instances 1), ready at 0.101 s; eight requests at 0. With a 21 ms SLO the
  // batcher takes at most 4 (20 ms; 5 would take 22.4): two runs of four, ending at 121 and
  // 141 ms. With a 30 ms SLO one batch of eight ends at 129.3 ms.
  auto run = [](Duration slo) {
    Workload w;
    w.gpu = RoundGpu();
    ResolvedFunction f = MakeFunction("f", 100'000'000, 256 * kMiB, milliseconds(10), slo, 8);
    for (int b = 1; b <= 8; ++b) {
      f.exec_by_batch[static_cast<std::size_t>(b - 1)] =
          Duration(std::llround(10e6 * std::sqrt(static_cast<double>(b))));
    }
    f.max_instances = 1;
    w.functions.push_back(f);
    for (int i = 0; i < 8; ++i) AddRequest(w, 0, 0.0);
    SimulationOptions options = HandOptions();
    options.policy.instance_start = Duration::zero();
    auto report = Simulate(w, "keepalive", options);
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    return report.ok() ? report->sorted_latency_ms : decltype(report->sorted_latency_ms){};
  };
  const auto capped = run(milliseconds(21));
  ASSERT_EQ(capped.size(), 8u);
  EXPECT_NEAR(capped.front(), 121.0, 1e-3);
  EXPECT_NEAR(capped.back(), 141.0, 1e-3);
  const auto whole = run(milliseconds(30));
  ASSERT_EQ(whole.size(), 8u);
  EXPECT_NEAR(whole.front(), 101.0 + 10 * std::sqrt(8.0), 1e-3);
  EXPECT_NEAR(whole.back(), 101.0 + 10 * std::sqrt(8.0), 1e-3);
}

// Three functions of 1 GiB: a is called five times (0 to 0.8 s), b once (0.1 s), c once (5 s).
Workload CacheWorkload() {
  Workload w;
  w.gpu = RoundGpu();
  for (const char* name : {"a", "b", "c"}) {
    w.functions.push_back(MakeFunction(name, 100'000'000, kGiB, milliseconds(10), seconds(3)));
  }
  for (int i = 0; i < 5; ++i) AddRequest(w, 0, 0.2 * i);
  AddRequest(w, 1, 0.1);
  AddRequest(w, 2, 5.0);
  return w;
}

TEST(FaasCachePolicyTest, EvictsTheLowestPriorityIdleInstanceUnderACap) {
  // Two GPUs at most. a is called often, b once, then c needs a GPU while a and b are idle:
  // GreedyDual evicts b (frequency 1) rather than a (frequency 5); keepalive waits for a
  // keep-alive to expire instead.
  const Workload w = CacheWorkload();
  SimulationOptions options = HandOptions();
  options.executor.max_gpus = 2;
  auto cache = Simulate(w, "faascache", options);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  // c: b's GPU is given up at 5.0, a new one starts (ready 6.0), load 0.101, run 0.01.
  EXPECT_DOUBLE_EQ(cache->slo_attainment, 1.0);
  EXPECT_NEAR(cache->latency.max_ms, 1111.0, 1e-3);
  EXPECT_EQ(cache->peak_gpus, 2);
  auto plain = Simulate(w, "keepalive", options);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  // keepalive: c waits until b's instance expires (idle since 1.111 s, 10 s keep-alive).
  EXPECT_LT(plain->slo_attainment, 1.0);
  EXPECT_GT(plain->latency.max_ms, 7000.0);
}

TEST(FaasCachePolicyTest, ItsOwnCapacityEvictsWithoutAClusterCap) {
  // The same calls with no cluster cap: a capacity of 2/3 GPU per function (2 GPUs for 3
  // functions) gives the same schedule as the cap of 2 above; without a capacity faascache is
  // keepalive.
  const Workload w = CacheWorkload();
  SimulationOptions options = HandOptions();
  options.policy.gpus_per_function = 2.0 / 3.0;
  auto cache = Simulate(w, "faascache", options);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_DOUBLE_EQ(cache->slo_attainment, 1.0);
  EXPECT_NEAR(cache->latency.max_ms, 1111.0, 1e-3);
  EXPECT_EQ(cache->peak_gpus, 2);
  options.policy.gpus_per_function = 0;
  auto uncapped = Simulate(w, "faascache", options);
  ASSERT_TRUE(uncapped.ok()) << uncapped.status().ToString();
  EXPECT_EQ(uncapped->peak_gpus, 3);  // c gets a third GPU at once
  auto plain = Simulate(w, "keepalive", options);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(uncapped->gpu_seconds, plain->gpu_seconds);
}

// Both versions of the proxy-and-swap baseline (late binding changes nothing in these schedules).
class FaaSwapPolicyTest : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(BothVersions, FaaSwapPolicyTest,
                         ::testing::Values("faaswap", "faaswap-fifo"), [](const auto& param_info) {
                           return std::string(param_info.param) == "faaswap" ? "edf" : "fifo";
                         });

TEST_P(FaaSwapPolicyTest, MatchesTheHandComputedSchedule) {
  const Workload w = HandWorkload();
  auto report = Simulate(w, GetParam(), HandOptions());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  // Every request first waits 4 ms in the proxy.
  // r0 reaches the pool at 0.004: no GPU, one starts (ready 1.004); the restore takes 1.004-1.105
  // and, loading pipelined, r0's 10 ms run overlaps it: it ends max(101, 10) + 10 / 10 ms after
  // the copy starts, at 1.106. r1 reaches the pool at 0.504: a GPU is already starting, so it
  // queues there; it runs 1.106-1.116. r2 at 5.004: the model is resident: runs 5.004-5.014 (14 ms,
  // within 50 ms). The GPU idles from 5.014 and leaves the pool at 15.014.
  // r3 at 20.004: a new GPU (ready 21.004), restore to 21.105, pipelined run to 21.106.
  const auto& sorted = report->sorted_latency_ms;
  ASSERT_EQ(sorted.size(), 4u);
  EXPECT_NEAR(sorted[0], 14.0, 1e-3);
  EXPECT_NEAR(sorted[1], 616.0, 1e-3);
  EXPECT_NEAR(sorted[2], 1106.0, 1e-3);
  EXPECT_NEAR(sorted[3], 1106.0, 1e-3);
  EXPECT_DOUBLE_EQ(report->slo_attainment, 0.25);
  EXPECT_NEAR(report->horizon_seconds, 21.106, 1e-9);
  EXPECT_NEAR(report->gpu_seconds, (15.014 - 0.004) + (21.106 - 20.004), 1e-6);
  EXPECT_EQ(report->peak_gpus, 1);
  EXPECT_EQ(report->swaps, 2u);
  // 256 MiB reserved from each restore: 1.004 -> 15.014 and 21.004 -> 21.106.
  EXPECT_NEAR(report->vgpu_gib_seconds, 0.25 * (14.010 + 0.102), 1e-6);
}

TEST_P(FaaSwapPolicyTest, PipelinedLoadingOverlapsALongRunWithItsCopy) {
  // A 1 GB model (1.001 s to copy) and a 2 s run: the run starts when the first tenth of the
  // model is on the GPU and ends max(1.001, 2) + 1.001 / 10 s after the copy starts.
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(MakeFunction("f", 1'000'000'000, kGiB, seconds(2), seconds(10)));
  AddRequest(w, 0, 0.0);
  SimulationOptions options = HandOptions();
  options.policy.instance_start = Duration::zero();
  options.policy.proxy_overhead_fraction = 0;
  auto report = Simulate(w, GetParam(), options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_NEAR(report->latency.max_ms, 2000.0 + 100.1, 1e-3);
}

TEST_P(FaaSwapPolicyTest, SwapsModelsInLruOrderWhenMemoryIsShort) {
  // Three 16 GiB functions on one 40 GiB GPU: only two fit. Calls a, b, c, a: the last a must be
  // restored again after c evicted it (the least recently used), so 4 swaps.
  Workload w;
  w.gpu = RoundGpu();
  for (const char* name : {"a", "b", "c"}) {
    w.functions.push_back(MakeFunction(name, 1'000'000, 16 * kGiB, milliseconds(10), seconds(10)));
  }
  AddRequest(w, 0, 0.0);
  AddRequest(w, 1, 2.0);
  AddRequest(w, 2, 4.0);
  AddRequest(w, 0, 6.0);
  SimulationOptions options = HandOptions();
  options.policy.instance_start = Duration::zero();
  auto report = Simulate(w, GetParam(), options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->swaps, 4u);
  EXPECT_EQ(report->peak_gpus, 1);
  EXPECT_DOUBLE_EQ(report->slo_attainment, 1.0);
}

TEST(FaaSwapEdfTest, ServesByDeadlineAndBatchesEveryQueuedRequestOfAFunction) {
  // One GPU (a cluster cap), two functions of 100 ms runs that batch up to 4, arrivals a b a b a
  // 10 ms apart while a's first run holds the GPU. faaswap-fifo runs consecutive requests of one
  // function only: a | b | a | b | a, five runs. faaswap takes by deadline and batches a
  // function's whole queue: a | b b | a a, three runs, so the last request ends 200 ms sooner.
  Workload w;
  w.gpu = RoundGpu();
  for (const char* name : {"a", "b"}) {
    w.functions.push_back(
        MakeFunction(name, 1'000'000, 256 * kMiB, milliseconds(100), seconds(10), 4));
  }
  for (int i = 0; i < 5; ++i) AddRequest(w, static_cast<FunctionId>(i % 2), 0.01 * i);
  SimulationOptions options = HandOptions();
  options.policy.instance_start = Duration::zero();
  options.policy.proxy_overhead_fraction = 0;
  options.executor.max_gpus = 1;
  auto edf = Simulate(w, "faaswap", options);
  ASSERT_TRUE(edf.ok()) << edf.status().ToString();
  auto fifo = Simulate(w, "faaswap-fifo", options);
  ASSERT_TRUE(fifo.ok()) << fifo.status().ToString();
  EXPECT_EQ(edf->peak_gpus, 1);
  // A restore of 1 MB takes 2 ms (1 ms overhead), and a run pipelined with it ends 100.2 ms after
  // it starts. faaswap: a 0-0.1002, then b's restore and [b b] to 0.2004, [a a] to 0.3004.
  // faaswap-fifo prefetches b during a's first run: a, b, a, b, a of 100 ms each from 0.1002.
  EXPECT_NEAR(edf->horizon_seconds, 0.3004, 1e-9);
  EXPECT_NEAR(fifo->horizon_seconds, 0.5002, 1e-9);
  EXPECT_LT(edf->latency.max_ms + 150, fifo->latency.max_ms);
}

TEST(PoliciesTest, UnknownPolicyIsAClearError) {
  const Workload w = HandWorkload();
  auto report = Simulate(w, "magic", HandOptions());
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kNotFound);
  EXPECT_NE(report.status().message().find("keepalive"), std::string::npos);
}

}  // namespace
}  // namespace gshare
