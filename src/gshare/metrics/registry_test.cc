#include "gshare/metrics/registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace gshare::metrics {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(RegistryTest, ExposesTheTextFormatExactly) {
  Registry registry;
  auto hits =
      registry.AddCounter("gshare_hits_total", "Hits, with \\ and\nnewline.", {"path", "code"});
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  auto plain = (*hits)->WithLabels({"/a", "200"});
  ASSERT_TRUE(plain.ok());
  (*plain)->Inc();
  (*plain)->Inc();
  ASSERT_TRUE((*plain)->Add(0.5).ok());
  auto odd = (*hits)->WithLabels({"q\"uote\\back\nnl", "500"});
  ASSERT_TRUE(odd.ok());
  ASSERT_TRUE((*odd)->Add(3).ok());

  auto temperature = registry.AddGauge("gshare_temperature_celsius", "A gauge without labels.");
  ASSERT_TRUE(temperature.ok());
  auto t = (*temperature)->WithLabels({});
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->Set(-1.5).ok());

  auto wait = registry.AddHistogram("gshare_wait_seconds", "Wait.", {"fn"}, {0.5, 1, 2.5});
  ASSERT_TRUE(wait.ok()) << wait.status().ToString();
  auto a = (*wait)->WithLabels({"a"});
  ASSERT_TRUE(a.ok());
  for (const double v : {0.25, 0.5, 2.0, 7.0}) ASSERT_TRUE((*a)->Observe(v).ok());

  auto size = registry.AddHistogram("gshare_size_bytes", "Sizes.", {}, {1024});
  ASSERT_TRUE(size.ok());
  ASSERT_TRUE((*(*size)->WithLabels({}))->Observe(4096).ok());

  // A labelled family without children writes nothing.
  ASSERT_TRUE(registry.AddCounter("gshare_unused_total", "Unused.", {"x"}).ok());

  EXPECT_EQ(registry.Expose(),
            "# HELP gshare_hits_total Hits, with \\\\ and\\nnewline.\n"
            "# TYPE gshare_hits_total counter\n"
            "gshare_hits_total{path=\"/a\",code=\"200\"} 2.5\n"
            "gshare_hits_total{path=\"q\\\"uote\\\\back\\nnl\",code=\"500\"} 3\n"
            "# HELP gshare_temperature_celsius A gauge without labels.\n"
            "# TYPE gshare_temperature_celsius gauge\n"
            "gshare_temperature_celsius -1.5\n"
            "# HELP gshare_wait_seconds Wait.\n"
            "# TYPE gshare_wait_seconds histogram\n"
            "gshare_wait_seconds_bucket{fn=\"a\",le=\"0.5\"} 2\n"
            "gshare_wait_seconds_bucket{fn=\"a\",le=\"1\"} 2\n"
            "gshare_wait_seconds_bucket{fn=\"a\",le=\"2.5\"} 3\n"
            "gshare_wait_seconds_bucket{fn=\"a\",le=\"+Inf\"} 4\n"
            "gshare_wait_seconds_sum{fn=\"a\"} 9.75\n"
            "gshare_wait_seconds_count{fn=\"a\"} 4\n"
            "# HELP gshare_size_bytes Sizes.\n"
            "# TYPE gshare_size_bytes histogram\n"
            "gshare_size_bytes_bucket{le=\"1024\"} 0\n"
            "gshare_size_bytes_bucket{le=\"+Inf\"} 1\n"
            "gshare_size_bytes_sum 4096\n"
            "gshare_size_bytes_count 1\n");
}

TEST(RegistryTest, FormatsIntegersExactlyAndFloatsThatRoundTrip) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(-0.0), "0");
  EXPECT_EQ(FormatValue(1e6), "1000000");
  EXPECT_EQ(FormatValue(-42), "-42");
  EXPECT_EQ(FormatValue(9007199254740992.0), "9007199254740992");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(2.5), "2.5");
  EXPECT_EQ(FormatValue(1e20), "1e+20");
  EXPECT_EQ(FormatValue(kNaN), "NaN");
  EXPECT_EQ(FormatValue(kInf), "+Inf");
  EXPECT_EQ(FormatValue(-kInf), "-Inf");
  for (const double v : {1.0 / 3.0, 0.1 + 0.2, 1e-300, 123456.789e10, -2.0 / 7.0, 5e-324}) {
    EXPECT_EQ(std::strtod(FormatValue(v).c_str(), nullptr), v) << FormatValue(v);
  }
}

