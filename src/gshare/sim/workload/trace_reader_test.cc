#include "gshare/sim/workload/trace_reader.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gshare {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr char kCatalog[] = R"(
functions:
  - name: resnet50
    tenant: acme
    model_size: 98Mi
    gpu_memory: 384Mi
    exec_latency: 2ms
  - name: bert
    tenant: globex
    model_size: 420Mi
    gpu_memory: 1Gi
    exec_latency: 4ms
    slo: 40ms
  - name: unused
    tenant: globex
    model_size: 1Mi
    exec_latency: 1ms
)";

class TraceReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gshare_trace_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
    auto catalog = ParseCatalog(kCatalog, "catalog.yaml");
    ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
    catalog_ = std::move(catalog).value();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // Reads `text` as `format` and expects an error whose message contains `expected`; the catalog
  // must be unchanged.
  void ExpectError(TraceFormat format, const std::string& text, const std::string& expected,
                   StatusCode code = StatusCode::kInvalidArgument) {
    const std::string path = Write("bad.csv", text);
    const std::size_t before = catalog_.functions.size();
    auto trace = ReadTrace(path, format, catalog_, options_);
    ASSERT_FALSE(trace.ok()) << "expected an error containing: " << expected;
    EXPECT_EQ(trace.status().code(), code) << trace.status().ToString();
    EXPECT_NE(trace.status().message().find(expected), std::string::npos)
        << trace.status().message();
    EXPECT_NE(trace.status().message().find("bad.csv"), std::string::npos)
        << trace.status().message();
    EXPECT_EQ(catalog_.functions.size(), before);
  }

  fs::path dir_;
  Catalog catalog_;
  TraceOptions options_;
};

TEST_F(TraceReaderTest, ParsesFormatNames) {
  for (const char* name : {"invocations", "azure-2019", "azure-2021", "azure-llm"}) {
    auto format = ParseTraceFormat(name);
    ASSERT_TRUE(format.ok()) << name;
    EXPECT_EQ(TraceFormatName(*format), name);
  }
  EXPECT_FALSE(ParseTraceFormat("csv").ok());
}

TEST_F(TraceReaderTest, ReadsInvocations) {
  const std::string path = Write("t.csv",
                                 "function,timestamp,duration\n"
                                 "bert,10.5,\n"
                                 "resnet50,10.25,0.003\r\n"
                                 "\n"
                                 "bert,12,0.005\n");
  auto trace = ReadTrace(path, TraceFormat::kInvocations, catalog_, options_);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->invocations.size(), 3u);
  EXPECT_EQ(trace->format, "invocations");
  EXPECT_EQ(trace->invocations[0].function, 0u);  // resnet50 first: sorted by arrival
  EXPECT_DOUBLE_EQ(trace->invocations[0].arrival_seconds, 0.0);
  EXPECT_DOUBLE_EQ(trace->invocations[0].duration_seconds, 0.003);
  EXPECT_EQ(trace->invocations[1].function, 1u);
  EXPECT_DOUBLE_EQ(trace->invocations[1].arrival_seconds, 0.25);
  EXPECT_DOUBLE_EQ(trace->invocations[1].duration_seconds, 0.0);
  EXPECT_DOUBLE_EQ(trace->invocations[2].arrival_seconds, 1.75);
  EXPECT_EQ(catalog_.functions.size(), 3u);  // nothing added

  options_.ignore_durations = true;
  auto ignored = ReadTrace(path, TraceFormat::kInvocations, catalog_, options_);
  ASSERT_TRUE(ignored.ok());
  EXPECT_DOUBLE_EQ(ignored->invocations[0].duration_seconds, 0.0);
}

