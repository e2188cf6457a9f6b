#include "gshare/metrics/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gshare/metrics/gshare_metrics.h"
#include "gshare/metrics/registry.h"

namespace gshare::metrics {
namespace {

std::vector<Sample> ParseOk(std::string_view text) {
  auto samples = ParsePrometheusText(text);
  EXPECT_TRUE(samples.ok()) << samples.status().ToString();
  return samples.ok() ? std::move(samples).value() : std::vector<Sample>{};
}

std::string ParseError(std::string_view text) {
  auto samples = ParsePrometheusText(text);
  EXPECT_FALSE(samples.ok()) << "parsed: " << text;
  if (samples.ok()) return "";
  EXPECT_EQ(samples.status().code(), StatusCode::kInvalidArgument);
  return samples.status().message();
}

TEST(PrometheusTextTest, ReadsSamplesAndSkipsComments) {
  const auto samples = ParseOk(
      "# HELP gshare_swaps_total Restores.\n"
      "# TYPE gshare_swaps_total counter\n"
      "gshare_swaps_total{function=\"mlp\",tenant=\"demo\"} 3\n"
      "\n"
      "   \t\n"
      "  # an indented comment\n"
      "gshare_gpu_seconds_total 12.5\n"
      "gshare_up 1 1700000000000\n");
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].name, "gshare_swaps_total");
  ASSERT_EQ(samples[0].labels.size(), 2u);
  EXPECT_EQ(samples[0].labels[0], (std::pair<std::string, std::string>{"function", "mlp"}));
  EXPECT_EQ(samples[0].Label("tenant"), "demo");
  EXPECT_FALSE(samples[0].Label("outcome").has_value());
  EXPECT_EQ(samples[0].value, 3);
  EXPECT_FALSE(samples[0].timestamp_ms.has_value());
  EXPECT_EQ(samples[1].name, "gshare_gpu_seconds_total");
  EXPECT_TRUE(samples[1].labels.empty());
  EXPECT_EQ(samples[1].value, 12.5);
  EXPECT_EQ(samples[2].timestamp_ms, 1700000000000);
}

TEST(PrometheusTextTest, UnescapesLabelValues) {
  const auto samples =
      ParseOk("m{a=\"x\\\"y\",b=\"back\\\\slash\",c=\"two\\nlines\",d=\"\",e=\"{},= #\"} 1\n");
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].Label("a"), "x\"y");
  EXPECT_EQ(samples[0].Label("b"), "back\\slash");
  EXPECT_EQ(samples[0].Label("c"), "two\nlines");
  EXPECT_EQ(samples[0].Label("d"), "");
  EXPECT_EQ(samples[0].Label("e"), "{},= #");
}

TEST(PrometheusTextTest, AcceptsTheFormatsLatitude) {
  // Blanks between the tokens, a trailing comma, an empty label set, CRLF line ends, no final
  // newline, colons in metric names.
  const auto samples = ParseOk(
      "a { x = \"1\" , y=\"2\", } 4\r\n"
      "b{} 5\r\n"
      "c:rate\t6\t-7\n"
      "d 8");
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].Label("x"), "1");
  EXPECT_EQ(samples[0].Label("y"), "2");
  EXPECT_EQ(samples[0].value, 4);
  EXPECT_TRUE(samples[1].labels.empty());
  EXPECT_EQ(samples[2].name, "c:rate");
  EXPECT_EQ(samples[2].timestamp_ms, -7);
  EXPECT_EQ(samples[3].value, 8);
}

