#include "gshare/metrics/gshare_metrics.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace gshare::metrics {
namespace {

using std::chrono::milliseconds;

// The value of the sample `series` (name and labels exactly as exposed), if present.
std::optional<double> Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(series + " "))
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
  }
  return std::nullopt;
}

std::unique_ptr<GshareMetrics> Make() {
  auto metrics = GshareMetrics::Create();
  EXPECT_TRUE(metrics.ok()) << metrics.status().ToString();
  return std::move(metrics).value();
}

Request At(FunctionId function, double arrival, double slo) {
  Request r;
  r.function = function;
  r.arrival = AtSeconds(arrival);
  r.deadline = AtSeconds(arrival + slo);
  return r;
}

TEST(GshareMetricsTest, FunctionSeriesCountOutcomesAndLatencies) {
  auto metrics = Make();
  auto series = metrics->AddFunction("resnet", "acme");
  ASSERT_TRUE(series.ok()) << series.status().ToString();
  auto same = metrics->AddFunction("resnet", "acme");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(series->get(), same->get());

  (*series)->RequestFinished(RequestOutcome::kOk, milliseconds(20));
  (*series)->RequestFinished(RequestOutcome::kOk, milliseconds(30));
  (*series)->RequestFinished(RequestOutcome::kError, milliseconds(1));
  (*series)->RequestFinished(RequestOutcome::kRejected, milliseconds(0));
  (*series)->RequestStarted(milliseconds(3));
  (*series)->RestoreFinished(milliseconds(400));
  const std::string text = metrics->Expose();
  const std::string fn = "function=\"resnet\",tenant=\"acme\"";
  EXPECT_EQ(Sample(text, "gshare_requests_total{" + fn + ",outcome=\"ok\"}"), 2);
  EXPECT_EQ(Sample(text, "gshare_requests_total{" + fn + ",outcome=\"error\"}"), 1);
  EXPECT_EQ(Sample(text, "gshare_requests_total{" + fn + ",outcome=\"rejected\"}"), 1);
  EXPECT_EQ(Sample(text, "gshare_requests_total{" + fn + ",outcome=\"deadline_exceeded\"}"), 0);
  EXPECT_EQ(Sample(text, "gshare_requests_total{" + fn + ",outcome=\"cancelled\"}"), 0);
  // Latency counts the requests that ran only.
  EXPECT_EQ(Sample(text, "gshare_request_duration_seconds_count{" + fn + "}"), 3);
  EXPECT_EQ(Sample(text, "gshare_request_duration_seconds_bucket{" + fn + ",le=\"0.025\"}"), 2);
  EXPECT_EQ(Sample(text, "gshare_request_queue_seconds_count{" + fn + "}"), 1);
  EXPECT_EQ(Sample(text, "gshare_restore_duration_seconds_bucket{" + fn + ",le=\"0.25\"}"), 0);
  EXPECT_EQ(Sample(text, "gshare_restore_duration_seconds_bucket{" + fn + ",le=\"0.5\"}"), 1);
  EXPECT_EQ(Sample(text, "gshare_slo_attainment_ratio{" + fn + "}"), 1);
  EXPECT_EQ(Sample(text, "gshare_gpus_in_use"), 0);
  EXPECT_EQ(Sample(text, "gshare_gpu_seconds_total"), 0);
}

TEST(GshareMetricsTest, RemovingAFunctionDropsEveryOneOfItsSeries) {
  auto metrics = Make();
  auto gone = metrics->AddFunction("gone", "acme");
  auto kept = metrics->AddFunction("kept", "acme");
  ASSERT_TRUE(gone.ok() && kept.ok());
  (*gone)->RequestFinished(RequestOutcome::kOk, milliseconds(5));
  ASSERT_TRUE(metrics->RemoveFunction("gone", "acme").ok());
  EXPECT_EQ(metrics->RemoveFunction("gone", "acme").code(), StatusCode::kNotFound);
  EXPECT_EQ(metrics->RemoveFunction("kept", "other").code(), StatusCode::kNotFound);
  (*gone)->RequestFinished(RequestOutcome::kOk, milliseconds(5));  // harmless
  const std::string text = metrics->Expose();
  EXPECT_EQ(text.find("function=\"gone\""), std::string::npos) << text;
  EXPECT_NE(text.find("function=\"kept\""), std::string::npos);
  // Deployed again, it starts from 0.
  auto again = metrics->AddFunction("gone", "acme");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Sample(metrics->Expose(),
                   "gshare_requests_total{function=\"gone\",tenant=\"acme\",outcome=\"ok\"}"),
            0);
}

