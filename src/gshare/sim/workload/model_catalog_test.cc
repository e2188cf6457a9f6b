#include "gshare/sim/workload/model_catalog.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gshare {
namespace {

namespace fs = std::filesystem;
using std::chrono::microseconds;

class ModelCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gshare_models_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_ / "profiles");
    Write("profiles/nvidia_dle_resnet50_triton_offline.csv",
          "gpu,backend,precision,batch_size,inferences_per_sec,p90_ms,p95_ms,p99_ms,avg_ms\n"
          "T4,x,FP16,1,1,1,1,1,9.0\n"
          "A100-80GB,x,FP16,1,1,1,1,1,2.0\n"
          "A100-80GB,x,FP16,16,1,1,1,1,8.0\n");  // 4x the latency for 16x the work: alpha = 0.5
    options_.timm_benchmark_path = Write(
        "timm.csv",
        "model,infer_img_size,infer_samples_per_sec,infer_step_time,infer_batch_size,param_count,"
        "infer_gmacs,infer_macts\n"
        "test_vit,160,1000000,1,1024,0.37,0.04,0.48\n"
        "resnet50,160,8000,1,1024,25.56,2.1,5.67\n"
        "resnet50,224,4000,1,1024,25.56,4.11,11.11\n"
        "big,224,1000,1,1024,1500,100,50\n"
        "tiny,224,16000,1,1024,1.25,0.1,2\n");
    options_.profiles_dir = (dir_ / "profiles").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  fs::path dir_;
  DeriveOptions options_;
};

