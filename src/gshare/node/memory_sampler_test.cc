#include "gshare/node/memory_sampler.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <vector>

namespace gshare {
namespace {

MemorySample At(double t_s, std::uint64_t node, std::uint64_t functions) {
  MemorySample sample;
  sample.t_s = t_s;
  sample.node_rss_bytes = node;
  sample.functions_rss_bytes = functions;
  return sample;
}

double Node(const MemorySample& s) { return static_cast<double>(s.node_rss_bytes); }
double Total(const MemorySample& s) {
  return static_cast<double>(s.node_rss_bytes + s.functions_rss_bytes);
}

TEST(MemorySamplerTest, GrowthComparesTheMeansOfTwoWindows) {
  // Warm-up ends at 30 s: the baseline is the mean of the samples at 10, 20, 30 s (100, 110, 120),
  // the final value the mean of the last three (130, 140, 150).
  const std::vector<MemorySample> samples = {At(0, 50, 0),    At(10, 100, 10), At(20, 110, 10),
                                             At(30, 120, 10), At(40, 999, 10), At(50, 130, 20),
                                             At(60, 140, 20), At(70, 150, 20)};
  auto node = GrowthAfterWarmup(samples, 30, 3, Node);
  ASSERT_TRUE(node.has_value());
  EXPECT_DOUBLE_EQ(*node, (140.0 - 110.0) / 110.0);
  auto total = GrowthAfterWarmup(samples, 30, 3, Total);
  ASSERT_TRUE(total.has_value());
  EXPECT_DOUBLE_EQ(*total, (160.0 - 120.0) / 120.0);
  // A window of one: the last sample against the one at the end of the warm-up.
  EXPECT_DOUBLE_EQ(*GrowthAfterWarmup(samples, 30, 1, Node), (150.0 - 120.0) / 120.0);
  // A window wider than the samples on one side takes what there is.
  EXPECT_DOUBLE_EQ(*GrowthAfterWarmup(samples, 5, 3, Node), (140.0 - 50.0) / 50.0);
}

TEST(MemorySamplerTest, NoGrowthWithoutSamplesOnBothSidesOfTheWarmUp) {
  const std::vector<MemorySample> samples = {At(10, 100, 0), At(20, 100, 0)};
  EXPECT_FALSE(GrowthAfterWarmup(samples, 5, 3, Node).has_value());
  EXPECT_FALSE(GrowthAfterWarmup(samples, 20, 3, Node).has_value());
  EXPECT_FALSE(GrowthAfterWarmup({}, 20, 3, Node).has_value());
  EXPECT_FALSE(GrowthAfterWarmup(samples, 10, 0, Node).has_value());
  const std::vector<MemorySample> zero = {At(10, 0, 0), At(20, 100, 0)};
  EXPECT_FALSE(GrowthAfterWarmup(zero, 10, 3, Node).has_value());
}

TEST(MemorySamplerTest, ASampleReadsTheNodeAndSkipsAProcessThatIsGone) {
  // This process stands in for a function process; a pid above pid_max (2^22) never exists.
  const std::vector<pid_t> pids = {::getpid(), static_cast<pid_t>(1 << 30)};
  auto sample = SampleMemory(2.5, pids);
  ASSERT_TRUE(sample.ok()) << sample.status().ToString();
  EXPECT_EQ(sample->t_s, 2.5);
  EXPECT_EQ(sample->processes, 1u);
  EXPECT_GT(sample->node_rss_bytes, 0u);
  EXPECT_GT(sample->node_rss_anon_bytes, 0u);
  EXPECT_GT(sample->functions_rss_bytes, 0u);
  EXPECT_LE(sample->node_rss_anon_bytes, sample->node_rss_bytes + (1u << 20));
}

TEST(MemorySamplerTest, SamplesAtOnceThenEveryIntervalOfItsClockUntilStoppedTimedFromItsStart) {
  boost::asio::io_context loop;
  auto work = boost::asio::make_work_guard(loop);  // poll never finds the loop out of work
  ManualLoopClock clock(loop);
  clock.AdvanceTo(AtSeconds(7));
  int listed = 0;
  MemorySampler sampler(clock, std::chrono::hours(1), [&] {
    ++listed;
    return std::vector<pid_t>{::getpid()};
  });
  sampler.Start();
  ASSERT_EQ(sampler.samples().size(), 1u);
  EXPECT_EQ(sampler.samples()[0].t_s, 0.0);  // seconds since Start, not the clock's epoch
  EXPECT_EQ(sampler.samples()[0].processes, 1u);
  EXPECT_EQ(listed, 1);
  EXPECT_TRUE(sampler.error().ok());
  clock.Advance(std::chrono::minutes(59));
  loop.poll();
  EXPECT_EQ(sampler.samples().size(), 1u);  // not due yet
  clock.Advance(std::chrono::minutes(1));
  loop.poll();
  ASSERT_EQ(sampler.samples().size(), 2u);
  EXPECT_EQ(sampler.samples()[1].t_s, 3600.0);
  sampler.Stop();
  clock.Advance(std::chrono::hours(5));
  loop.poll();
  EXPECT_EQ(sampler.samples().size(), 2u);  // no sample after Stop
  EXPECT_EQ(clock.pending_timers(), 0u);
}

}  // namespace
}  // namespace gshare