// The feed gets the same events as a Meter whose window is the node's life; their figures agree.
TEST(MeterFeedTest, AgreesWithTheMeterOnTheSameEvents) {
  auto metrics = Make();
  auto a = metrics->AddFunction("a", "t1");
  auto b = metrics->AddFunction("b", "t2");
  ASSERT_TRUE(a.ok() && b.ok());
  MeterFeed feed(*metrics);
  feed.Bind(0, *a);
  feed.Bind(1, *b);
  const std::vector<GpuType> types(1);
  Meter meter(types, TimePoint{});

  // Each event goes to both, as the executor's accounting does.
  auto both = [&](auto event) {
    event(meter);
    event(feed);
  };
  both([](auto& m) { m.GpuAcquired(AtSeconds(0), 0); });
  both([](auto& m) { m.Reserved(AtSeconds(1), 0, 1000); });
  both([](auto& m) { m.Restored(AtSeconds(1), 0, 5000); });
  both([](auto& m) { m.GpuAcquired(AtSeconds(2), 0); });
  both([](auto& m) { m.Reserved(AtSeconds(2), 1, 300); });
  both([](auto& m) { m.Restored(AtSeconds(2), 1, 700); });
  both([](auto& m) { m.Active(AtSeconds(3), 0, 1000); });
  both([](auto& m) { m.Answered(AtSeconds(3.5), At(0, 3, 1), AnswerOutcome::kOk); });      // met
  both([](auto& m) { m.Answered(AtSeconds(6), At(0, 4, 1), AnswerOutcome::kOk); });        // late
  both([](auto& m) { m.Answered(AtSeconds(6), At(1, 5.5, 1), AnswerOutcome::kFailed); });  // failed
  both([](auto& m) { m.Answered(AtSeconds(6.5), At(1, 6, 1), AnswerOutcome::kOk); });      // met
  both([](auto& m) { m.Checkpointed(AtSeconds(7), 0, 250); });
  both([](auto& m) { m.CheckpointSkipped(AtSeconds(7), 0, 750); });
  both([](auto& m) { m.Reserved(AtSeconds(7), 0, -1000); });
  both([](auto& m) { m.GpuReleased(AtSeconds(8), 0); });

  const TimePoint now = AtSeconds(10);
  feed.Publish(now);
  const MeterTotals totals = meter.Totals(now);
  const std::string text = metrics->Expose();
  const std::string fa = "{function=\"a\",tenant=\"t1\"}";
  const std::string fb = "{function=\"b\",tenant=\"t2\"}";

  EXPECT_DOUBLE_EQ(*Sample(text, "gshare_gpu_seconds_total"), totals.gpu_seconds);
  EXPECT_DOUBLE_EQ(totals.gpu_seconds, 16.0);  // two GPUs: 0..8 and 2..10
  EXPECT_EQ(Sample(text, "gshare_gpus_in_use"), meter.gpus_held());
  EXPECT_DOUBLE_EQ(*Sample(text, "gshare_vgpu_byte_seconds_total" + fa),
                   totals.functions[0].reserved_byte_seconds);
  EXPECT_DOUBLE_EQ(*Sample(text, "gshare_vgpu_byte_seconds_total" + fb),
                   totals.functions[1].reserved_byte_seconds);
  EXPECT_EQ(Sample(text, "gshare_vgpu_memory_allocated_bytes" + fa), 0);
  EXPECT_EQ(Sample(text, "gshare_vgpu_memory_allocated_bytes" + fb), 300);
  EXPECT_EQ(Sample(text, "gshare_swaps_total" + fa), totals.functions[0].restores);
  EXPECT_EQ(Sample(text, "gshare_swap_bytes_total" + fa), totals.functions[0].restore_bytes);
  EXPECT_EQ(Sample(text, "gshare_swap_bytes_total" + fb), totals.functions[1].restore_bytes);
  EXPECT_EQ(Sample(text, "gshare_checkpoints_total" + fa), totals.functions[0].checkpoints);
  EXPECT_EQ(Sample(text, "gshare_checkpoint_bytes_total" + fa),
            totals.functions[0].checkpoint_bytes);
  EXPECT_EQ(Sample(text, "gshare_checkpoint_skipped_bytes_total" + fa), 750);
  EXPECT_EQ(Sample(text, "gshare_checkpoint_skipped_bytes_total" + fb), 0);
  for (std::size_t f = 0; f < 2; ++f) {
    const std::string labels =
        f == 0 ? "function=\"a\",tenant=\"t1\"" : "function=\"b\",tenant=\"t2\"";
    const double met = *Sample(text, "gshare_slo_requests_total{" + labels + ",result=\"met\"}");
    const double missed =
        *Sample(text, "gshare_slo_requests_total{" + labels + ",result=\"missed\"}");
    EXPECT_EQ(met, totals.functions[f].met);
    EXPECT_EQ(met + missed, totals.functions[f].requests);
    EXPECT_DOUBLE_EQ(*Sample(text, "gshare_slo_attainment_ratio{" + labels + "}"),
                     static_cast<double>(totals.functions[f].met) /
                         static_cast<double>(totals.functions[f].requests));
  }

  // Publishing later adds the time since, as the Meter's integral does; an earlier time adds
  // nothing (counters never go back).
  feed.Publish(AtSeconds(9));
  EXPECT_DOUBLE_EQ(*Sample(metrics->Expose(), "gshare_gpu_seconds_total"), 16.0);
  feed.Publish(AtSeconds(12));
  EXPECT_DOUBLE_EQ(*Sample(metrics->Expose(), "gshare_gpu_seconds_total"),
                   meter.Totals(AtSeconds(12)).gpu_seconds);
}

