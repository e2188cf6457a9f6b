// The simulated world's departures from the ideal (world_model.h): each one changes what a run
// measures, and the ideal world is what the executor did before they existed.
#include "gshare/sim/world_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>

#include "gshare/model/gpu_type.h"
#include "gshare/sched/testing/null_scheduler.h"
#include "gshare/sim/sim_executor.h"
#include "gshare/sim/sim_test_util.h"
#include "gshare/sim/simulator.h"
#include "gshare/sim/workload/generator.h"
#include "gshare/sim/workload/model_catalog.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::AddRequest;
using testing::MakeFunction;
using testing::RoundGpu;

// Scripts an executor from its callbacks and records when each restore and run ended.
class Script : public testing::NullScheduler {
 public:
  void OnRequest(const Request& r) override {
    if (on_request) on_request(r);
  }
  void OnTimer(std::uint64_t token) override {
    if (on_timer) on_timer(token);
  }
  void OnRestoreDone(GpuId g, FunctionId f, const Status& status) override {
    EXPECT_TRUE(status.ok());
    events.push_back(fmt::format("restored {} on {}", f, g));
    restored_at.push_back(ToSeconds(executor->Now() - TimePoint{}));
  }
  void OnRunDone(GpuId g, FunctionId f, std::span<const RequestId>, const RunResult&) override {
    events.push_back(fmt::format("ran {} on {}", f, g));
    ran_at.push_back(ToSeconds(executor->Now() - TimePoint{}));
  }

  SimulatedExecutor* executor = nullptr;
  std::function<void(const Request&)> on_request;
  std::function<void(std::uint64_t)> on_timer;
  std::vector<std::string> events;
  std::vector<double> restored_at;
  std::vector<double> ran_at;
};

// One function of 100 MB (GPU memory 256 MiB, 50 ms a run) on the round GPU (1 GB/s link, 1 ms
// restore overhead): a restore alone takes 101 ms. One request at t = 0.
Workload OneFunction() {
  Workload w;
  w.gpu = RoundGpu();
  w.functions.push_back(
      MakeFunction("a", 100'000'000, 256 * kMiB, milliseconds(50), milliseconds(500)));
  AddRequest(w, 0, 0.0);
  return w;
}

WorldModel Contended(int gpus_per_node, double host_bytes_per_second) {
  WorldModel world;
  world.gpus_per_node = gpus_per_node;
  world.host_bytes_per_second = host_bytes_per_second;
  return world;
}

// Restores `a` on two GPUs: the first at t = 0, the second `second_at` later.
std::vector<double> TwoRestores(const WorldModel& world, Duration second_at) {
  const Workload w = OneFunction();
  SimulatedExecutor::Options options;
  options.world = world;
  SimulatedExecutor executor(w, options);
  Script script;
  script.executor = &executor;
  std::vector<GpuId> gpus;
  script.on_request = [&](const Request&) {
    gpus.push_back(*executor.AcquireGpu(0, Duration::zero()));
    gpus.push_back(*executor.AcquireGpu(0, Duration::zero()));
    executor.Restore(gpus[0], 0, 256 * kMiB);
    executor.SetTimer(executor.Now() + second_at, 1);
  };
  script.on_timer = [&](std::uint64_t) { executor.Restore(gpus[1], 0, 256 * kMiB); };
  executor.set_scheduler(&script);
  // The request is never run: the run ends with it unanswered, which is not this test's point.
  EXPECT_FALSE(executor.RunToEnd(nullptr).ok());
  return script.restored_at;
}

TEST(WorldModelTest, IdealIsTheDefaultAndFairDescribesItself) {
  EXPECT_TRUE(WorldModel{}.ideal());
  EXPECT_EQ(WorldModel{}.Describe(), "ideal");
  EXPECT_FALSE(WorldModel::Fair().ideal());
  EXPECT_EQ(WorldModel::Fair().Describe(),
            "gpus-per-node=8,host-bandwidth=50GB/s,restore-noise=lognormal:0.1,prior-error=0.3,"
            "fragmentation");
}

