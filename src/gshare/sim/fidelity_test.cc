#include "gshare/sim/fidelity.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gshare {
namespace {

using std::chrono::milliseconds;

TEST(ProfileLearnerTest, MediansOfRunsAloneInterpolatedAcrossBatchSizes) {
  ProfileLearner learner;
  learner.Observe(0, 1, milliseconds(9), true);
  learner.Observe(0, 1, milliseconds(11), true);
  learner.Observe(0, 1, milliseconds(10), true);
  learner.Observe(0, 1, milliseconds(50), false);  // shared its GPU: not used, there are others
  learner.Observe(0, 4, milliseconds(40), false);  // the only batch of 4: used
  auto profile = learner.ExecByBatch(0, 6);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  ASSERT_EQ(profile->size(), 6u);
  EXPECT_EQ((*profile)[0], milliseconds(10));
  EXPECT_EQ((*profile)[1], milliseconds(20));  // a third of the way from 10 to 40 ms
  EXPECT_EQ((*profile)[2], milliseconds(30));
  EXPECT_EQ((*profile)[3], milliseconds(40));
  EXPECT_EQ((*profile)[5], milliseconds(40));  // held beyond the largest observed
  EXPECT_EQ(learner.observations(0), 5u);
  EXPECT_EQ(learner.ExecByBatch(1, 4).status().code(), StatusCode::kNotFound);
}

TEST(FidelityTest, SignedRelativeErrorsAndTheAttainmentDifference) {
  FidelityReport report;
  report.policy = "gshare";
  report.requests = 300;
  report.live = {.slo_attainment = 0.98, .gpu_seconds = 100, .p50_ms = 20, .p99_ms = 0};
  report.sim = {.slo_attainment = 0.99, .gpu_seconds = 90, .p50_ms = 25, .p99_ms = 40};
  const auto json = nlohmann::json::parse(FidelityJson(report));
  EXPECT_EQ(json["policy"], "gshare");
  EXPECT_EQ(json["requests"], 300);
  EXPECT_DOUBLE_EQ(json["relative_error"]["gpu_seconds"].get<double>(), -0.1);
  EXPECT_DOUBLE_EQ(json["relative_error"]["p50_ms"].get<double>(), 0.25);
  EXPECT_TRUE(json["relative_error"]["p99_ms"].is_null());  // live 0: no ratio
  EXPECT_NEAR(json["slo_attainment_diff"].get<double>(), 0.01, 1e-12);
  EXPECT_DOUBLE_EQ(json["live"]["gpu_seconds"].get<double>(), 100);
}

}  // namespace
}  // namespace gshare