TEST(MeterFeedTest, AnUnboundFunctionCountsOnlyInTheNodeFigures) {
  auto metrics = Make();
  auto a = metrics->AddFunction("a", "t1");
  ASSERT_TRUE(a.ok());
  MeterFeed feed(*metrics);
  feed.GpuAcquired(AtSeconds(0), 0);
  feed.Reserved(AtSeconds(0), 0, 100);  // before the bind: not in a's series
  feed.Restored(AtSeconds(0), 0, 100);
  feed.Bind(0, *a);
  feed.Reserved(AtSeconds(2), 0, 100);
  feed.Publish(AtSeconds(4));
  std::string text = metrics->Expose();
  const std::string fa = "{function=\"a\",tenant=\"t1\"}";
  EXPECT_EQ(Sample(text, "gshare_swaps_total" + fa), 0);
  // Only what came after the bind: the feed keeps nothing for a function it is not bound to.
  EXPECT_EQ(Sample(text, "gshare_vgpu_memory_allocated_bytes" + fa), 100);
  EXPECT_EQ(Sample(text, "gshare_vgpu_byte_seconds_total" + fa), 100 * 2);
  EXPECT_EQ(Sample(text, "gshare_gpu_seconds_total"), 4);
  // Unbound (deleted): the series stops counting, and the feed forgets the function.
  feed.Unbind(0);
  EXPECT_EQ(feed.bound(), 0u);
  ASSERT_TRUE(metrics->RemoveFunction("a", "t1").ok());
  feed.Reserved(AtSeconds(5), 0, -200);
  feed.Publish(AtSeconds(6));
  text = metrics->Expose();
  EXPECT_EQ(text.find("function=\"a\""), std::string::npos);
  EXPECT_EQ(Sample(text, "gshare_gpu_seconds_total"), 6);
}

}  // namespace
}  // namespace gshare::metrics
