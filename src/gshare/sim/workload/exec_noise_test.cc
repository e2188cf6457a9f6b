#include "gshare/sim/workload/exec_noise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace gshare {
namespace {

Workload Requests(std::size_t n) {
  Workload w;
  w.requests.resize(n);
  for (std::size_t i = 0; i < n; ++i) w.requests[i].id = i;
  return w;
}

TEST(ExecNoiseTest, ParsesAndRejectsWithClearErrors) {
  EXPECT_TRUE(ParseExecNoise("none")->none());
  auto n = ParseExecNoise("lognormal:0.2");
  ASSERT_TRUE(n.ok());
  EXPECT_DOUBLE_EQ(n->sigma, 0.2);
  EXPECT_EQ(n->straggler_p, 0);
  n = ParseExecNoise("lognormal:0.3,straggler:0.01:10");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_DOUBLE_EQ(n->straggler_p, 0.01);
  EXPECT_DOUBLE_EQ(n->straggler_x, 10);
  EXPECT_EQ(FormatExecNoise(*n), "lognormal:0.3,straggler:0.01:10");
  for (const char* bad :
       {"", "gauss:0.2", "lognormal:", "lognormal:nan", "lognormal:inf", "lognormal:-0.1",
        "lognormal:3", "lognormal:0.2,straggler:2:10", "lognormal:0.2,straggler:0.1:0.5",
        "lognormal:0.2,straggler:0.1", "lognormal:0.2,foo:1:2"}) {
    auto parsed = ParseExecNoise(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ExecNoiseTest, DrawsFactorsOfMeanOneWithTheStragglersAsked) {
  Workload w = Requests(200'000);
  DrawExecNoise(*ParseExecNoise("lognormal:0.2,straggler:0.01:10"), 7, w);
  ASSERT_EQ(w.exec_factors.size(), w.requests.size());
  double sum = 0;
  std::size_t stragglers = 0;
  for (float f : w.exec_factors) {
    ASSERT_GT(f, 0);
    sum += f;
    if (f > 4) ++stragglers;  // a lognormal(0.2) factor is above 4 with odds below 1e-12
  }
  const double mean = sum / static_cast<double>(w.exec_factors.size());
  // Mean 1 x 0.99 + 10 x 0.01 = 1.09, within sampling error.
  EXPECT_NEAR(mean, 1.09, 0.01);
  EXPECT_NEAR(static_cast<double>(stragglers) / 200'000, 0.01, 0.002);
  // The same seed draws the same factors; another seed others.
  Workload again = Requests(200'000);
  DrawExecNoise(*ParseExecNoise("lognormal:0.2,straggler:0.01:10"), 7, again);
  EXPECT_EQ(again.exec_factors, w.exec_factors);
  DrawExecNoise(*ParseExecNoise("lognormal:0.2,straggler:0.01:10"), 8, again);
  EXPECT_NE(again.exec_factors, w.exec_factors);
  DrawExecNoise(*ParseExecNoise("none"), 7, again);
  EXPECT_TRUE(again.exec_factors.empty());
}

}  // namespace
}  // namespace gshare
