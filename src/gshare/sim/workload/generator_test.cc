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

TEST(GeneratorTest, FunctionsBatchSublinearlyAndBatchingChangesNothingElse) {
  GeneratorOptions options;
  options.functions = 400;
  options.duration = std::chrono::minutes(1);
  auto batched = GenerateWorkload(options);
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();
  options.batching = false;
  auto plain = GenerateWorkload(options);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  // The draws of sizes, tenants, rates and arrivals do not depend on batching.
  ASSERT_EQ(batched->trace.invocations.size(), plain->trace.invocations.size());
  for (std::size_t i = 0; i < plain->trace.invocations.size(); ++i) {
    ASSERT_EQ(batched->trace.invocations[i].function, plain->trace.invocations[i].function);
    ASSERT_EQ(batched->trace.invocations[i].arrival_seconds,
              plain->trace.invocations[i].arrival_seconds);
  }
  const GpuType& gpu = *batched->catalog.FindGpuType("a100-40gb");
  int above_one = 0;
  int large_above_eight = 0;
  for (std::size_t f = 0; f < batched->catalog.functions.size(); ++f) {
    const FunctionSpec& spec = batched->catalog.functions[f];
    const FunctionSpec& before = plain->catalog.functions[f];
    EXPECT_EQ(before.max_batch, 1);
    EXPECT_EQ(spec.model_bytes, before.model_bytes);
    EXPECT_EQ(spec.tenant, before.tenant);
    ASSERT_GE(spec.max_batch, 1);
    ASSERT_LE(spec.max_batch, 32);
    EXPECT_EQ(spec.max_batch & (spec.max_batch - 1), 0) << spec.name;  // a power of two
    above_one += spec.max_batch > 1;
    large_above_eight += spec.model_bytes >= kMediumModelLimitBytes && spec.max_batch > 8;
    auto resolved = ResolveFunction(spec, gpu, batched->catalog.gpu_types);
    ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
    // A full batch fits the GPU; batch 1 is the profile's; the curve grows, sublinearly.
    EXPECT_LE(resolved->MemoryForBatch(spec.max_batch), gpu.memory_bytes) << spec.name;
    EXPECT_GE(resolved->batch_memory_bytes, 16 * kMiB);
    auto profile = ResolveFunction(before, gpu, plain->catalog.gpu_types);
    ASSERT_TRUE(profile.ok());
    EXPECT_EQ(resolved->ExecLatency(1), profile->ExecLatency(1)) << spec.name;
    for (int b = 2; b <= spec.max_batch; ++b) {
      EXPECT_GT(resolved->ExecLatency(b), resolved->ExecLatency(b - 1)) << spec.name << " " << b;
      EXPECT_LT(resolved->ExecLatency(b), resolved->ExecLatency(1) * b) << spec.name << " " << b;
    }
    if (spec.max_batch >= 2) {
      // alpha in [0.45, 0.85]: batch 2 takes 2^0.45 to 2^0.85 of batch 1.
      const double ratio = static_cast<double>(resolved->ExecLatency(2).count()) /
                           static_cast<double>(resolved->ExecLatency(1).count());
      EXPECT_GE(ratio, std::pow(2.0, 0.45) - 1e-6) << spec.name;
      EXPECT_LE(ratio, std::pow(2.0, 0.85) + 1e-6) << spec.name;
    }
  }
  EXPECT_GT(above_one, 300);        // most functions batch
  EXPECT_EQ(large_above_eight, 0);  // large models batch at most 8
}

