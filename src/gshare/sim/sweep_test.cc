#include "gshare/sim/sweep.h"

#include <gtest/gtest.h>

#include "gshare/sim/sim_test_util.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;

// Two functions in bursts 150 s apart: longer than the shortest keep-alive and pool idle time of
// the default grids, shorter than the longest, so the knobs matter.
Workload Bursty() {
  Workload w;
  w.gpu = testing::RoundGpu();
  w.functions.push_back(
      testing::MakeFunction("a", 200'000'000, 512 * kMiB, milliseconds(20), milliseconds(60), 4));
  w.functions.push_back(
      testing::MakeFunction("b", 100'000'000, 256 * kMiB, milliseconds(10), milliseconds(40), 4));
  for (int burst = 0; burst < 6; ++burst) {
    for (int i = 0; i < 30; ++i) {
      testing::AddRequest(w, static_cast<FunctionId>(i % 2), burst * 150.0 + i * 0.005);
    }
  }
  return w;
}

std::vector<SweepPoint> AllPoints() {
  std::vector<SweepPoint> points;
  for (const char* policy : {"keepalive", "faaswap", "gshare"}) {
    for (KnobSetting& setting : GridSettings(DefaultGrid(policy))) {
      points.push_back({policy, std::move(setting)});
    }
  }
  return points;
}

TEST(SweepTest, FiguresDoNotDependOnTheThreads) {
  const Workload w = Bursty();
  const auto points = AllPoints();
  SweepOptions options;
  std::size_t calls = 0;
  options.done = [&](std::size_t, const RunFigures&, double) { ++calls; };
  options.jobs = 1;
  auto serial = RunSweep(w, points, options);
  ASSERT_TRUE(serial.ok()) << serial.status().ToString();
  EXPECT_EQ(calls, points.size());
  options.jobs = 4;
  auto parallel = RunSweep(w, points, options);
  ASSERT_TRUE(parallel.ok()) << parallel.status().ToString();
  ASSERT_EQ(serial->size(), points.size());
  ASSERT_EQ(parallel->size(), points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ((*serial)[i].slo_attainment, (*parallel)[i].slo_attainment) << i;
    EXPECT_EQ((*serial)[i].gpu_seconds, (*parallel)[i].gpu_seconds) << i;
    EXPECT_EQ((*serial)[i].cost_usd, (*parallel)[i].cost_usd) << i;
    EXPECT_EQ((*serial)[i].p99_ms, (*parallel)[i].p99_ms) << i;
  }
  // Each point is the run `gshare sim` makes with the same knobs.
  SimulationOptions sim;
  sim.policy.keep_alive = std::chrono::seconds(10);
  sim.policy.concurrency_target = 0.7;
  auto direct = Simulate(w, "keepalive", sim);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ((*serial)[0].gpu_seconds, direct->gpu_seconds);
  EXPECT_EQ((*serial)[0].slo_attainment, direct->slo_attainment);
  // The knobs change what the policies do: not every keepalive point is the same.
  bool differ = false;
  for (std::size_t i = 1; i < 16; ++i)
    differ |= (*serial)[i].gpu_seconds != (*serial)[0].gpu_seconds;
  EXPECT_TRUE(differ);
}

TEST(SweepTest, AFailingPointNamesItsPolicyAndKnobs) {
  const Workload w = Bursty();
  std::vector<SweepPoint> points = AllPoints();
  points.insert(points.begin() + 2, SweepPoint{"magic", {{Knob::kPoolIdle, "1m"}}});
  SweepOptions options;
  options.jobs = 3;
  auto result = RunSweep(w, points, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_NE(result.status().message().find("magic pool_idle=1m: unknown policy 'magic'"),
            std::string::npos)
      << result.status().message();
}

}  // namespace
}  // namespace gshare