TEST(WorldModelTest, RestoresAtOnceOnOneNodeShareItsHostBandwidth) {
  // Host bandwidth of one link: two copies at once move at half speed each.
  const auto shared = TwoRestores(Contended(2, 1e9), Duration::zero());
  ASSERT_EQ(shared.size(), 2u);
  EXPECT_NEAR(shared[0], 0.201, 1e-6);
  EXPECT_NEAR(shared[1], 0.201, 1e-6);
  // On nodes of one GPU each, nothing is shared.
  const auto apart = TwoRestores(Contended(1, 1e9), Duration::zero());
  ASSERT_EQ(apart.size(), 2u);
  EXPECT_NEAR(apart[0], 0.101, 1e-6);
  EXPECT_NEAR(apart[1], 0.101, 1e-6);
  // The ideal world: each at its link's speed.
  const auto ideal = TwoRestores(WorldModel{}, Duration::zero());
  ASSERT_EQ(ideal.size(), 2u);
  EXPECT_NEAR(ideal[1], 0.101, 1e-6);
}

TEST(WorldModelTest, ACopyThatStartsLaterSlowsTheOneInFlight) {
  // The first moves alone from 1 ms; at 51 ms (50 MB moved) the second starts moving and both
  // get 0.5 GB/s: the first's last 50 MB end at 151 ms; the second then has 50 MB left alone,
  // done at 201 ms.
  const auto times = TwoRestores(Contended(2, 1e9), milliseconds(50));
  ASSERT_EQ(times.size(), 2u);
  EXPECT_NEAR(times[0], 0.151, 1e-6);
  EXPECT_NEAR(times[1], 0.201, 1e-6);
}

TEST(WorldModelTest, RestoreNoiseIsDrawnPerRestoreFromTheSeed) {
  WorldModel world;
  world.restore_noise.sigma = 0.5;
  world.seed = 7;
  const auto first = TwoRestores(world, Duration::zero());
  const auto again = TwoRestores(world, Duration::zero());
  world.seed = 8;
  const auto other = TwoRestores(world, Duration::zero());
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(other.size(), 2u);
  // Two GPUs: each restore is its own draw of 101 ms times a factor.
  EXPECT_NE(first[0], 0.101);
  EXPECT_NE(first[0], first[1]);
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
}

TEST(WorldModelTest, ThePolicySeesAnOffProfileAndTheRunFollowsTheTruth) {
  const Workload w = OneFunction();
  SimulatedExecutor::Options options;
  options.world.prior_error = 0.3;
  options.world.seed = 3;
  SimulatedExecutor executor(w, options);
  const double seen = ToMilliseconds(executor.functions()[0].ExecLatency(1));
  EXPECT_NE(seen, 50.0);
  EXPECT_GE(seen, 35.0);
  EXPECT_LE(seen, 65.0);
  // Restores the function for the request and runs it once its slice is resident.
  class RunOnRestore : public Script {
   public:
    void OnRestoreDone(GpuId g, FunctionId f, const Status& s) override {
      Script::OnRestoreDone(g, f, s);
      const RequestId r = 0;
      executor->Run(g, f, std::span(&r, 1));
    }
  } runner;
  runner.executor = &executor;
  runner.on_request = [&](const Request&) {
    executor.Restore(*executor.AcquireGpu(0, Duration::zero()), 0, 256 * kMiB);
  };
  executor.set_scheduler(&runner);
  ASSERT_TRUE(executor.RunToEnd(nullptr).ok());
  ASSERT_EQ(runner.ran_at.size(), 1u);
  EXPECT_NEAR(runner.ran_at[0], 0.101 + 0.050, 1e-9);
}

TEST(WorldModelTest, APipelinedRunThatOutrunsItsSlowedCopyEndsAfterTheRestore) {
  // GPU 0's copy is timed at 1 GB/s when it starts, but GPU 1's copy joins it on the node and
  // both move at 0.5 GB/s: the pipelined run's compute ends before its copy; it is answered when
  // the copy ends, after OnRestoreDone, as the Executor contract says.
  Workload w = OneFunction();
  SimulatedExecutor::Options options;
  options.world = Contended(2, 1e9);
  SimulatedExecutor executor(w, options);
  Script script;
  script.executor = &executor;
  script.on_request = [&](const Request&) {
    const GpuId g0 = *executor.AcquireGpu(0, Duration::zero());
    const GpuId g1 = *executor.AcquireGpu(0, Duration::zero());
    executor.Restore(g0, 0, 256 * kMiB);
    const RequestId r = 0;
    executor.RunPipelined(g0, 0, std::span(&r, 1));
    executor.Restore(g1, 0, 256 * kMiB);
  };
  executor.set_scheduler(&script);
  ASSERT_TRUE(executor.RunToEnd(nullptr).ok());
  ASSERT_EQ(script.events.size(), 3u);
  const auto at = [&](const std::string& event) {
    return std::find(script.events.begin(), script.events.end(), event) - script.events.begin();
  };
  EXPECT_LT(at("restored 0 on 0"), at("ran 0 on 0"));
  EXPECT_LT(at("ran 0 on 0"), 3);
  ASSERT_EQ(script.ran_at.size(), 1u);
  EXPECT_NEAR(script.ran_at[0], 0.201, 1e-6);
}