TEST_F(TraceReaderTest, InvocationErrorsNameFileAndLine) {
  ExpectError(TraceFormat::kInvocations, "", "bad.csv: the file is empty");
  ExpectError(TraceFormat::kInvocations, "function,timestamp\n", "no data rows");
  ExpectError(
      TraceFormat::kInvocations, "name,time\nbert,1\n",
      "bad.csv:1: bad header: an invocations trace needs columns 'function' and 'timestamp'");
  ExpectError(TraceFormat::kInvocations, "function,timestamp\nbert,1\nbert\n",
              "bad.csv:3: missing column: expected 2 fields, found 1");
  ExpectError(TraceFormat::kInvocations, "function,timestamp\nbert,1\nbert,abc\n",
              "bad.csv:3: column 'timestamp': 'abc' is not a number");
  ExpectError(TraceFormat::kInvocations, "function,timestamp,duration\nbert,1,x\n",
              "bad.csv:2: column 'duration': 'x' is not a number");
  ExpectError(TraceFormat::kInvocations, "function,timestamp\nbert,-1\n",
              "bad.csv:2: timestamp -1 is negative");
  ExpectError(TraceFormat::kInvocations, "function,timestamp\nbert,1\n\nnope,2\n",
              "bad.csv:4: unknown function 'nope' (not in the catalog)", StatusCode::kNotFound);
  auto missing =
      ReadTrace((dir_ / "none.csv").string(), TraceFormat::kInvocations, catalog_, options_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

std::string Azure2019(const std::string& rows, int minutes = 3) {
  std::string text = "HashOwner,HashApp,HashFunction,Trigger";
  for (int m = 1; m <= minutes; ++m) text += "," + std::to_string(m);
  return text + "\n" + rows;
}

// Only the Azure Functions formats draw with the seed: an invocations trace reads the same with
// any seed, an azure-2019 trace spreads its minutes differently.
TEST_F(TraceReaderTest, OnlyAzureFunctionsFormatsDrawWithTheSeed) {
  EXPECT_FALSE(TraceFormatDrawsWithSeed(TraceFormat::kInvocations));
  EXPECT_TRUE(TraceFormatDrawsWithSeed(TraceFormat::kAzure2019));
  EXPECT_TRUE(TraceFormatDrawsWithSeed(TraceFormat::kAzure2021));
  EXPECT_FALSE(TraceFormatDrawsWithSeed(TraceFormat::kAzureLlm));

  const auto arrivals = [&](const std::string& path, TraceFormat format, std::uint64_t seed) {
    Catalog catalog = catalog_;
    options_.seed = seed;
    auto trace = ReadTrace(path, format, catalog, options_);
    EXPECT_TRUE(trace.ok()) << trace.status().ToString();
    std::vector<double> out;
    for (const auto& invocation : trace->invocations) out.push_back(invocation.arrival_seconds);
    return out;
  };
  const std::string invocations = Write("i.csv", "function,timestamp\nbert,1.5\nresnet50,7\n");
  EXPECT_EQ(arrivals(invocations, TraceFormat::kInvocations, 1),
            arrivals(invocations, TraceFormat::kInvocations, 2));
  const std::string azure = Write("d.csv", Azure2019("o,a,f,http,5,5,5\n"));
  EXPECT_NE(arrivals(azure, TraceFormat::kAzure2019, 1),
            arrivals(azure, TraceFormat::kAzure2019, 2));
}

TEST_F(TraceReaderTest, ReadsAzure2019AndAddsFunctions) {
  const std::string path = Write("d01.csv", Azure2019("own1,app1,fnA,http,2,0,1\n"
                                                      "own2,app2,fnB,timer,0,3,0\n"
                                                      "own2,app2,bert,timer,0,0,1\n"));
  options_.seed = 7;
  auto trace = ReadTrace(path, TraceFormat::kAzure2019, catalog_, options_);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->invocations.size(), 7u);
  ASSERT_EQ(catalog_.functions.size(), 5u);  // fnA, fnB added; bert is a catalog name already
  const FunctionSpec* a = catalog_.FindFunction("fnA");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->tenant, "own1");
  const FunctionSpec* b = catalog_.FindFunction("fnB");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->tenant, "own2");
  // Every arrival falls in its minute; counts per function match the file.
  int a_count = 0, b_count = 0, bert_count = 0;
  double previous = -1;
  for (const auto& invocation : trace->invocations) {
    EXPECT_GE(invocation.arrival_seconds, previous);
    previous = invocation.arrival_seconds;
    const std::string& name = catalog_.functions[invocation.function].name;
    a_count += name == "fnA";
    b_count += name == "fnB";
    bert_count += name == "bert";
  }
  EXPECT_EQ(a_count, 3);
  EXPECT_EQ(b_count, 3);
  EXPECT_EQ(bert_count, 1);
  EXPECT_DOUBLE_EQ(trace->invocations.front().arrival_seconds, 0.0);
  EXPECT_LT(trace->invocations.back().arrival_seconds, 180.0);

  // Same seed: the same profiles and arrivals.
  auto other = ParseCatalog(kCatalog, "catalog.yaml");
  ASSERT_TRUE(other.ok());
  auto again = ReadTrace(path, TraceFormat::kAzure2019, *other, options_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(other->FindFunction("fnA")->model, a->model);
  EXPECT_EQ(other->FindFunction("fnB")->model, b->model);
  for (std::size_t i = 0; i < trace->invocations.size(); ++i) {
    EXPECT_EQ(again->invocations[i].arrival_seconds, trace->invocations[i].arrival_seconds);
    EXPECT_EQ(again->invocations[i].function, trace->invocations[i].function);
  }
}

