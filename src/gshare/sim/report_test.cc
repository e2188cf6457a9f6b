#include "gshare/sim/report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gshare/sim/sim_test_util.h"
#include "gshare/sim/simulator.h"

namespace gshare {
namespace {

using std::chrono::milliseconds;

TEST(ReportTest, SummaryFollowsTheOutputContract) {
  Workload w;
  w.gpu = testing::RoundGpu();
  w.functions.push_back(
      testing::MakeFunction("f", 1'000'000, 128 * kMiB, milliseconds(5), milliseconds(100)));
  testing::AddRequest(w, 0, 0.0);
  testing::AddRequest(w, 0, 1.0);
  auto report = Simulate(w, "faaswap", SimulationOptions{});
  ASSERT_TRUE(report.ok());
  const auto doc =
      nlohmann::json::parse(SummaryJson({42, "t.csv", "invocations", "round"}, w, {*report}));
  EXPECT_EQ(doc["seed"], 42);
  EXPECT_EQ(doc["trace"]["requests"], 2);
  const auto& p = doc["policies"]["faaswap"];
  for (const char* key : {"requests", "slo_attainment", "latency_ms", "gpu_seconds", "avg_gpus",
                          "peak_gpus", "vgpu_gib_seconds", "swaps", "swap_bytes", "cost_usd"}) {
    EXPECT_TRUE(p.contains(key)) << key;
  }
  EXPECT_TRUE(p["requests"].is_number_integer());
  EXPECT_TRUE(p["peak_gpus"].is_number_integer());
  EXPECT_TRUE(p["swaps"].is_number_integer());
  EXPECT_EQ(p["requests"], 2);
  EXPECT_EQ(p["swaps"], 1);
  EXPECT_DOUBLE_EQ(p["latency_ms"]["p50"].get<double>(), report->latency.p50_ms);
}

TEST(ReportTest, WritesEveryFileAndFailsClearlyOnAnUnwritableDirectory) {
  Workload w;
  w.gpu = testing::RoundGpu();
  w.functions.push_back(
      testing::MakeFunction("f", 1'000'000, 128 * kMiB, milliseconds(5), milliseconds(100)));
  testing::AddRequest(w, 0, 0.0);
  auto report = Simulate(w, "keepalive", SimulationOptions{});
  ASSERT_TRUE(report.ok());
  const auto dir = std::filesystem::temp_directory_path() / "gshare_report_test";
  std::filesystem::remove_all(dir);
  std::string note;
  ASSERT_TRUE(
      WriteReports(dir.string(), {1, "t", "invocations", "round"}, w, {*report}, &note).ok());
  for (const char* file : {"summary.json", "policies.csv", "functions.csv", "gpus_keepalive.dat",
                           "latency_cdf.dat", "gpus.gp", "latency_cdf.gp"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / file)) << file;
  }
  std::ifstream csv(dir / "functions.csv");
  std::stringstream text;
  text << csv.rdbuf();
  EXPECT_NE(text.str().find("keepalive,f,t,1,"), std::string::npos) << text.str();
  std::filesystem::remove_all(dir);

  const Status bad = WriteReports("/proc/gshare-cannot-write-here", {}, w, {*report}, &note);
  EXPECT_EQ(bad.code(), StatusCode::kIo);
}

}  // namespace
}  // namespace gshare