TEST(PrometheusTextTest, ReadsEverySpellingOfAValue) {
  const auto samples =
      ParseOk("v 1e+06\nv -2.5E-3\nv +3\nv .5\nv NaN\nv +Inf\nv -Inf\nv Inf\nv nan\nv 0\nv -0\n");
  ASSERT_EQ(samples.size(), 11u);
  EXPECT_EQ(samples[0].value, 1e6);
  EXPECT_EQ(samples[1].value, -2.5e-3);
  EXPECT_EQ(samples[2].value, 3);
  EXPECT_EQ(samples[3].value, 0.5);
  EXPECT_TRUE(std::isnan(samples[4].value));
  EXPECT_EQ(samples[5].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(samples[6].value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(samples[7].value, std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(samples[8].value));
  EXPECT_EQ(samples[9].value, 0);
}

TEST(PrometheusTextTest, RefusesMalformedLinesNamingTheLine) {
  EXPECT_NE(ParseError("ok 1\n9bad 1\n").find("line 2"), std::string::npos);
  EXPECT_NE(ParseError("m\n").find("without a value"), std::string::npos);
  EXPECT_NE(ParseError("m 1x\n").find("not a sample value"), std::string::npos);
  EXPECT_NE(ParseError("m 0x10\n").find("not a sample value"), std::string::npos);
  EXPECT_NE(ParseError("m 1e999\n").find("not a sample value"), std::string::npos);
  EXPECT_NE(ParseError("m 1 2.5\n").find("not a timestamp"), std::string::npos);
  EXPECT_NE(ParseError("m 1 2 3\n").find("after the timestamp"), std::string::npos);
  EXPECT_NE(ParseError("m{a=\"1\" 2\n").find("',' or '}'"), std::string::npos);
  EXPECT_NE(ParseError("m{a=\"1\n").find("closing"), std::string::npos);
  EXPECT_NE(ParseError("m{a=\"\\t\"} 1\n").find("unknown escape"), std::string::npos);
  EXPECT_NE(ParseError("m{a=1} 1\n").find("to open a label value"), std::string::npos);
  EXPECT_NE(ParseError("m{a\"1\"} 1\n").find("'='"), std::string::npos);
  EXPECT_NE(ParseError("m{a=\"1\",a=\"2\"} 1\n").find("twice"), std::string::npos);
  EXPECT_NE(ParseError("m{1a=\"1\"} 1\n").find("label name"), std::string::npos);
  EXPECT_NE(ParseError("m{,} 1\n").find("label name"), std::string::npos);
  EXPECT_NE(ParseError("m-x 1\n").find("after the metric name"), std::string::npos);
}

TEST(PrometheusTextTest, SumsAMetricOverItsLabelSets) {
  const auto samples = ParseOk(
      "gshare_requests_total{function=\"a\",tenant=\"t\",outcome=\"ok\"} 5\n"
      "gshare_requests_total{function=\"a\",tenant=\"t\",outcome=\"error\"} 2\n"
      "gshare_requests_total{function=\"a\",tenant=\"u\",outcome=\"ok\"} 7\n"
      "gshare_requests_total{function=\"b\",tenant=\"t\",outcome=\"ok\"} 11\n"
      "gshare_requests_total_other 100\n");
  EXPECT_EQ(SumSamples(samples, "gshare_requests_total"), 25);
  EXPECT_EQ(SumSamples(samples, "gshare_requests_total", {{"function", "a"}, {"tenant", "t"}}), 7);
  EXPECT_EQ(SumSamples(samples, "gshare_requests_total", {{"outcome", "ok"}}), 23);
  EXPECT_FALSE(SumSamples(samples, "gshare_requests_total", {{"function", "c"}}).has_value());
  EXPECT_FALSE(SumSamples(samples, "gshare_missing_total").has_value());
}

// What the registry writes, the parser reads back: every series of the full metric set, with a
// function whose names need escaping.
TEST(PrometheusTextTest, ReadsTheRegistrysExposition) {
  auto metrics = GshareMetrics::Create();
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  auto series = (*metrics)->AddFunction("quote\"back\\slash\nnewline", "demo");
  ASSERT_TRUE(series.ok()) << series.status().ToString();
  (*series)->RequestFinished(RequestOutcome::kOk, std::chrono::milliseconds(3));
  (*series)->RequestFinished(RequestOutcome::kOk, std::chrono::milliseconds(4));
  (*series)->RequestFinished(RequestOutcome::kRejected, std::chrono::milliseconds(0));
  const auto samples = ParseOk((*metrics)->Expose());
  EXPECT_EQ(SumSamples(samples, "gshare_requests_total",
                       {{"function", "quote\"back\\slash\nnewline"}, {"tenant", "demo"}}),
            3);
  EXPECT_EQ(SumSamples(samples, "gshare_requests_total", {{"outcome", "ok"}}), 2);
  EXPECT_EQ(SumSamples(samples, "gshare_request_duration_seconds_count"), 2);
  EXPECT_EQ(SumSamples(samples, "gshare_gpu_seconds_total"), 0);
  EXPECT_EQ(SumSamples(samples, "gshare_request_duration_seconds_bucket", {{"le", "+Inf"}}), 2);
}

}  // namespace
}  // namespace gshare::metrics