TEST_F(TraceReaderTest, Azure2019Errors) {
  ExpectError(TraceFormat::kAzure2019, "", "bad.csv: the file is empty");
  ExpectError(TraceFormat::kAzure2019, "Owner,App,Function,Trigger,1\n", "bad.csv:1: bad header");
  ExpectError(TraceFormat::kAzure2019, "HashOwner,HashApp,HashFunction,Trigger,1,3\n",
              "bad.csv:1: bad header: column 6 is '3', expected minute '2'");
  ExpectError(TraceFormat::kAzure2019, Azure2019(""), "no data rows");
  ExpectError(TraceFormat::kAzure2019, Azure2019("o,a,f,http,1,2\n"),
              "bad.csv:2: missing column: expected 7 fields, found 6");
  ExpectError(TraceFormat::kAzure2019, Azure2019("o,a,f,http,1,2,3\no,a,g,http,1,x,3\n"),
              "bad.csv:3: column '2': 'x' is not a non-negative count");
  // Counts that would expand past the bound on invocations: an error, not an allocation.
  ExpectError(TraceFormat::kAzure2019, Azure2019("o,a,f,http,1,2,99999999992374\n"),
              "bad.csv:2: column '3': 99999999992374 more invocations make more than the");
  options_.max_invocations = 5;
  ExpectError(TraceFormat::kAzure2019, Azure2019("o,a,f,http,1,2,3\n"), "more than the 5");
  options_ = TraceOptions{};
  catalog_ = Catalog{};
  ExpectError(TraceFormat::kAzure2019, Azure2019("o,a,f,http,1,2,3\n"),
              "no functions to draw Azure function profiles from");
}

TEST_F(TraceReaderTest, ReadsAzure2021) {
  const std::string path = Write("inv.txt",
                                 "app,func,end_timestamp,duration\n"
                                 "app1,f1,10.5,0.5\n"
                                 "app1,f1,9.0,2.0\n"
                                 "app2,f2,11.0,0.25\n");
  auto trace = ReadTrace(path, TraceFormat::kAzure2021, catalog_, options_);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->invocations.size(), 3u);
  EXPECT_EQ(catalog_.FindFunction("f1")->tenant, "app1");
  EXPECT_EQ(catalog_.FindFunction("f2")->tenant, "app2");
  // Arrivals = end - duration = 10, 7, 10.75; shifted to start at 7.
  EXPECT_DOUBLE_EQ(trace->invocations[0].arrival_seconds, 0.0);
  EXPECT_DOUBLE_EQ(trace->invocations[0].duration_seconds, 2.0);
  EXPECT_DOUBLE_EQ(trace->invocations[1].arrival_seconds, 3.0);
  EXPECT_DOUBLE_EQ(trace->invocations[2].arrival_seconds, 3.75);
  EXPECT_DOUBLE_EQ(trace->invocations[2].duration_seconds, 0.25);
}

