#include "gshare/sched/log_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "gshare/common/random.h"

namespace gshare {
namespace {

TEST(LogStatsTest, StartsFromThePriorAndConvergesToAConstantRatio) {
  LogStats stats;
  const double z = NormalQuantile(0.99);
  EXPECT_NEAR(z, 2.3263, 1e-4);
  EXPECT_NEAR(stats.Quantile(z), std::exp(z * LogStats::kPriorSigma), 1e-12);
  for (int i = 0; i < 200; ++i) stats.Observe(1.25);
  // The prior's spread decays away; the mean is the ratio observed.
  EXPECT_NEAR(stats.mean(), std::log(1.25), 1e-4);
  EXPECT_LT(stats.sigma(), 0.005);
  EXPECT_NEAR(stats.Quantile(z), 1.25, 0.02);
  EXPECT_NEAR(stats.Quantile(0.0), 1.25, 1e-3);
}

TEST(LogStatsTest, LearnsTheSpreadOfLogNormalRatios) {
  LogStats stats;
  Random random(3);
  for (int i = 0; i < 20'000; ++i) {
    // Box-Muller: one standard normal draw from two uniform ones.
    const double u = 1.0 - random.Uniform();
    const double normal =
        std::sqrt(-2.0 * std::log(u)) * std::cos(2 * std::numbers::pi * random.Uniform());
    stats.Observe(std::exp(0.1 + 0.3 * normal));
  }
  // Exponentially weighted (1/32 at the floor): the estimates wander about the truth.
  EXPECT_NEAR(stats.mean(), 0.1, 0.15);
  EXPECT_NEAR(stats.sigma(), 0.3, 0.1);
  const double z = NormalQuantile(0.99);
  EXPECT_GT(stats.Quantile(z), stats.Quantile(0.0) * 1.5);
}

TEST(LogStatsTest, IgnoresRatiosThatAreNotFiniteAndPositive) {
  LogStats stats;
  stats.Observe(0.0);
  stats.Observe(-1.0);
  stats.Observe(std::nan(""));
  stats.Observe(INFINITY);
  EXPECT_EQ(stats.count(), 0u);
  EXPECT_DOUBLE_EQ(stats.mean(), 0.0);
}

TEST(NormalQuantileTest, MatchesKnownValues) {
  EXPECT_NEAR(NormalQuantile(0.5), 0.0, 1e-9);
  EXPECT_NEAR(NormalQuantile(0.975), 1.95996, 1e-4);
  EXPECT_NEAR(NormalQuantile(0.001), -3.09023, 1e-4);
}

}  // namespace
}  // namespace gshare