// `count` functions of 10 GiB (a, b, ...; 10 ms runs) on a 40 GiB GPU, one request of a at 0.
Workload TenGiBFunctions(int count) {
  Workload w;
  w.gpu = RoundGpu();
  for (int i = 0; i < count; ++i) {
    w.functions.push_back(MakeFunction(std::string(1, static_cast<char>('a' + i)), 1'000'000,
                                       10 * kGiB, milliseconds(10), seconds(10)));
  }
  AddRequest(w, 0, 0.0);
  return w;
}

SimulatedExecutor::Options Fragmented() {
  SimulatedExecutor::Options options;
  options.world.fragmentation = true;
  return options;
}

// Fragmentation on a 40 GiB GPU: three 10 GiB slices a, b, c at 0, 10 and 20 GiB; b leaves, so
// 20 GiB are free in two ranges of 10 GiB.
TEST(WorldModelTest, FragmentedMemoryPlacesFirstFitGrowsInPlaceMovesOrRefuses) {
  const Workload w = TenGiBFunctions(4);
  SimulatedExecutor executor(w, Fragmented());
  class Steps : public Script {
   public:
    void OnRestoreDone(GpuId g, FunctionId f, const Status& status) override {
      results.push_back(status);
      if (on_restored) on_restored(g, f, status);
    }
    std::vector<Status> results;
    std::function<void(GpuId, FunctionId, const Status&)> on_restored;
  } script;
  script.executor = &executor;
  GpuId gpu = 0;
  std::vector<std::string> log;
  script.on_request = [&](const Request&) {
    gpu = *executor.AcquireGpu(0, Duration::zero());
    EXPECT_EQ(executor.LargestFreeRange(gpu), 40 * kGiB);
    for (FunctionId f : {0u, 1u, 2u}) executor.Restore(gpu, f, 10 * kGiB);
  };
  int restored = 0;
  script.on_restored = [&](GpuId g, FunctionId f, const Status& status) {
    if (!status.ok()) {
      log.push_back(fmt::format("{} refused", f));
      return;
    }
    if (++restored < 3) return;
    if (f == 3) return;
    // a [0, 10), b [10, 20), c [20, 30): 10 GiB free at the end.
    EXPECT_EQ(executor.LargestFreeRange(g), 10 * kGiB);
    // Were b gone, [10, 20) and [30, 40) would be free; were b and c gone, [10, 40).
    const FunctionId b_only[] = {1};
    const FunctionId b_and_c[] = {1, 2};
    EXPECT_EQ(executor.LargestFreeRangeWithout(g, b_only), 10 * kGiB);
    EXPECT_EQ(executor.LargestFreeRangeWithout(g, b_and_c), 30 * kGiB);
    EXPECT_EQ(executor.Evict(g, 1, EvictHint::kDiscardIfClean), EvictOutcome::kDiscarded);
    // 20 GiB free in two ranges of 10: a 15 GiB slice fits in neither.
    EXPECT_EQ(executor.LargestFreeRange(g), 10 * kGiB);
    executor.Restore(g, 3, 15 * kGiB);  // fails, asynchronously
    // c grows in place to 18 GiB ([20, 38)); a grows in place to 12 GiB ([0, 12)): free are
    // [12, 20) and [38, 40).
    EXPECT_TRUE(executor.Resize(g, 2, 18 * kGiB));
    EXPECT_TRUE(executor.Resize(g, 0, 12 * kGiB));
    EXPECT_EQ(executor.LargestFreeRange(g), 8 * kGiB);
    // a to 21 GiB: not in place (c starts at 20), and no free range holds 21 GiB (its own
    // counted free: [0, 20) and [38, 40)), although 9 GiB more are free in total: refused,
    // nothing changes.
    EXPECT_FALSE(executor.Resize(g, 0, 21 * kGiB));
    EXPECT_EQ(executor.LargestFreeRange(g), 8 * kGiB);
    // Shrinking is always in place.
    EXPECT_TRUE(executor.Resize(g, 2, 10 * kGiB));
    EXPECT_EQ(executor.LargestFreeRange(g), 10 * kGiB);
    log.push_back("resized");
  };
  executor.set_scheduler(&script);
  EXPECT_FALSE(executor.RunToEnd(nullptr).ok());  // the request is never run
  EXPECT_EQ(log, (std::vector<std::string>{"resized", "3 refused"}));
  ASSERT_EQ(script.results.size(), 4u);
  EXPECT_EQ(script.results[3].code(), StatusCode::kResourceExhausted);
  EXPECT_NE(script.results[3].message().find("fragmented"), std::string::npos);
}