TEST_F(TraceReaderTest, Azure2021Errors) {
  ExpectError(TraceFormat::kAzure2021, "", "bad.csv: the file is empty");
  ExpectError(TraceFormat::kAzure2021, "app,func,end,duration\n",
              "bad.csv:1: bad header: azure-2021 needs columns app,func,end_timestamp,duration "
              "(no 'end_timestamp')");
  ExpectError(TraceFormat::kAzure2021, "app,func,end_timestamp,duration\n", "no data rows");
  ExpectError(TraceFormat::kAzure2021, "app,func,end_timestamp,duration\na,f,1\n",
              "bad.csv:2: missing column");
  ExpectError(TraceFormat::kAzure2021, "app,func,end_timestamp,duration\na,f,1,1\na,f,z,1\n",
              "bad.csv:3: column 'end_timestamp': 'z' is not a number");
  ExpectError(TraceFormat::kAzure2021, "app,func,end_timestamp,duration\na,f,1,-1\n",
              "bad.csv:2: duration -1 is negative");
}

TEST_F(TraceReaderTest, ReadsAzureLlm) {
  const std::string path = Write("llm.csv",
                                 "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                 "2023-11-16 18:15:46.6805900,374,44\n"
                                 "2023-11-16 18:15:50.9951690,396,109\n"
                                 "2023-11-17 00:00:00,1,1\n");
  options_.function = "bert";
  auto trace = ReadTrace(path, TraceFormat::kAzureLlm, catalog_, options_);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->invocations.size(), 3u);
  EXPECT_EQ(trace->invocations[0].function, 1u);
  EXPECT_DOUBLE_EQ(trace->invocations[0].arrival_seconds, 0.0);
  EXPECT_NEAR(trace->invocations[1].arrival_seconds, 4.314579, 1e-9);
  // Across midnight: 18:15:46.68059 to 24:00:00.
  EXPECT_NEAR(trace->invocations[2].arrival_seconds, 5 * 3600 + 44 * 60 + 13.31941, 1e-6);

  options_.function.clear();  // default: the catalog's first function
  auto first = ReadTrace(path, TraceFormat::kAzureLlm, catalog_, options_);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->invocations[0].function, 0u);
}

TEST_F(TraceReaderTest, TimesBeyondTheirBoundsAreErrors) {
  // An epoch timestamp among relative ones, and a duration in milliseconds read as seconds.
  ExpectError(TraceFormat::kInvocations, "function,timestamp\nresnet50,0\nresnet50,1e12\n",
              "more than the 31622400 s (one year) a trace may span");
  ExpectError(TraceFormat::kInvocations, "function,timestamp,duration\nresnet50,0,250000\n",
              "bad.csv:2: duration 250000 s is more than a day");
  ExpectError(TraceFormat::kAzureLlm,
              "TIMESTAMP,ContextTokens,GeneratedTokens\n4046-11-16 18:15:46.68,1,1\n",
              "bad.csv:2: column 'TIMESTAMP': '4046-11-16 18:15:46.68' is not a time like");
}

TEST_F(TraceReaderTest, AzureLlmErrors) {
  const std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  ExpectError(TraceFormat::kAzureLlm, "", "bad.csv: the file is empty");
  ExpectError(TraceFormat::kAzureLlm, "TIME,Context,Generated\n", "bad.csv:1: bad header");
  ExpectError(TraceFormat::kAzureLlm, header, "no data rows");
  ExpectError(TraceFormat::kAzureLlm, header + "2023-11-16 18:15:46.68,1\n",
              "bad.csv:2: missing column");
  ExpectError(TraceFormat::kAzureLlm,
              header + "2023-11-16 18:15:46.68,1,2\n2023-13-16 18:15:46,1,2\n",
              "bad.csv:3: column 'TIMESTAMP': '2023-13-16 18:15:46' is not a time");
  ExpectError(TraceFormat::kAzureLlm, header + "2023-11-16 18:15:46,x,2\n",
              "bad.csv:2: column 'ContextTokens': 'x' is not a token count");
  options_.function = "nope";
  ExpectError(TraceFormat::kAzureLlm, header + "2023-11-16 18:15:46,1,2\n",
              "bad.csv: unknown function 'nope'", StatusCode::kNotFound);
}