TEST(RegistryTest, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeHelp("a\\b\"c\nd"), "a\\\\b\"c\\nd");  // quotes stay in HELP
}

TEST(RegistryTest, RefusesBadNames) {
  Registry registry;
  const std::vector<std::string> none;
  for (const char* name : {"", "gshare-hits_total", "9gshare_total", "gshare_h it_total"}) {
    const auto r = registry.AddCounter(name, "help");
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  auto prefix = registry.AddCounter("other_hits_total", "help");
  ASSERT_FALSE(prefix.ok());
  EXPECT_NE(prefix.status().message().find("does not start with 'gshare_'"), std::string::npos);
  auto suffix = registry.AddCounter("gshare_hits", "help");
  ASSERT_FALSE(suffix.ok());
  EXPECT_NE(suffix.status().message().find("'_total'"), std::string::npos);
  EXPECT_FALSE(registry.AddGauge("gshare_things_total", "help").ok());
  EXPECT_FALSE(registry.AddHistogram("gshare_things_count", "help", {}, {1}).ok());
  EXPECT_FALSE(registry.AddGauge("gshare_", "help").ok());
  EXPECT_FALSE(registry.AddGauge("gshare_things", "").ok());  // no HELP
  // Label names.
  EXPECT_FALSE(registry.AddGauge("gshare_a", "help", {"__reserved"}).ok());
  EXPECT_FALSE(registry.AddGauge("gshare_b", "help", {"a-b"}).ok());
  EXPECT_FALSE(registry.AddGauge("gshare_c", "help", {"1a"}).ok());
  EXPECT_FALSE(registry.AddGauge("gshare_d", "help", {"x", "x"}).ok());
  EXPECT_FALSE(registry.AddHistogram("gshare_e", "help", {"le"}, {1}).ok());
  // Bucket bounds.
  EXPECT_FALSE(registry.AddHistogram("gshare_f", "help", {}, {}).ok());
  EXPECT_FALSE(registry.AddHistogram("gshare_g", "help", {}, {1, 1}).ok());
  EXPECT_FALSE(registry.AddHistogram("gshare_h", "help", {}, {2, 1}).ok());
  EXPECT_FALSE(registry.AddHistogram("gshare_i", "help", {}, {1, kInf}).ok());
  EXPECT_FALSE(registry.AddHistogram("gshare_j", "help", {}, {kNaN}).ok());
  // Taken names, including a histogram's sample names.
  ASSERT_TRUE(registry.AddHistogram("gshare_wait_seconds", "help", {}, {1}).ok());
  const auto taken = registry.AddGauge("gshare_wait_seconds", "help");
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.status().code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(registry.AddGauge("gshare_wait_seconds_bucket", "help").ok());
  // Nothing refused was registered.
  EXPECT_EQ(registry.Expose().find("gshare_things"), std::string::npos);
  // A registry without a required prefix takes any valid name.
  Registry open("");
  EXPECT_TRUE(open.AddCounter("http_requests_total", "help").ok());
}

TEST(RegistryTest, RefusesNegativeNonFiniteUpdatesAndBadLabelValues) {
  Registry registry;
  auto family = registry.AddCounter("gshare_hits_total", "help", {"a"});
  ASSERT_TRUE(family.ok());
  auto counter = (*family)->WithLabels({"x"});
  ASSERT_TRUE(counter.ok());
  EXPECT_FALSE((*counter)->Add(-1).ok());
  EXPECT_FALSE((*counter)->Add(kNaN).ok());
  EXPECT_FALSE((*counter)->Add(kInf).ok());
  EXPECT_TRUE((*counter)->Add(0).ok());
  EXPECT_EQ((*counter)->value(), 0);

  auto gauges = registry.AddGauge("gshare_level", "help");
  ASSERT_TRUE(gauges.ok());
  auto gauge = (*gauges)->WithLabels({});
  ASSERT_TRUE(gauge.ok());
  EXPECT_TRUE((*gauge)->Set(-1e300).ok());
  EXPECT_FALSE((*gauge)->Set(kNaN).ok());
  EXPECT_FALSE((*gauge)->Set(-kInf).ok());
  EXPECT_FALSE((*gauge)->Add(kNaN).ok());
  EXPECT_EQ((*gauge)->value(), -1e300);

  auto histograms = registry.AddHistogram("gshare_wait_seconds", "help", {}, {1});
  ASSERT_TRUE(histograms.ok());
  auto histogram = (*histograms)->WithLabels({});
  ASSERT_TRUE(histogram.ok());
  EXPECT_FALSE((*histogram)->Observe(kNaN).ok());
  EXPECT_FALSE((*histogram)->Observe(kInf).ok());
  EXPECT_EQ((*histogram)->Read().count, 0u);

  EXPECT_FALSE((*family)->WithLabels({}).ok());            // too few values
  EXPECT_FALSE((*family)->WithLabels({"a", "b"}).ok());    // too many
  EXPECT_FALSE((*family)->WithLabels({"\xff\xfe"}).ok());  // not UTF-8
  EXPECT_FALSE((*family)->WithLabels({"\xc0\x80"}).ok());  // overlong
  EXPECT_FALSE((*family)->WithLabels({"\xe2\x82"}).ok());  // truncated
  EXPECT_TRUE((*family)->WithLabels({"caf\xc3\xa9 \xe2\x82\xac"}).ok());
}

TEST(RegistryTest, ConcurrentUpdatesSumExactly) {
  Registry registry;
  auto counters = registry.AddCounter("gshare_hits_total", "help", {"t"});
  auto histograms = registry.AddHistogram("gshare_wait_seconds", "help", {"t"}, {0.5, 1});
  auto gauges = registry.AddGauge("gshare_level", "help", {"t"});
  ASSERT_TRUE(counters.ok() && histograms.ok() && gauges.ok());
  constexpr int kThreads = 4;
  constexpr int kIterations = 20000;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      // Every thread looks its children up itself: creation races too.
      auto counter = (*counters)->WithLabels({"same"});
      auto histogram = (*histograms)->WithLabels({"same"});
      auto gauge = (*gauges)->WithLabels({"same"});
      if (!counter.ok() || !histogram.ok() || !gauge.ok()) return;
      for (int k = 0; k < kIterations; ++k) {
        (*counter)->Inc();
        (void)(*counter)->Add(0.5);
        (void)(*histogram)->Observe(k % 2 == 0 ? 0.25 : 2.0);
        (void)(*gauge)->Add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ((*counters)->size(), 1u);
  EXPECT_EQ((*(*counters)->WithLabels({"same"}))->value(), 1.5 * kThreads * kIterations);
  EXPECT_EQ((*(*gauges)->WithLabels({"same"}))->value(), kThreads * kIterations);
  const Histogram::Snapshot s = (*(*histograms)->WithLabels({"same"}))->Read();
  EXPECT_EQ(s.count, static_cast<std::uint64_t>(kThreads * kIterations));
  EXPECT_EQ(s.cumulative[0], static_cast<std::uint64_t>(kThreads * kIterations / 2));
  EXPECT_EQ(s.cumulative[1], s.cumulative[0]);
  EXPECT_EQ(s.sum, (0.25 + 2.0) * kThreads * kIterations / 2);
}

TEST(RegistryTest, RemovesAChild) {
  Registry registry;
  auto family = registry.AddCounter("gshare_hits_total", "help", {"function"});
  ASSERT_TRUE(family.ok());
  auto kept = (*family)->WithLabels({"kept"});
  auto gone = (*family)->WithLabels({"gone"});
  ASSERT_TRUE(kept.ok() && gone.ok());
  (*gone)->Inc();
  ASSERT_TRUE((*family)->Remove({"gone"}).ok());
  EXPECT_EQ((*family)->Remove({"gone"}).code(), StatusCode::kNotFound);
  (*gone)->Inc();  // a holder may still update it: no effect on the output
  EXPECT_EQ(registry.Expose(),
            "# HELP gshare_hits_total help\n"
            "# TYPE gshare_hits_total counter\n"
            "gshare_hits_total{function=\"kept\"} 0\n");
  // Asking again makes a fresh series at 0.
  auto again = (*family)->WithLabels({"gone"});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->value(), 0);
  ASSERT_TRUE((*family)->Remove({"kept"}).ok());
  ASSERT_TRUE((*family)->Remove({"gone"}).ok());
  EXPECT_EQ(registry.Expose(), "");
}

}  // namespace
}  // namespace gshare::metrics
