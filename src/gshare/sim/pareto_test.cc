#include "gshare/sim/pareto.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>

namespace gshare {
namespace {

ComparePoint Point(double attainment, double gpu_seconds, double cost_usd) {
  ComparePoint p;
  p.mean = {attainment, gpu_seconds, cost_usd, 10};
  return p;
}

TEST(ParetoTest, StudentTQuantileMatchesTheTables) {
  // df = 1 and 2 have closed forms; the rest are the printed table values.
  EXPECT_NEAR(StudentT975(1), std::tan(0.475 * std::numbers::pi), 1e-9);   // 12.7062
  EXPECT_NEAR(StudentT975(2), 0.95 / std::sqrt(2 * 0.975 * 0.025), 1e-9);  // 4.3027
  EXPECT_NEAR(StudentT975(4), 2.7764451, 1e-6);
  EXPECT_NEAR(StudentT975(9), 2.2621572, 1e-6);
  EXPECT_NEAR(StudentT975(29), 2.0452296, 1e-6);
  EXPECT_NEAR(StudentT975(100000), 1.959964, 1e-4);  // the normal quantile
}

TEST(ParetoTest, IntervalOfTheMeanIsStudentT) {
  // {1, 2, 3}: mean 2, s = 1, n = 3: 2 -/+ t(0.975, 2) / sqrt(3) = 2 -/+ 2.4841377.
  const Interval i = MeanInterval95({1, 2, 3});
  EXPECT_NEAR(i.lo, 2 - 2.4841377, 1e-6);
  EXPECT_NEAR(i.hi, 2 + 2.4841377, 1e-6);
  const Interval same = MeanInterval95({5, 5, 5, 5});
  EXPECT_DOUBLE_EQ(same.lo, 5);
  EXPECT_DOUBLE_EQ(same.hi, 5);
}

TEST(ParetoTest, AggregatesSeedsIntoMeansAndIntervals) {
  const ComparePoint p = AggregateRuns(
      {{"keep_alive", "15m"}}, {{0.98, 100, 1.0, 40}, {0.99, 110, 1.1, 50}, {1.00, 120, 1.2, 60}});
  EXPECT_NEAR(p.mean.slo_attainment, 0.99, 1e-12);
  EXPECT_NEAR(p.mean.gpu_seconds, 110, 1e-9);
  EXPECT_NEAR(p.mean.cost_usd, 1.1, 1e-12);
  EXPECT_NEAR(p.mean.p99_ms, 50, 1e-12);
  ASSERT_TRUE(p.ci_slo_attainment && p.ci_gpu_seconds && p.ci_cost_usd);
  // s = 0.01 and 10: half-widths 4.3026527 x s / sqrt(3); attainment's is cut at 1.
  EXPECT_NEAR(p.ci_slo_attainment->lo, 0.99 - 0.024841377, 1e-8);
  EXPECT_DOUBLE_EQ(p.ci_slo_attainment->hi, 1.0);
  EXPECT_NEAR(p.ci_gpu_seconds->lo, 110 - 24.841377, 1e-5);
  EXPECT_NEAR(p.ci_gpu_seconds->hi, 110 + 24.841377, 1e-5);
  EXPECT_NEAR(p.ci_cost_usd->hi, 1.1 + 0.24841377, 1e-7);
  EXPECT_EQ(p.knobs.at(0).second, "15m");

  const ComparePoint one = AggregateRuns({}, {{0.5, 7, 0.07, 3}});
  EXPECT_DOUBLE_EQ(one.mean.gpu_seconds, 7);
  EXPECT_FALSE(one.ci_slo_attainment || one.ci_gpu_seconds || one.ci_cost_usd);
}

TEST(ParetoTest, ChoosesTheCheapestPointThatReachesTheTarget) {
  const std::vector<ComparePoint> points = {Point(0.95, 50, 0.5), Point(0.99, 80, 0.8),
                                            Point(0.995, 70, 0.7), Point(0.999, 70, 0.7)};
  // B, C and D reach 0.99; C and D cost the least, D has the higher attainment.
  EXPECT_EQ(ChooseAtSlo(points, 0.99), 3u);
  EXPECT_EQ(ChooseAtSlo(points, 0.95), 0u);  // reaching the target exactly counts
  EXPECT_EQ(ChooseAtSlo(points, 0.9995), std::nullopt);
  EXPECT_EQ(ChooseAtSlo({}, 0.5), std::nullopt);
}

TEST(ParetoTest, MarksTheParetoFront) {
  std::vector<ComparePoint> points = {Point(0.95, 50, 0.5), Point(0.99, 80, 0.8),
                                      Point(0.995, 70, 0.7), Point(0.999, 70, 0.7),
                                      Point(0.999, 70, 0.7)};
  MarkParetoFront(points);
  EXPECT_TRUE(points[0].pareto);   // the fewest GPU-seconds
  EXPECT_FALSE(points[1].pareto);  // C: more attainment at fewer GPU-seconds
  EXPECT_FALSE(points[2].pareto);  // D: more attainment at the same GPU-seconds
  EXPECT_TRUE(points[3].pareto);   // equal points do not dominate each other
  EXPECT_TRUE(points[4].pareto);
}

CompareSummary TwoPolicies(bool intervals) {
  CompareSummary summary;
  summary.slo_target = 0.99;
  PolicyPoints a{"keepalive", {Point(0.9, 100, 1.0), Point(0.95, 200, 2.0)}, std::nullopt};
  a.points[0].knobs = {{"keep_alive", "1m"}, {"concurrency_target", "0.5"}};
  a.points[1].knobs = {{"keep_alive", "15m"}, {"concurrency_target", "0.5"}};
  PolicyPoints b{"gshare", {Point(0.992, 60, 0.6), Point(0.999, 90, 0.9)}, std::nullopt};
  b.points[0].knobs = {{"safety_margin", "0.2"}};
  b.points[1].knobs = {{"safety_margin", "0.8"}};
  if (intervals) {
    for (PolicyPoints* p : {&a, &b}) {
      for (ComparePoint& point : p->points) {
        point.ci_slo_attainment = Interval{0.8, 1.0};
        point.ci_gpu_seconds = Interval{50, 250};
        point.ci_cost_usd = Interval{0.5, 2.5};
      }
    }
  }
  summary.policies = {a, b};
  SelectAtSlo(summary);
  return summary;
}

TEST(ParetoTest, JsonFollowsTheContract) {
  const CompareSummary summary = TwoPolicies(false);
  const auto doc = nlohmann::json::parse(ParetoJson(summary));
  ASSERT_EQ(doc.size(), 4u);
  EXPECT_DOUBLE_EQ(doc["slo_target"].get<double>(), 0.99);
  EXPECT_EQ(doc["world"], "ideal");
  ASSERT_EQ(doc["policies"].size(), 2u);
  const auto& points = doc["policies"]["keepalive"];
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[1]["knobs"]["keep_alive"], "15m");
  EXPECT_EQ(points[1]["knobs"]["concurrency_target"], "0.5");
  EXPECT_DOUBLE_EQ(points[1]["slo_attainment"].get<double>(), 0.95);
  EXPECT_DOUBLE_EQ(points[1]["gpu_seconds"].get<double>(), 200);
  EXPECT_DOUBLE_EQ(points[1]["cost_usd"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(points[1]["p99_ms"].get<double>(), 10);
  EXPECT_FALSE(points[1].contains("ci95"));  // one seed: no interval
  EXPECT_DOUBLE_EQ(points[1]["utilisation"].get<double>(), 0);
  EXPECT_EQ(points[1].size(), 6u);

  const auto& at = doc["at_equal_slo"];
  EXPECT_DOUBLE_EQ(at["slo"].get<double>(), 0.99);
  EXPECT_TRUE(at["gpu_seconds"]["keepalive"].is_null());  // no point reaches 0.99
  EXPECT_TRUE(at["cost_usd"]["keepalive"].is_null());
  EXPECT_DOUBLE_EQ(at["gpu_seconds"]["gshare"].get<double>(), 60);
  EXPECT_DOUBLE_EQ(at["cost_usd"]["gshare"].get<double>(), 0.6);

  const auto with_ci = nlohmann::json::parse(ParetoJson(TwoPolicies(true)));
  const auto& ci = with_ci["policies"]["gshare"][0]["ci95"];
  ASSERT_EQ(ci.size(), 3u);
  EXPECT_EQ(ci["slo_attainment"], nlohmann::json::array({0.8, 1.0}));
  EXPECT_EQ(ci["gpu_seconds"], nlohmann::json::array({50.0, 250.0}));
  EXPECT_EQ(ci["cost_usd"], nlohmann::json::array({0.5, 2.5}));
}

TEST(ParetoTest, CsvAndTableMarkTheChosenPoint) {
  const CompareSummary summary = TwoPolicies(false);
  EXPECT_EQ(ParetoCsv(summary),
            "policy,knobs,slo_attainment,gpu_seconds,cost_usd,p99_ms,utilisation,pareto,chosen\n"
            "keepalive,keep_alive=1m;concurrency_target=0.5,0.900000,100.000,1.0000,10.0000,0."
            "000000,1,0\n"
            "keepalive,keep_alive=15m;concurrency_target=0.5,0.950000,200.000,2.0000,10.0000,0."
            "000000,1,0\n"
            "gshare,safety_margin=0.2,0.992000,60.000,0.6000,10.0000,0.000000,1,1\n"
            "gshare,safety_margin=0.8,0.999000,90.000,0.9000,10.0000,0.000000,1,0\n");
  CompareInfo info;
  info.trace_path = "t.csv";
  info.trace_format = "invocations";
  info.gpu_type = "round";
  const std::string table = ParetoTable(info, summary);
  EXPECT_NE(table.find("none of its 2 points reaches it (best: 95.00%)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("safety_margin=0.2"), std::string::npos) << table;
}

}  // namespace
}  // namespace gshare