TEST_F(TraceReaderTest, BuildWorkloadResolvesInvokedFunctionsOnly) {
  const std::string path = Write("t.csv",
                                 "function,timestamp,duration\n"
                                 "bert,1.0,\n"
                                 "resnet50,0.5,0.010\n"
                                 "resnet50,2.0,0.020\n"
                                 "resnet50,3.0,0.030\n");
  auto trace = ReadTrace(path, TraceFormat::kInvocations, catalog_, options_);
  ASSERT_TRUE(trace.ok());
  const GpuType& gpu = *catalog_.FindGpuType("a100-40gb");
  auto workload = BuildWorkload(catalog_, *trace, gpu);
  ASSERT_TRUE(workload.ok()) << workload.status().ToString();
  ASSERT_EQ(workload->functions.size(), 2u);  // `unused` is left out
  EXPECT_EQ(workload->functions[0].name, "resnet50");
  EXPECT_EQ(workload->functions[1].name, "bert");
  // resnet50 has trace durations: SLO = 1.5 x p90 (nearest rank of 10, 20, 30 ms is 30 ms).
  EXPECT_EQ(workload->functions[0].slo, milliseconds(45));
  EXPECT_EQ(workload->functions[1].slo, milliseconds(40));  // stated in the catalog
  ASSERT_EQ(workload->requests.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(workload->requests[i].id, i);
  EXPECT_EQ(workload->requests[0].function, 0u);
  EXPECT_EQ(workload->requests[0].arrival, TimePoint{});
  EXPECT_EQ(workload->requests[0].deadline, TimePoint{} + milliseconds(45));
  ASSERT_EQ(workload->exec_times.size(), 4u);
  EXPECT_EQ(workload->exec_times[0], milliseconds(10));
  EXPECT_EQ(workload->requests[1].function, 1u);
  EXPECT_EQ(workload->requests[1].arrival, AtSeconds(0.5));
  EXPECT_EQ(workload->exec_times[1], Duration::zero());
  EXPECT_EQ(workload->requests[3].arrival, AtSeconds(2.5));
  EXPECT_EQ(workload->trace_format, "invocations");

  FunctionSpec huge = catalog_.functions[0];
  huge.name = "huge";
  huge.model_bytes = huge.gpu_memory_bytes = 100 * kGiB;
  ASSERT_TRUE(catalog_.AddFunction(huge).ok());
  RawTrace bad;
  bad.invocations.push_back(Invocation{3, 0, 0});
  auto too_big = BuildWorkload(catalog_, bad, gpu);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("huge"), std::string::npos);
  bad.invocations[0].function = 99;
  EXPECT_FALSE(BuildWorkload(catalog_, bad, gpu).ok());
}

// The project's own copy of the Azure LLM trace (CC-BY-4.0, data/traces/azure-llm-2023).
TEST_F(TraceReaderTest, ReadsTheShippedAzureLlmTrace) {
  const char* source_dir = std::getenv("GSHARE_SOURCE_DIR");
  if (source_dir == nullptr) GTEST_SKIP() << "GSHARE_SOURCE_DIR is not set";
  const fs::path file =
      fs::path(source_dir) / "data/traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv";
  auto trace = ReadTrace(file.string(), TraceFormat::kAzureLlm, catalog_, options_);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->invocations.size(), 19366u);
  // One hour of arrivals, about 18:15 to 19:14.
  EXPECT_GT(trace->invocations.back().arrival_seconds, 3500.0);
  EXPECT_LT(trace->invocations.back().arrival_seconds, 3700.0);
}

// The shared data folder beside the checkout, when it is there.
TEST_F(TraceReaderTest, ReadsTheSharedAzureLlmTraceWhenPresent) {
  const char* source_dir = std::getenv("GSHARE_SOURCE_DIR");
  const fs::path dir =
      fs::path(source_dir == nullptr ? "." : source_dir) / "../shared/data/azure-llm-2023";
  if (!fs::exists(dir / "AzureLLMInferenceTrace_code.csv")) {
    GTEST_SKIP() << "no shared data at " << dir.string();
  }
  auto trace = ReadTrace((dir / "AzureLLMInferenceTrace_code.csv").string(), TraceFormat::kAzureLlm,
                         catalog_, options_);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->invocations.size(), 8819u);
}

}  // namespace
}  // namespace gshare
