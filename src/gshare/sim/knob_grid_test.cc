#include "gshare/sim/knob_grid.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

std::vector<PolicyGrid> Grids() {
  return {DefaultGrid("keepalive"), DefaultGrid("faaswap"), DefaultGrid("gshare")};
}

TEST(KnobGridTest, DefaultGridsSweepEachPolicysOwnKnobs) {
  const auto settings = GridSettings(DefaultGrid("keepalive"));
  ASSERT_EQ(settings.size(), 16u);
  const KnobSetting first = {{Knob::kKeepAlive, "10s"}, {Knob::kConcurrencyTarget, "0.7"}};
  const KnobSetting second = {{Knob::kKeepAlive, "10s"}, {Knob::kConcurrencyTarget, "1.0"}};
  const KnobSetting last = {{Knob::kKeepAlive, "15m"}, {Knob::kConcurrencyTarget, "4.0"}};
  EXPECT_EQ(settings[0], first);
  EXPECT_EQ(settings[1], second);
  EXPECT_EQ(settings[15], last);
  EXPECT_EQ(GridSettings(DefaultGrid("faascache")).size(), 24u);
  EXPECT_EQ(GridSettings(DefaultGrid("faaswap")).size(), 9u);
  EXPECT_EQ(GridSettings(DefaultGrid("gshare")).size(), 16u);
  // The variants of gshare run its algorithm: the same knobs.
  for (const char* variant :
       {"fifo", "gshare-no-lazy", "gshare-no-fast-swap", "gshare-no-cache-queue",
        "gshare-no-timeslice", "gshare-adaptive-margin", "gshare-mean-margin", "gshare-fixed-hold",
        "gshare-eager-restore", "gshare-reactive-replicas", "gshare-queue-batch"}) {
    EXPECT_EQ(KnobsOf(variant), KnobsOf("gshare")) << variant;
  }
  // A policy without a default grid runs once, at the defaults, and may take any knob.
  const auto none = GridSettings(DefaultGrid("other"));
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(none[0].empty());
  EXPECT_EQ(KnobsOf("other").size(), 7u);
  // faascache sweeps its cache's capacity, without which it is keepalive.
  EXPECT_EQ(KnobsOf("faascache"), (std::vector<Knob>{Knob::kKeepAlive, Knob::kConcurrencyTarget,
                                                     Knob::kGpusPerFunction}));
}

TEST(KnobGridTest, SettingsSetTheirPolicyOptions) {
  PolicyOptions options;
  ASSERT_TRUE(ApplySetting({{Knob::kKeepAlive, "5m"},
                            {Knob::kConcurrencyTarget, "1.0"},
                            {Knob::kPoolIdle, "10s"},
                            {Knob::kProxyOverhead, "0.2"},
                            {Knob::kSafetyMargin, "0.8"},
                            {Knob::kGpusPerFunction, "2.5"},
                            {Knob::kProtectHorizon, "15m"}},
                           options)
                  .ok());
  EXPECT_EQ(options.gshare.protect_horizon, minutes(15));
  EXPECT_DOUBLE_EQ(options.gpus_per_function, 2.5);
  EXPECT_EQ(options.keep_alive, minutes(5));
  EXPECT_DOUBLE_EQ(options.concurrency_target, 1.0);
  EXPECT_EQ(options.pool_idle, seconds(10));
  EXPECT_DOUBLE_EQ(options.proxy_overhead_fraction, 0.2);
  EXPECT_DOUBLE_EQ(options.gshare.safety_margin, 0.8);

  for (const auto& [knob, bad] :
       std::vector<std::pair<Knob, std::string>>{{Knob::kKeepAlive, "5"},
                                                 {Knob::kPoolIdle, "-1s"},
                                                 {Knob::kConcurrencyTarget, "0.01"},
                                                 {Knob::kProxyOverhead, "nan"},
                                                 {Knob::kSafetyMargin, "inf"},
                                                 {Knob::kGpusPerFunction, "-1"},
                                                 {Knob::kSafetyMargin, "0.4x"},
                                                 {Knob::kSafetyMargin, ""}}) {
    const Status s = SetKnob(knob, bad, options);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(KnobName(knob)), std::string::npos) << s.message();
  }
}

TEST(KnobGridTest, KnobFlagReplacesTheValuesOfOneKnob) {
  auto grids = Grids();
  ASSERT_TRUE(OverrideKnob("keepalive.keep_alive=30s,2m", grids).ok());
  const auto settings = GridSettings(grids[0]);
  ASSERT_EQ(settings.size(), 8u);
  EXPECT_EQ(settings[0][0].second, "30s");
  EXPECT_EQ(settings[7][0].second, "2m");
  EXPECT_EQ(settings[7][1].second, "4.0");  // the other knob keeps its defaults
  ASSERT_TRUE(OverrideKnob("gshare.safety_margin=0.5", grids).ok());
  EXPECT_EQ(GridSettings(grids[2]).size(), 4u);  // x pool_idle {5s, 1m} x protect_horizon
}

TEST(KnobGridTest, KnobFlagErrorsNameWhatIsWrong) {
  const auto expect_error = [](const std::string& flag, const std::string& expected,
                               StatusCode code = StatusCode::kInvalidArgument) {
    auto grids = Grids();
    const auto before = GridSettings(grids[0]);
    const Status s = OverrideKnob(flag, grids);
    EXPECT_EQ(s.code(), code) << flag << ": " << s.ToString();
    EXPECT_NE(s.message().find(expected), std::string::npos) << flag << ": " << s.message();
    EXPECT_EQ(GridSettings(grids[0]), before) << flag;
  };
  expect_error("magic.keep_alive=1m", "unknown policy 'magic'", StatusCode::kNotFound);
  expect_error("fifo.pool_idle=1m", "policy 'fifo' is not among those compared");
  expect_error("keepalive.pool_idle=1m",
               "unknown knob 'pool_idle' for keepalive (its knobs: keep_alive, "
               "concurrency_target)");
  expect_error("keepalive.bogus=1", "unknown knob 'bogus'");
  expect_error("keepalive.keep_alive", "expected POLICY.KNOB=V1,V2,...");
  expect_error("keep_alive=1m", "expected POLICY.KNOB=V1,V2,...");
  expect_error("keepalive.keep_alive=1m,5", "keepalive.keep_alive: '5': a duration needs a unit");
  expect_error("keepalive.keep_alive=1m,", "keepalive.keep_alive");
  expect_error("keepalive.concurrency_target=0.5,20", "'20' is outside [0.05, 10]");
  expect_error("keepalive.keep_alive=1m,60s", "the value '60s' is listed twice");
  std::string many = "keepalive.keep_alive=";
  for (int i = 1; i <= 33; ++i) many += std::to_string(i) + "s,";
  many.pop_back();
  expect_error(many, "33 values, more than the 32");

  auto grids = Grids();
  ASSERT_TRUE(OverrideKnob("keepalive.keep_alive=1m", grids).ok());
  const Status twice = OverrideKnob("keepalive.keep_alive=2m", grids);
  EXPECT_NE(twice.message().find("keepalive.keep_alive is given twice"), std::string::npos)
      << twice.message();
}

}  // namespace
}  // namespace gshare