TEST(WorldModelTest, ASliceThatMovesDelaysItsNextRunByTheCopy) {
  // a [0, 10), b [10, 20); a grows to 15 GiB: not in place (b is next), so it moves to [20, 35)
  // at 500 GB/s: 10 GiB take 21.47 ms, and a's run (10 ms) starts after that.
  const Workload w = TenGiBFunctions(2);
  SimulatedExecutor executor(w, Fragmented());
  class Steps : public Script {
   public:
    void OnRestoreDone(GpuId g, FunctionId f, const Status& status) override {
      Script::OnRestoreDone(g, f, status);
      if (++restored < 2) return;
      moved_at = ToSeconds(executor->Now() - TimePoint{});
      EXPECT_TRUE(executor->Resize(g, 0, 15 * kGiB));
      EXPECT_EQ(executor->LargestFreeRange(g), 10 * kGiB);  // a's old range
      const RequestId r = 0;
      executor->Run(g, 0, std::span(&r, 1));
    }
    int restored = 0;
    double moved_at = 0;
  } script;
  script.executor = &executor;
  script.on_request = [&](const Request&) {
    const GpuId g = *executor.AcquireGpu(0, Duration::zero());
    executor.Restore(g, 0, 10 * kGiB);
    executor.Restore(g, 1, 10 * kGiB);
  };
  executor.set_scheduler(&script);
  ASSERT_TRUE(executor.RunToEnd(nullptr).ok());
  ASSERT_EQ(script.ran_at.size(), 1u);
  const double move = 10.0 * static_cast<double>(kGiB) / 500e9;
  EXPECT_NEAR(script.ran_at[0], script.moved_at + move + 0.010, 1e-6);
}

// The 100-function generated workload (30 s of it) under gshare: every departure from the
// ideal changes a figure the report gives.
class WorldOnGeneratedWorkload : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    GeneratorOptions options;
    options.functions = 100;
    options.duration = std::chrono::seconds(30);
    options.seed = 1;
    auto generated = GenerateWorkload(options);
    ASSERT_TRUE(generated.ok()) << generated.status().ToString();
    auto builtin = BuiltinModelCatalog();
    ASSERT_TRUE(builtin.ok());
    const GpuType* gpu = builtin->FindGpuType("a100-40gb");
    ASSERT_NE(gpu, nullptr);
    auto workload = BuildWorkload(generated->catalog, generated->trace, *gpu);
    ASSERT_TRUE(workload.ok()) << workload.status().ToString();
    workload_ = new Workload(std::move(workload).value());
  }
  static void TearDownTestSuite() {
    delete workload_;
    workload_ = nullptr;
  }

  static PolicyReport Run(const WorldModel& world, const char* policy = "gshare",
                          int max_gpus = 0) {
    SimulationOptions options;
    options.executor.world = world;
    options.executor.max_gpus = max_gpus;
    auto report = Simulate(*workload_, policy, options);
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    return report.ok() ? std::move(report).value() : PolicyReport{};
  }
  static bool Differ(const PolicyReport& a, const PolicyReport& b) {
    return a.gpu_seconds != b.gpu_seconds || a.slo_attainment != b.slo_attainment ||
           a.latency.p99_ms != b.latency.p99_ms || a.vgpu_gib_seconds != b.vgpu_gib_seconds;
  }

  static Workload* workload_;
};
Workload* WorldOnGeneratedWorkload::workload_ = nullptr;