TEST(GeneratorTest, TheMemoryRegimeDrawsLargeRarelyCalledModels) {
  GeneratorOptions options;
  options.functions = 1000;
  options.duration = std::chrono::minutes(10);
  options.regime = WorkloadRegime::kMemory;
  auto memory = GenerateWorkload(options);
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  options.regime = WorkloadRegime::kCompute;
  auto compute = GenerateWorkload(options);
  ASSERT_TRUE(compute.ok()) << compute.status().ToString();
  std::vector<double> sizes;
  for (const auto& f : memory->catalog.functions)
    sizes.push_back(static_cast<double>(f.model_bytes));
  EXPECT_NEAR(FractionAtMost(sizes, kSmallModelLimitBytes - 1), 0.2, 0.04);
  EXPECT_NEAR(FractionAtMost(sizes, kMediumModelLimitBytes - 1), 0.5, 0.05);
  for (const double rate : memory->rate_per_second) {
    EXPECT_GE(rate, 1.0 / 3600 - 1e-12);
    EXPECT_LE(rate, 4.0 / 60 + 1e-12);
  }
  // Far fewer calls than the compute regime's, of far more bytes each.
  EXPECT_LT(memory->trace.invocations.size() * 10, compute->trace.invocations.size());
  EXPECT_EQ(ParseWorkloadRegime("memory").value(), WorkloadRegime::kMemory);
  EXPECT_EQ(WorkloadRegimeName(WorkloadRegime::kMemory), "memory");
  EXPECT_FALSE(ParseWorkloadRegime("disk").ok());
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

namespace gshare {
namespace {

Catalog ThreeFunctions() {
  auto catalog = ParseCatalog(R"(
functions:
  - name: mlp
    model_size: 23Mi
    exec_latency: 4ms
    runtime: mlp
  - name: cnn
    model_size: 5Mi
    exec_latency: 2ms
    runtime: cnn
  - name: echo
    model_size: 1Mi
    exec_latency: 0.1ms
    runtime: echo
)",
                              "three.yaml");
  EXPECT_TRUE(catalog.ok()) << catalog.status().ToString();
  return catalog.ok() ? *catalog : Catalog{};
}

std::vector<int> CountsByFunction(const GeneratedWorkload& workload) {
  std::vector<int> counts(workload.catalog.functions.size(), 0);
  for (const auto& invocation : workload.trace.invocations) ++counts.at(invocation.function);
  return counts;
}

TEST(CatalogWorkloadTest, EveryCatalogFunctionAppearsAndNoOther) {
  const Catalog catalog = ThreeFunctions();
  GeneratorOptions options;
  options.duration = std::chrono::minutes(10);
  options.rate_per_second = 20;
  for (const std::uint64_t seed : {1, 2, 3, 4, 5}) {
    options.seed = seed;
    auto workload = GenerateCatalogWorkload(catalog, options);
    ASSERT_TRUE(workload.ok()) << workload.status().ToString();
    ASSERT_EQ(workload->catalog.functions.size(), 3u);
    EXPECT_EQ(workload->catalog.functions[0].runtime, "mlp");  // kept as it is
    // Every function keeps at least kCatalogEvenShare / 3 of 12,000 expected requests (400).
    const auto counts = CountsByFunction(*workload);
    for (std::size_t f = 0; f < counts.size(); ++f) {
      EXPECT_GT(counts[f], 200) << "seed " << seed << " function " << f;
      EXPECT_GE(workload->rate_per_second[f], 20 * kCatalogEvenShare / 3 - 1e-9);
    }
    double total = 0;
    for (const double rate : workload->rate_per_second) total += rate;
    EXPECT_NEAR(total, 20, 1e-9);
  }
}

TEST(CatalogWorkloadTest, RatesScaleWithTheRequestedRate) {
  const Catalog catalog = ThreeFunctions();
  GeneratorOptions options;
  options.duration = std::chrono::hours(1);
  options.seed = 9;
  options.rate_per_second = 5;
  auto slow = GenerateCatalogWorkload(catalog, options);
  options.rate_per_second = 20;
  auto fast = GenerateCatalogWorkload(catalog, options);
  ASSERT_TRUE(slow.ok() && fast.ok());
  for (std::size_t f = 0; f < 3; ++f) {
    EXPECT_NEAR(fast->rate_per_second[f], 4 * slow->rate_per_second[f], 1e-9);
  }
  // About rate x duration requests (diurnal factor included): 18,000 and 72,000.
  EXPECT_NEAR(static_cast<double>(slow->trace.invocations.size()), 18'000, 18'000 * 0.1);
  EXPECT_NEAR(static_cast<double>(fast->trace.invocations.size()), 72'000, 72'000 * 0.1);
}

TEST(CatalogWorkloadTest, DefaultRateKeepsOneGpuHalfBusy) {
  const Catalog catalog = ThreeFunctions();
  GeneratorOptions options;
  options.duration = std::chrono::minutes(2);
  auto workload = GenerateCatalogWorkload(catalog, options);
  ASSERT_TRUE(workload.ok()) << workload.status().ToString();
  const double latency[] = {4e-3, 2e-3, 0.1e-3};
  double busy = 0;
  for (std::size_t f = 0; f < 3; ++f) busy += workload->rate_per_second[f] * latency[f];
  EXPECT_NEAR(busy, kDefaultCatalogLoad, 1e-9);
}

TEST(CatalogWorkloadTest, SameSeedGivesTheSameBytes) {
  const Catalog catalog = ThreeFunctions();
  const fs::path dir = fs::temp_directory_path() / "gshare_catalog_workload";
  fs::remove_all(dir);
  GeneratorOptions options;
  options.duration = std::chrono::minutes(2);
  options.seed = 7;
  options.rate_per_second = 10;
  for (const char* run : {"a", "b"}) {
    auto workload = GenerateCatalogWorkload(catalog, options);
    ASSERT_TRUE(workload.ok()) << workload.status().ToString();
    ASSERT_TRUE(WriteInvocations(*workload, (dir / run).string()).ok());
  }
  const std::string trace = ReadAll(dir / "a/invocations.csv");
  EXPECT_EQ(trace.rfind("function,timestamp\n", 0), 0u);
  EXPECT_EQ(trace, ReadAll(dir / "b/invocations.csv"));
  EXPECT_FALSE(fs::exists(dir / "a/catalog.yaml"));
  // It reads back as an invocations trace over the catalog.
  Catalog readable = catalog;
  auto back = ReadTrace((dir / "a/invocations.csv").string(), TraceFormat::kInvocations, readable,
                        TraceOptions{});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  options.seed = 8;
  auto other = GenerateCatalogWorkload(catalog, options);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(WriteInvocations(*other, (dir / "c").string()).ok());
  EXPECT_NE(trace, ReadAll(dir / "c/invocations.csv"));
  fs::remove_all(dir);
}

TEST(CatalogWorkloadTest, RejectsBadOptionsAndCatalogs) {
  const Catalog catalog = ThreeFunctions();
  GeneratorOptions options;
  options.duration = std::chrono::minutes(1);
  for (const double rps : {-1.0, 2e6, std::nan(""), HUGE_VAL}) {
    options.rate_per_second = rps;
    auto bad = GenerateCatalogWorkload(catalog, options);
    ASSERT_FALSE(bad.ok()) << rps;
    EXPECT_NE(bad.status().message().find("--rps must be positive"), std::string::npos);
  }
  options.rate_per_second = 1e6;
  options.duration = std::chrono::hours(1);
  auto too_many = GenerateCatalogWorkload(catalog, options);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("invocations; at most"), std::string::npos);
  options.rate_per_second = 1;
  options.slo_factor = 3;
  EXPECT_FALSE(GenerateCatalogWorkload(catalog, options).ok());
  options.slo_factor = 0;
  EXPECT_EQ(GenerateCatalogWorkload(Catalog{}, options).status().message(),
            "the catalog has no functions");
  Catalog comma = catalog;
  comma.functions[0].name = "a,b";
  EXPECT_NE(GenerateCatalogWorkload(comma, options).status().message().find("'a,b'"),
            std::string::npos);
}

}  // namespace
}  // namespace gshare
