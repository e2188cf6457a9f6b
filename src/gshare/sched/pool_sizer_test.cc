// The pooled policies' growth rule (PoolSizer): a GPU asked for now is counted at the time it will
// be ready, so a pool does not grow for a backlog that the GPUs there are (or are starting) clear
// sooner than a new one could start.
#include "gshare/sched/pool_sizer.h"

#include <gtest/gtest.h>

#include <string>

#include "gshare/sched/policy_registry.h"
#include "gshare/sched/testing/fake_executor.h"
#include "gshare/sched/testing/policy_param_name.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

PolicyOptions Startup(Duration startup) {
  PolicyOptions options;
  options.instance_start = startup;
  options.pool_idle = std::chrono::minutes(10);  // no GPU leaves during the test
  return options;
}

TEST(PoolSizerTest, GrowsOnlyWhenAGpuAskedForNowFinishesSooner) {
  PoolSizer pool(Startup(seconds(2)));
  pool.Added(/*ready=*/true);
  pool.Added(true);
  pool.Added(true);
  pool.Added(true);
  const TimePoint now = AtSeconds(100);
  const Duration work = milliseconds(150);
  // Meets its deadline where it is: no growth.
  EXPECT_FALSE(pool.ShouldGrow(now, work, now + seconds(1), now + seconds(1)));
  // Misses, but the queued work ends (1.9 s) before a new GPU could finish (2.15 s).
  EXPECT_FALSE(pool.ShouldGrow(now, work, now + milliseconds(1900), now + milliseconds(400)));
  // Misses, and a new GPU would finish sooner.
  EXPECT_TRUE(pool.ShouldGrow(now, work, now + seconds(3), now + milliseconds(400)));
  // One GPU (a quarter of four) starting at once: the next must wait for it.
  pool.Added(false);
  EXPECT_FALSE(pool.ShouldGrow(now, work, now + seconds(3), now + milliseconds(400)));
  pool.BecameReady();
  EXPECT_TRUE(pool.MayStart());
  pool.Removed(true);
  EXPECT_EQ(pool.alive(), 4u);
  EXPECT_EQ(pool.starting(), 0);
}

TEST(PoolSizerTest, StopsAtItsCap) {
  PolicyOptions options = Startup(Duration::zero());
  options.max_gpus = 2;
  PoolSizer pool(options);
  EXPECT_TRUE(pool.StartsReady());
  pool.Added(true);
  EXPECT_TRUE(pool.MayStart());
  pool.Added(true);
  EXPECT_TRUE(pool.AtCap());
  EXPECT_FALSE(pool.ShouldGrow(AtSeconds(0), milliseconds(1), AtSeconds(10), AtSeconds(1)));
}

ResolvedFunction Function(std::string name) {
  ResolvedFunction f;
  f.name = std::move(name);
  f.tenant = "t";
  f.model_bytes = 100'000'000;
  f.gpu_memory_bytes = 256 * kMiB;
  f.max_batch = 1;
  f.exec_by_batch = {milliseconds(100)};
  f.slo = milliseconds(400);
  return f;
}

GpuType Gpu() {
  GpuType gpu;
  gpu.name = "g";
  gpu.memory_bytes = 8 * kGiB;
  gpu.h2d_bytes_per_second = 10e9;
  gpu.restore_overhead = milliseconds(2);
  gpu.price_per_hour_usd = 2;
  return gpu;
}

class PooledGrowthTest : public ::testing::TestWithParam<std::string_view> {
 protected:
  // Four functions at a steady 8 requests/s each for 60 s (about 3.2 GPUs of work); then, at
  // 60 s, a burst of `burst` requests of the first at once. Returns the most GPUs held at once,
  // after checking that every GPU acquired got a slice.
  int PeakGpus(int burst, Duration startup) {
    std::vector<ResolvedFunction> functions = {Function("a"), Function("b"), Function("c"),
                                               Function("d")};
    FunctionRegistry registry(functions);
    testing::FakeExecutor executor({Gpu()}, &registry, {});
    RequestId id = 0;
    for (int i = 0; i < 480; ++i) {
      Request r;
      r.id = id++;
      r.function = static_cast<FunctionId>(i % 4);
      r.arrival = TimePoint(milliseconds(125 * (i / 4) + 31 * (i % 4)));
      r.deadline = r.arrival + functions[r.function].slo;
      executor.Arrive(r);
    }
    for (int i = 0; i < burst; ++i) {
      Request r;
      r.id = id++;
      r.function = 0;
      r.arrival = AtSeconds(60);
      r.deadline = r.arrival + functions[0].slo;
      executor.Arrive(r);
    }
    SchedulerContext context{&registry, &executor};
    auto policy = MakePolicy(GetParam(), context, Startup(startup));
    EXPECT_TRUE(policy.ok());
    if (!policy.ok()) return -1;
    executor.set_scheduler(policy->get());
    const Status status = executor.RunToEnd(1'000'000);
    EXPECT_TRUE(status.ok()) << status.ToString();
    // Every GPU the pool grew by took work: growth and placement agree.
    EXPECT_EQ(executor.gpus_never_used(), 0);
    return executor.peak_gpus_held();
  }
};

TEST_P(PooledGrowthTest, ABacklogShorterThanAStartAddsNoGpu) {
  // 40 requests of 100 ms on the GPUs there are end within about 4 s: a GPU that takes 10 s to
  // start cannot finish any of them sooner, so the pool stays as the steady load left it.
  const int steady = PeakGpus(0, seconds(10));
  ASSERT_GT(steady, 0);
  EXPECT_EQ(PeakGpus(40, seconds(10)), steady);
}

TEST_P(PooledGrowthTest, ABacklogLongerThanAStartGrowsThePool) {
  // 1,000 requests (100 s of work for one GPU): new GPUs help, and the pool grows.
  const int steady = PeakGpus(0, seconds(10));
  const int peak = PeakGpus(1000, seconds(10));
  EXPECT_GT(peak, steady);
  // But not past the need: a GPU that starts 10 s late is worth adding only while the backlog
  // lasts longer than that, so no more than 100 s / 10 s = 10 of them (and one in flight).
  EXPECT_LE(peak, steady + 11);
}

INSTANTIATE_TEST_SUITE_P(Pooled, PooledGrowthTest,
                         ::testing::Values("faaswap", "faaswap-fifo", "gshare",
                                           "gshare-adaptive-margin"),
                         testing::PolicyParamName);

}  // namespace
}  // namespace gshare
