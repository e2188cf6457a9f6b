#include "gshare/sim/workload/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gshare {
namespace {

namespace fs = std::filesystem;
using std::chrono::hours;
using std::chrono::seconds;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double FractionAtMost(const std::vector<double>& values, double limit) {
  const auto n = std::count_if(values.begin(), values.end(), [&](double v) { return v <= limit; });
  return static_cast<double>(n) / static_cast<double>(values.size());
}

TEST(GeneratorTest, SameSeedGivesByteIdenticalFiles) {
  const fs::path dir = fs::temp_directory_path() / "gshare_generator_determinism";
  fs::remove_all(dir);
  GeneratorOptions options;
  options.functions = 300;
  options.duration = std::chrono::minutes(2);
  options.seed = 42;
  for (const char* run : {"a", "b"}) {
    auto workload = GenerateWorkload(options);
    ASSERT_TRUE(workload.ok()) << workload.status().ToString();
    ASSERT_TRUE(WriteGeneratedWorkload(*workload, (dir / run).string()).ok());
  }
  const std::string catalog = ReadAll(dir / "a/catalog.yaml");
  const std::string trace = ReadAll(dir / "a/invocations.csv");
  EXPECT_FALSE(trace.empty());
  EXPECT_EQ(catalog, ReadAll(dir / "b/catalog.yaml"));
  EXPECT_EQ(trace, ReadAll(dir / "b/invocations.csv"));

  options.seed = 43;
  auto other = GenerateWorkload(options);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(WriteGeneratedWorkload(*other, (dir / "c").string()).ok());
  EXPECT_NE(trace, ReadAll(dir / "c/invocations.csv"));

  // The files read back as a catalog and an invocations trace equal to the in-memory one.
  auto catalog_back = LoadCatalog((dir / "a/catalog.yaml").string());
  ASSERT_TRUE(catalog_back.ok()) << catalog_back.status().ToString();
  EXPECT_EQ(catalog_back->functions.size(), 300u);
  options.seed = 42;
  auto original = GenerateWorkload(options);
  ASSERT_TRUE(original.ok());
  auto trace_back = ReadTrace((dir / "a/invocations.csv").string(), TraceFormat::kInvocations,
                              *catalog_back, TraceOptions{});
  ASSERT_TRUE(trace_back.ok()) << trace_back.status().ToString();
  ASSERT_EQ(trace_back->invocations.size(), original->trace.invocations.size());
  for (std::size_t i = 0; i < original->trace.invocations.size(); ++i) {
    ASSERT_EQ(trace_back->invocations[i].function, original->trace.invocations[i].function) << i;
    ASSERT_EQ(trace_back->invocations[i].arrival_seconds,
              original->trace.invocations[i].arrival_seconds)
        << i;
  }
  fs::remove_all(dir);
}

TEST(GeneratorTest, SloFactorGivesEveryFunctionItsSlack) {
  GeneratorOptions options;
  options.functions = 50;
  options.duration = std::chrono::minutes(1);
  options.slo_factor = 3;
  auto workload = GenerateWorkload(options);
  ASSERT_TRUE(workload.ok()) << workload.status().ToString();
  const GpuType& gpu = *workload->catalog.FindGpuType("a100-40gb");
  for (const FunctionSpec& spec : workload->catalog.functions) {
    ASSERT_TRUE(spec.slo_factor.has_value()) << spec.name;
    EXPECT_FALSE(spec.slo.has_value()) << spec.name;
    auto resolved = ResolveFunction(spec, gpu, workload->catalog.gpu_types);
    ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
    // No trace durations: 3 x the batch-1 latency (to the nanosecond).
    EXPECT_NEAR(static_cast<double>(resolved->slo.count()),
                3.0 * static_cast<double>(resolved->ExecLatency(1).count()), 1.0)
        << spec.name;
  }
  options.slo_factor = 0;  // the default writes no factor: the catalog's 1.5 applies
  auto plain = GenerateWorkload(options);
  ASSERT_TRUE(plain.ok());
  for (const FunctionSpec& spec : plain->catalog.functions) EXPECT_FALSE(spec.slo_factor);
}

TEST(GeneratorTest, RatesAndSizesMatchThePublishedFractions) {
  GeneratorOptions options;
  options.functions = 20000;
  options.duration = seconds(1);
  options.seed = 7;
  auto workload = GenerateWorkload(options);
  ASSERT_TRUE(workload.ok()) << workload.status().ToString();
  const auto& rates = workload->rate_per_second;
  ASSERT_EQ(rates.size(), 20000u);
  // Binomial standard deviation at n = 20000 is under 0.004: 0.015 is about four of them.
  EXPECT_NEAR(FractionAtMost(rates, 1.0 / 3600), 0.45, 0.015);
  EXPECT_NEAR(FractionAtMost(rates, 1.0 / 60), 0.81, 0.015);
  const auto [lo, hi] = std::minmax_element(rates.begin(), rates.end());
  EXPECT_GT(std::log10(*hi / *lo), 7.5);  // about 8 orders of magnitude
  std::vector<double> sizes;
  for (const auto& f : workload->catalog.functions)
    sizes.push_back(static_cast<double>(f.model_bytes));
  EXPECT_NEAR(FractionAtMost(sizes, 1e9 - 1), 0.664, 0.015);
  EXPECT_NEAR(FractionAtMost(sizes, 4e9 - 1), 0.781, 0.015);
  // Tenants: one per ten functions by default.
  std::vector<std::string> tenants;
  for (const auto& f : workload->catalog.functions) tenants.push_back(f.tenant);
  std::sort(tenants.begin(), tenants.end());
  EXPECT_EQ(std::unique(tenants.begin(), tenants.end()) - tenants.begin(), 2000);
}

TEST(GeneratorTest, ArrivalsAreBurstyAndFollowTheRates) {
  GeneratorOptions options;
  options.functions = 200;
  options.duration = hours(1);
  options.seed = 3;
  options.diurnal_amplitude = 0;
  options.target_invocations = 200000;
  auto workload = GenerateWorkload(options);
  ASSERT_TRUE(workload.ok()) << workload.status().ToString();
  const auto& invocations = workload->trace.invocations;
  // The count of a renewal process has variance about n x cv^2: the total is within a few percent.
  EXPECT_NEAR(static_cast<double>(invocations.size()), 200000.0, 6000.0);
  EXPECT_TRUE(std::is_sorted(invocations.begin(), invocations.end(),
                             [](const Invocation& a, const Invocation& b) {
                               return a.arrival_seconds < b.arrival_seconds;
                             }));
  EXPECT_EQ(invocations.front().arrival_seconds, 0.0);
  // The busiest function's inter-arrival times have a coefficient of variation near burst_cv.
  const auto busiest = static_cast<std::size_t>(
      std::max_element(workload->rate_per_second.begin(), workload->rate_per_second.end()) -
      workload->rate_per_second.begin());
  std::vector<double> times;
  for (const auto& invocation : invocations) {
    if (invocation.function == busiest) times.push_back(invocation.arrival_seconds);
  }
  ASSERT_GT(times.size(), 5000u);
  double sum = 0, sum_squares = 0;
  for (std::size_t i = 1; i < times.size(); ++i) {
    const double gap = times[i] - times[i - 1];
    sum += gap;
    sum_squares += gap * gap;
  }
  const double n = static_cast<double>(times.size() - 1);
  const double mean = sum / n;
  const double cv = std::sqrt(sum_squares / n - mean * mean) / mean;
  EXPECT_NEAR(cv, 2.0, 0.25);
}

TEST(GeneratorTest, DiurnalThinningShapesTheDay) {
  GeneratorOptions options;
  options.functions = 100;
  options.duration = hours(24);
  options.seed = 5;
  options.burst_cv = 1;
  options.diurnal_amplitude = 0.5;
  options.target_invocations = 100000;
  options.start_hour = 0;
  auto workload = GenerateWorkload(options);
  ASSERT_TRUE(workload.ok()) << workload.status().ToString();
  EXPECT_NEAR(static_cast<double>(workload->trace.invocations.size()), 100000.0, 4000.0);
  // Shift back: arrivals count from the first one, which is within a second of midnight here.
  double noon = 0, midnight = 0;
  for (const auto& invocation : workload->trace.invocations) {
    const double hour = invocation.arrival_seconds / 3600;
    noon += hour >= 10 && hour < 14;
    midnight += hour < 2 || hour >= 22;
  }
  // Expected ratio (1 + 0.5 x ~0.91) / (1 - 0.5 x ~0.91) = about 2.7.
  EXPECT_GT(noon / midnight, 2.2);
  EXPECT_LT(noon / midnight, 3.3);
}

TEST(GeneratorTest, FallsBackToTheNearestSizeClassAndChecksOptions) {
  const fs::path dir = fs::temp_directory_path() / "gshare_generator_profiles";
  fs::create_directories(dir);
  const std::string path = (dir / "small.yaml").string();
  std::ofstream(path) << "functions:\n"
                         "  - name: tiny\n    model_size: 10Mi\n    exec_latency: 1ms\n";
  GeneratorOptions options;
  options.functions = 50;
  options.duration = std::chrono::minutes(1);
  options.profile_catalog_path = path;
  auto workload = GenerateWorkload(options);
  ASSERT_TRUE(workload.ok()) << workload.status().ToString();
  for (const auto& f : workload->catalog.functions) EXPECT_EQ(f.model, "tiny");
  options.profile_catalog_path = (dir / "none.yaml").string();
  EXPECT_FALSE(GenerateWorkload(options).ok());
  fs::remove_all(dir);

  GeneratorOptions bad;
  bad.functions = 0;
  EXPECT_FALSE(GenerateWorkload(bad).ok());
  bad = GeneratorOptions{};
  bad.burst_cv = 0.5;
  EXPECT_FALSE(GenerateWorkload(bad).ok());
  bad = GeneratorOptions{};
  bad.diurnal_amplitude = 1;
  EXPECT_FALSE(GenerateWorkload(bad).ok());
}

}  // namespace
}  // namespace gshare