TEST_F(ModelCatalogTest, DerivesProfilesByTheDocumentedRules) {
  auto derived = DeriveModelCatalog(options_);
  ASSERT_TRUE(derived.ok()) << derived.status().ToString();
  EXPECT_EQ(derived->candidates, 3u);  // test_ networks dropped; resnet50 once
  EXPECT_DOUBLE_EQ(derived->reference_latency_ms, 2.0);
  EXPECT_DOUBLE_EQ(derived->exponent, 0.5);
  EXPECT_DOUBLE_EQ(derived->reference_throughput, 4000);  // the 224-pixel row
  const auto& functions = derived->catalog.functions;
  ASSERT_EQ(functions.size(), 3u);
  EXPECT_EQ(functions[0].name, "tiny");  // sorted by size
  EXPECT_EQ(functions[2].name, "big");

  const FunctionSpec* resnet = derived->catalog.FindFunction("resnet50");
  ASSERT_NE(resnet, nullptr);
  EXPECT_EQ(resnet->model_bytes, 102'240'000u);
  // 102.24 MB + 44.44 MB + 256 MiB = 415.1 MB -> 512 MiB.
  EXPECT_EQ(resnet->gpu_memory_bytes, 512 * kMiB);
  EXPECT_EQ(resnet->exec_latency.at("a100-40gb").by_batch.at(1), microseconds(2000));

  const FunctionSpec* big = derived->catalog.FindFunction("big");
  EXPECT_EQ(big->model_bytes, 6'000'000'000u);
  // 2 ms x (4000 / 1000) ^ 0.5 = 4 ms.
  EXPECT_EQ(big->exec_latency.at("a100-40gb").by_batch.at(1), microseconds(4000));
  EXPECT_EQ(big->gpu_memory_bytes % (128 * kMiB), 0u);
  // 2 ms x (4000 / 16000) ^ 0.5 = 1 ms.
  EXPECT_EQ(derived->catalog.FindFunction("tiny")->exec_latency.at("a100-40gb").by_batch.at(1),
            microseconds(1000));

  // The YAML form parses back to the same functions.
  auto again = ParseCatalog(DerivedCatalogToYaml(*derived), "models.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->functions.size(), 3u);
  EXPECT_EQ(again->FindFunction("big")->model_bytes, big->model_bytes);
}

TEST_F(ModelCatalogTest, CountLimitsTheSelectionAndKeepsResnet) {
  options_.count = 2;
  auto derived = DeriveModelCatalog(options_);
  ASSERT_TRUE(derived.ok());
  ASSERT_EQ(derived->catalog.functions.size(), 2u);
  EXPECT_NE(derived->catalog.FindFunction("resnet50"), nullptr);
  options_.count = 0;
  EXPECT_FALSE(DeriveModelCatalog(options_).ok());
}

TEST_F(ModelCatalogTest, ErrorsNameFileAndLine) {
  options_.timm_benchmark_path = Write("bad.csv",
                                       "model,infer_img_size,infer_samples_per_sec,param_count,"
                                       "infer_macts\nresnet50,224,fast,25.56,11.11\n");
  auto bad = DeriveModelCatalog(options_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.csv:2: column 'infer_samples_per_sec': 'fast'"),
            std::string::npos)
      << bad.status().message();

  options_.timm_benchmark_path = Write("nohead.csv", "model,param_count\nx,1\n");
  auto no_column = DeriveModelCatalog(options_);
  ASSERT_FALSE(no_column.ok());
  EXPECT_NE(no_column.status().message().find("nohead.csv:1: bad header: no 'infer_img_size'"),
            std::string::npos);

  options_.timm_benchmark_path =
      Write("nores.csv",
            "model,infer_img_size,infer_samples_per_sec,param_count,infer_macts\nx,224,5,1,1\n");
  auto no_resnet = DeriveModelCatalog(options_);
  ASSERT_FALSE(no_resnet.ok());
  EXPECT_NE(no_resnet.status().message().find("no 'resnet50' row"), std::string::npos);

  options_.profiles_dir = (dir_ / "nothing").string();
  EXPECT_EQ(DeriveModelCatalog(options_).status().code(), StatusCode::kNotFound);
}

TEST(BuiltinModelCatalogTest, ShipsProfilesAcrossAllSizeClasses) {
  auto catalog = BuiltinModelCatalog();
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  ASSERT_GE(catalog->functions.size(), 50u);
  const FunctionSpec* resnet = catalog->FindFunction("resnet50");
  ASSERT_NE(resnet, nullptr);
  EXPECT_EQ(resnet->model_bytes, 102'240'000u);  // 25.56 M parameters x 4 bytes
  EXPECT_EQ(resnet->exec_latency.at("a100-40gb").by_batch.at(1), microseconds(2128));
  int small = 0, medium = 0, large = 0;
  for (const auto& f : catalog->functions) {
    small += f.model_bytes < 1'000'000'000;
    medium += f.model_bytes >= 1'000'000'000 && f.model_bytes < 4'000'000'000;
    large += f.model_bytes >= 4'000'000'000;
    // Every shipped profile fits the smallest built-in GPU type (T4, 16 GiB).
    EXPECT_LE(f.gpu_memory_bytes, 16 * kGiB) << f.name;
  }
  EXPECT_GT(small, 10);
  EXPECT_GT(medium, 5);
  EXPECT_GT(large, 5);
}

// data/models.yaml is exactly what `gshare catalog derive` makes of the shared data.
TEST(BuiltinModelCatalogTest, RegeneratesFromTheSharedDataWhenPresent) {
  const char* source_dir = std::getenv("GSHARE_SOURCE_DIR");
  if (source_dir == nullptr) GTEST_SKIP() << "GSHARE_SOURCE_DIR is not set";
  const fs::path data = fs::path(source_dir) / "../shared/data";
  DeriveOptions options;
  options.timm_benchmark_path =
      (data / "timm/benchmark-infer-amp-nchw-pt291-cu128-4090.csv").string();
  options.profiles_dir = (data / "model-profiles").string();
  if (!fs::exists(options.timm_benchmark_path)) {
    GTEST_SKIP() << "no shared data at " << data.string();
  }
  auto derived = DeriveModelCatalog(options);
  ASSERT_TRUE(derived.ok()) << derived.status().ToString();
  std::ifstream in(fs::path(source_dir) / "data/models.yaml", std::ios::binary);
  std::stringstream shipped;
  shipped << in.rdbuf();
  EXPECT_EQ(DerivedCatalogToYaml(*derived), shipped.str())
      << "data/models.yaml is stale: regenerate it with the command in its header";
  EXPECT_EQ(std::string(BuiltinModelCatalogYaml()), shipped.str());
}

}  // namespace
}  // namespace gshare