TEST_F(WorldOnGeneratedWorkload, EachDepartureChangesAFigure) {
  const PolicyReport ideal = Run(WorldModel{});
  EXPECT_FALSE(Differ(ideal, Run(WorldModel{})));  // deterministic
  WorldModel contention = Contended(8, 10e9);
  EXPECT_TRUE(Differ(ideal, Run(contention)));
  WorldModel noise;
  noise.restore_noise.sigma = 0.1;
  EXPECT_TRUE(Differ(ideal, Run(noise)));
  WorldModel prior;
  prior.prior_error = 0.3;
  EXPECT_TRUE(Differ(ideal, Run(prior)));
  WorldModel fragmented;
  fragmented.fragmentation = true;
  EXPECT_TRUE(Differ(ideal, Run(fragmented)));
}

// Fragmented memory under a cluster cap, where memory is scarce: every policy still answers every
// request (restores that no free range holds are retried, not lost), and the figures differ from
// the same cap without fragmentation.
TEST_F(WorldOnGeneratedWorkload, UnderFragmentationEveryPolicyAnswersEveryRequest) {
  WorldModel fragmented;
  fragmented.fragmentation = true;
  for (const char* policy : {"gshare", "faaswap", "faaswap-fifo", "keepalive", "faascache"}) {
    const PolicyReport whole = Run(WorldModel{}, policy, 12);
    const PolicyReport pieces = Run(fragmented, policy, 12);
    EXPECT_EQ(pieces.requests, whole.requests) << policy;
    EXPECT_EQ(pieces.failed_requests, 0u) << policy;
    // A whole-GPU instance never fragments its GPU: keepalive and faascache are unmoved.
    const bool whole_gpus =
        std::string_view(policy).starts_with("keep") || std::string_view(policy) == "faascache";
    EXPECT_EQ(Differ(whole, pieces), !whole_gpus) << policy;
  }
}

// The generator's batching (max_batch and batch curves drawn per function) changes what the
// policies report on the 100-function workload; the regimes give different workloads.
TEST(GeneratedBatchingTest, BatchingAndTheRegimeChangeTheFigures) {
  auto simulate = [](bool batching, WorkloadRegime regime) {
    GeneratorOptions options;
    options.functions = 100;
    options.duration = std::chrono::seconds(30);
    options.batching = batching;
    options.regime = regime;
    // At SLO factor 3 keepalive's batcher (capped by the SLO) batches; at 1.5 a batch of two
    // already misses for most functions.
    options.slo_factor = 3;
    auto generated = GenerateWorkload(options);
    EXPECT_TRUE(generated.ok()) << generated.status().ToString();
    const GpuType* gpu = generated->catalog.FindGpuType("a100-40gb");
    auto workload = BuildWorkload(generated->catalog, generated->trace, *gpu);
    EXPECT_TRUE(workload.ok()) << workload.status().ToString();
    std::vector<PolicyReport> reports;
    for (const char* policy : {"keepalive", "gshare"}) {
      auto report = Simulate(*workload, policy, SimulationOptions{});
      EXPECT_TRUE(report.ok()) << report.status().ToString();
      reports.push_back(std::move(report).value());
    }
    return reports;
  };
  const auto batched = simulate(true, WorkloadRegime::kCompute);
  const auto single = simulate(false, WorkloadRegime::kCompute);
  for (std::size_t p = 0; p < batched.size(); ++p) {
    EXPECT_EQ(batched[p].requests, single[p].requests);
    EXPECT_NE(batched[p].gpu_seconds, single[p].gpu_seconds) << batched[p].policy;
    // Batching lowers what a request costs at best, so the trace's compute falls.
    EXPECT_LT(batched[p].compute_gpu_seconds, single[p].compute_gpu_seconds);
  }
  const auto memory = simulate(true, WorkloadRegime::kMemory);
  EXPECT_LT(memory[0].requests * 10, batched[0].requests);
}

}  // namespace
}  // namespace gshare
