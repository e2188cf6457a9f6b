#include "gshare/model/catalog.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace gshare {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr char kCatalog[] = R"(
functions:
  - name: resnet50
    tenant: acme
    model_size: 98Mi
    gpu_memory: 300Mi
    exec_latency: 3.3ms
    slo: 50ms
  - name: bert
    tenant: globex
    model: bert-base
    model_size: 420Mi
    gpu_memory: 1Gi
    exec_latency:
      a100-40gb: 4ms
      t4:
        1: 9ms
        8: 30ms
    max_batch: 8
)";

std::string ErrorOf(std::string_view text) {
  auto catalog = ParseCatalog(text, "catalog.yaml");
  EXPECT_FALSE(catalog.ok());
  return catalog.ok() ? "" : catalog.status().message();
}

TEST(CatalogTest, ParsesFunctions) {
  auto catalog = ParseCatalog(kCatalog, "catalog.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  ASSERT_EQ(catalog->functions.size(), 2u);
  const FunctionSpec* resnet = catalog->FindFunction("resnet50");
  ASSERT_NE(resnet, nullptr);
  EXPECT_EQ(resnet->tenant, "acme");
  EXPECT_EQ(resnet->model, "resnet50");
  EXPECT_EQ(resnet->model_bytes, 98 * kMiB);
  EXPECT_EQ(resnet->gpu_memory_bytes, 300 * kMiB);
  EXPECT_EQ(resnet->exec_latency.at("a100-40gb").by_batch.at(1), microseconds(3300));
  EXPECT_EQ(resnet->slo, milliseconds(50));
  EXPECT_EQ(resnet->max_batch, 1);

  const FunctionSpec* bert = catalog->FindFunction("bert");
  ASSERT_NE(bert, nullptr);
  EXPECT_EQ(bert->model, "bert-base");
  EXPECT_EQ(bert->exec_latency.at("a100-40gb").by_batch.at(1), milliseconds(4));
  EXPECT_EQ(bert->exec_latency.at("t4").by_batch.at(8), milliseconds(30));
  EXPECT_FALSE(bert->slo.has_value());
  EXPECT_EQ(bert->max_batch, 8);
  EXPECT_EQ(catalog->FindFunction("missing"), nullptr);
  // The built-in GPU types come with every catalog.
  EXPECT_NE(catalog->FindGpuType("a100-40gb"), nullptr);
  EXPECT_NE(catalog->FindGpuType("h200"), nullptr);
}

TEST(CatalogTest, BuiltinGpuTypesHoldTheShippedTable) {
  const auto& types = BuiltinGpuTypes();
  ASSERT_EQ(types.size(), 5u);
  EXPECT_EQ(types[0].name, "a100-40gb");
  EXPECT_DOUBLE_EQ(types[0].relative_latency, 1.0);
  EXPECT_EQ(types[0].memory_bytes, 40 * kGiB);
  EXPECT_DOUBLE_EQ(types[0].price_per_hour_usd, 2.74);
  EXPECT_DOUBLE_EQ(types[0].h2d_bytes_per_second, 24.4e9);
  EXPECT_EQ(types[0].restore_overhead, milliseconds(1));
  ASSERT_EQ(types[0].batch_scaling.size(), 8u);
  EXPECT_DOUBLE_EQ(types[0].batch_scaling[4], 2.722);  // 5.793 ms / 2.128 ms at batch 16
  EXPECT_DOUBLE_EQ(types[0].serverless_cu_active, 2.1);
  EXPECT_DOUBLE_EQ(types[0].serverless_cu_idle, 0.5);
  EXPECT_DOUBLE_EQ(types[0].serverless_usd_per_cu, 0.00002);
  for (const auto& type : types) {
    EXPECT_FALSE(type.price_source.empty()) << type.name;
    EXPECT_GT(type.price_per_hour_usd, 0) << type.name;
    EXPECT_GT(type.h2d_bytes_per_second, 0) << type.name;
  }
  const GpuType* t4 = nullptr;
  for (const auto& type : types) {
    if (type.name == "t4") t4 = &type;
  }
  ASSERT_NE(t4, nullptr);
  EXPECT_DOUBLE_EQ(t4->relative_latency, 1.411);  // 3.003 ms / 2.128 ms
  EXPECT_EQ(t4->memory_bytes, 16 * kGiB);
}

TEST(CatalogTest, GpuTypesInTheTextReplaceAndExtendBuiltins) {
  auto catalog = ParseCatalog(R"(
gpu_types:
  - name: t4
    memory: 15Gi
    price_per_hour: 0.5
  - name: l4
    memory: 24Gi
    relative_latency: 0.9
    serverless_cu_active: 1.5
    serverless_cu_idle: 0.25
functions:
  - name: f
    model_size: 1Mi
    exec_latency: {l4: 2ms}
)",
                              "c.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  EXPECT_EQ(catalog->gpu_types.size(), 6u);
  ASSERT_NE(catalog->FindGpuType("t4"), nullptr);
  EXPECT_EQ(catalog->FindGpuType("t4")->memory_bytes, 15 * kGiB);
  EXPECT_DOUBLE_EQ(catalog->FindGpuType("l4")->serverless_cu_idle, 0.25);
  const FunctionSpec* f = catalog->FindFunction("f");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->tenant, "default");
  EXPECT_EQ(f->gpu_memory_bytes, kMiB);  // defaults to model_size
}

TEST(CatalogTest, ErrorsNameFileEntryAndField) {
  EXPECT_EQ(ErrorOf(R"(functions:
  - name: a
    model_size: 1Mi
    exec_latency: 1ms
  - name: b
    model_size: 1Mi
    exec_latency: 1ms
  - name: c
    model_size: 1Mi
    exec_latency: 1ms
  - name: resnet50
    model_size: abc
    exec_latency: 1ms
)"),
            "catalog.yaml: functions[3] (resnet50): model_size: 'abc' is not a byte quantity "
            "(line 12)");
  EXPECT_NE(ErrorOf("functions:\n  - name: f\n    exec_latency: 1ms\n")
                .find("functions[0] (f): model_size: missing"),
            std::string::npos);
  EXPECT_NE(ErrorOf("functions:\n  - model_size: 1Mi\n    exec_latency: 1ms\n")
                .find("functions[0]: name: missing"),
            std::string::npos);
}

// A key given twice is an error (YAML forbids it; the parser would keep one of them silently),
// in a catalog and in one function entry, nested maps included.
TEST(CatalogTest, AKeyGivenTwiceIsAnError) {
  EXPECT_EQ(ErrorOf("functions:\n  - name: a\n    model_size: 1Mi\n    model_size: 2Mi\n"
                    "    exec_latency: 1ms\n"),
            "catalog.yaml:4:5: key 'model_size' is given twice");
  EXPECT_NE(ErrorOf("functions:\n  - name: a\n    model_size: 1Mi\n"
                    "    exec_latency: {a100-40gb: {1: 1ms, 1: 2ms}}\n")
                .find("key '1' is given twice"),
            std::string::npos);
  const auto entry = ParseFunctionEntry("name: a\nname: b\nmodel_size: 1Mi\nexec_latency: 1ms\n",
                                        "the request body", "acme", "/models/acme");
  ASSERT_FALSE(entry.ok());
  EXPECT_EQ(entry.status().message(), "the request body:2:1: key 'name' is given twice");
}

// An alias is refused before the text is loaded: a node that holds itself, or a chain that
// doubles at each step, would otherwise make a walk of a few bytes endless.
TEST(CatalogTest, YamlAliasesAreRefused) {
  EXPECT_EQ(ErrorOf("x: &a [*a, *a]\n"), "catalog.yaml:1:8: YAML aliases are not accepted");
  std::string laughs = "a0: &a0 [1, 1]\n";
  for (int i = 1; i < 40; ++i) {
    laughs += fmt::format("a{}: &a{} [*a{}, *a{}]\n", i, i, i - 1, i - 1);
  }
  EXPECT_NE(ErrorOf(laughs).find("YAML aliases are not accepted"), std::string::npos);
  const auto entry =
      ParseFunctionEntry("name: &n a\nmodel: *n\nmodel_size: 1Mi\nexec_latency: 1ms\n",
                         "the request body", "acme", "/models/acme");
  ASSERT_FALSE(entry.ok());
  EXPECT_NE(entry.status().message().find("YAML aliases are not accepted"), std::string::npos);
}

TEST(CatalogTest, RejectsInvalidValues) {
  const std::string head = "functions:\n  - name: f\n    model_size: 100Mi\n";
  EXPECT_NE(ErrorOf(head + "    gpu_memory: 50Mi\n    exec_latency: 1ms\n")
                .find("gpu_memory: 50.0 MiB is smaller than model_size (100.0 MiB)"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    exec_latency: 0ms\n").find("exec_latency: '0ms' must be positive"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    exec_latency: 3\n").find("exec_latency:"), std::string::npos);
  EXPECT_NE(ErrorOf(head + "    exec_latency: {v100: 1ms}\n")
                .find("exec_latency.v100: unknown GPU type 'v100'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    exec_latency: {t4: {8: 9ms}}\n")
                .find("exec_latency.t4: the batch-1 latency is missing"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    exec_latency: 1ms\n    reference_gpu: v100\n")
                .find("reference_gpu: unknown GPU type 'v100'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    exec_latency: 1ms\n    slo: -5ms\n").find("slo:"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    exec_latency: 1ms\n    max_batch: 0\n")
                .find("max_batch: must be between 1 and 4096"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    exec_latency: 1ms\n    max_batch: 2000000000\n")
                .find("max_batch: must be between 1 and 4096"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    exec_latency: 1ms\n" + "  - name: f\n    model_size: 1Mi\n" +
                    "    exec_latency: 1ms\n")
                .find("functions[1] (f): name: 'f' is already used"),
            std::string::npos);
  EXPECT_NE(ErrorOf("gpu_types:\n  - name: x\n    memory: 1Gi\n    price_per_hour: 1e300\n")
                .find("price_per_hour: must be at most 1e6"),
            std::string::npos);
  EXPECT_NE(ErrorOf("gpu_types:\n  - name: x\n    memory: 1Gi\n    price_per_hour: .nan\n")
                .find("price_per_hour"),
            std::string::npos);
  EXPECT_NE(ErrorOf("gpu_types:\n  - name: x\n    memory: 1Gi\n    relative_latency: 0\n")
                .find("gpu_types[0] (x): relative_latency: must be positive"),
            std::string::npos);
}

TEST(CatalogTest, RejectsMalformedDocuments) {
  EXPECT_NE(ErrorOf("").find("catalog.yaml: the document is empty"), std::string::npos);
  EXPECT_NE(ErrorOf("- a\n- b\n").find("expected a map"), std::string::npos);
  EXPECT_NE(ErrorOf("functions: {a: 1}\n").find("functions: expected a list"), std::string::npos);
  // A YAML syntax error carries yaml-cpp's line and column.
  EXPECT_NE(ErrorOf("functions:\n  - name: [unclosed\n").find("catalog.yaml:"), std::string::npos);
}

TEST(CatalogTest, YamlRoundTripKeepsEveryField) {
  auto catalog = ParseCatalog(kCatalog, "catalog.yaml");
  ASSERT_TRUE(catalog.ok());
  FunctionSpec odd;
  odd.name = "1e10";  // a name YAML would read as a number unless quoted
  odd.tenant = "yes";
  odd.model_bytes = 102'240'000;
  odd.gpu_memory_bytes = 384 * kMiB;
  odd.exec_latency["a100-40gb"].by_batch[1] = Duration(2'128'001);
  ASSERT_TRUE(catalog->AddFunction(odd).ok());
  const std::string text = CatalogToYaml(*catalog);
  auto again = ParseCatalog(text, "roundtrip.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
  ASSERT_EQ(again->functions.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& a = catalog->functions[i];
    const auto& b = again->functions[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.tenant, b.tenant);
    EXPECT_EQ(a.model.empty() ? a.name : a.model, b.model);
    EXPECT_EQ(a.model_bytes, b.model_bytes);
    EXPECT_EQ(a.gpu_memory_bytes, b.gpu_memory_bytes);
    EXPECT_EQ(a.slo, b.slo);
    EXPECT_EQ(a.max_batch, b.max_batch);
    ASSERT_EQ(a.exec_latency.size(), b.exec_latency.size());
    for (const auto& [gpu, table] : a.exec_latency) {
      EXPECT_EQ(table.by_batch, b.exec_latency.at(gpu).by_batch) << a.name << " " << gpu;
    }
  }
  EXPECT_EQ(CatalogToYaml(*again), text);
}

TEST(CatalogTest, OneEntryParsesAloneAndRoundTrips) {
  auto catalog = ParseCatalog(kCatalog, "catalog.yaml");
  ASSERT_TRUE(catalog.ok());
  for (const auto& spec : catalog->functions) {
    const std::string text = FunctionSpecToYaml(spec);
    auto again = ParseFunctionEntry(text, "entry.yaml");
    ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
    EXPECT_EQ(again->name, spec.name);
    EXPECT_EQ(again->tenant, spec.tenant);
    EXPECT_EQ(again->gpu_memory_bytes, spec.gpu_memory_bytes);
    EXPECT_EQ(FunctionSpecToYaml(*again), text);
  }
  // Without a tenant the entry takes the one given; with one it keeps its own.
  auto bare = ParseFunctionEntry("name: f\nmodel_size: 1Mi\nexec_latency: 1ms\n", "f.yaml", "acme");
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(bare->tenant, "acme");
  auto own = ParseFunctionEntry("{name: f, tenant: b, model_size: 1Mi, exec_latency: 1ms}",
                                "f.yaml", "acme");
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->tenant, "b");
  EXPECT_EQ(ParseFunctionEntry("name: f\nmodel_size: 1Mi\n", "f.yaml").status().message(),
            "f.yaml: function (f): exec_latency: missing (line 1)");
  for (const char* bad : {"", "[1, 2]", "name: [", "name: f\nmodel_size: -1\nexec_latency: 1ms"}) {
    auto parsed = ParseFunctionEntry(bad, "bad.yaml");
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(CatalogTest, AddFunctionRejectsDuplicates) {
  Catalog catalog;
  FunctionSpec spec;
  spec.name = "f";
  EXPECT_TRUE(catalog.AddFunction(spec).ok());
  EXPECT_EQ(catalog.AddFunction(spec).code(), StatusCode::kAlreadyExists);
  // Direct edits of `functions` are still found.
  spec.name = "g";
  catalog.functions.push_back(spec);
  EXPECT_NE(catalog.FindFunction("g"), nullptr);
  spec.name = "h";
  EXPECT_TRUE(catalog.AddFunction(spec).ok());
  EXPECT_EQ(catalog.FindFunction("h"), &catalog.functions[2]);
}

TEST(CatalogTest, LoadCatalogReadsFilesAndNamesThem) {
  const auto dir = std::filesystem::temp_directory_path() / "gshare_catalog_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "c.yaml").string();
  {
    std::ofstream out(path);
    out << kCatalog;
  }
  auto catalog = LoadCatalog(path);
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  EXPECT_EQ(catalog->functions.size(), 2u);
  auto missing = LoadCatalog((dir / "nope.yaml").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.yaml"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(CatalogTest, ShippedExampleCatalogLoads) {
  const char* source_dir = std::getenv("GSHARE_SOURCE_DIR");
  if (source_dir == nullptr) GTEST_SKIP() << "GSHARE_SOURCE_DIR is not set";
  auto catalog = LoadCatalog(std::string(source_dir) + "/data/examples/small-catalog.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  EXPECT_GE(catalog->functions.size(), 4u);
}

}  // namespace
}  // namespace gshare

namespace gshare {
namespace {

TEST(CatalogTest, BatchMemoryParsesAndRoundTrips) {
  constexpr char kText[] = R"(
functions:
  - name: bert
    model_size: 420Mi
    gpu_memory: 768Mi
    exec_latency: 6ms
    max_batch: 8
    batch_memory: 64Mi
)";
  auto catalog = ParseCatalog(kText, "batch.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  EXPECT_EQ(catalog->functions[0].batch_memory_bytes, 64 * kMiB);
  auto again = ParseCatalog(CatalogToYaml(*catalog), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->functions[0].batch_memory_bytes, 64 * kMiB);
  // Resolved, the memory grows with the batch: 768 MiB + 7 x 64 MiB at batch 8.
  auto resolved = ResolveFunction(catalog->functions[0], *catalog->FindGpuType("a100-40gb"),
                                  catalog->gpu_types);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->MemoryForBatch(1), 768 * kMiB);
  EXPECT_EQ(resolved->MemoryForBatch(8), (768 + 7 * 64) * kMiB);
  // A batch that cannot fit on the GPU is a clear error.
  FunctionSpec huge = catalog->functions[0];
  huge.batch_memory_bytes = 8 * kGiB;
  auto too_big = ResolveFunction(huge, *catalog->FindGpuType("a100-40gb"), catalog->gpu_types);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.status().message().find("at batch 8"), std::string::npos);
}

TEST(CatalogTest, InstanceBoundsParseValidateAndRoundTrip) {
  constexpr char kText[] = R"(
functions:
  - name: bert
    model_size: 420Mi
    exec_latency: 6ms
    min_instances: 1
    max_instances: 3
)";
  auto catalog = ParseCatalog(kText, "instances.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  EXPECT_EQ(catalog->functions[0].min_instances, 1);
  EXPECT_EQ(catalog->functions[0].max_instances, 3);
  auto again = ParseCatalog(CatalogToYaml(*catalog), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->functions[0].min_instances, 1);
  EXPECT_EQ(again->functions[0].max_instances, 3);
  auto resolved = ResolveFunction(catalog->functions[0], *catalog->FindGpuType("a100-40gb"),
                                  catalog->gpu_types);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->min_instances, 1);
  EXPECT_EQ(resolved->max_instances, 3);

  const std::string head =
      "functions:\n  - name: f\n    model_size: 100Mi\n    exec_latency: 1ms\n";
  EXPECT_NE(ErrorOf(head + "    min_instances: -1\n").find("min_instances: must be between 0"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    max_instances: 20000\n").find("max_instances: must be between"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    min_instances: 4\n    max_instances: 2\n")
                .find("max_instances: must be at least min_instances"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    max_instances: 1.5\n").find("max_instances"), std::string::npos);
}

TEST(CatalogTest, SloFactorParsesValidatesAndRoundTrips) {
  constexpr char kText[] = R"(
functions:
  - name: f
    model_size: 100Mi
    exec_latency: 4ms
    slo_factor: 5
)";
  auto catalog = ParseCatalog(kText, "factor.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  EXPECT_EQ(catalog->functions[0].slo_factor, 5.0);
  auto resolved = ResolveFunction(catalog->functions[0], *catalog->FindGpuType("a100-40gb"),
                                  catalog->gpu_types);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->slo, std::chrono::milliseconds(20));
  auto again = ParseCatalog(CatalogToYaml(*catalog), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->functions[0].slo_factor, 5.0);
  const std::string head =
      "functions:\n  - name: f\n    model_size: 100Mi\n    exec_latency: 1ms\n";
  EXPECT_NE(ErrorOf(head + "    slo_factor: 0.5\n").find("slo_factor: must be between 1 and 100"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "    slo_factor: .inf\n").find("slo_factor"), std::string::npos);
  EXPECT_NE(ErrorOf(head + "    slo: 5ms\n    slo_factor: 3\n").find("not both"),
            std::string::npos);
}

}  // namespace
}  // namespace gshare

namespace gshare {
namespace {

constexpr char kLiveCatalog[] = R"(
functions:
  - name: classifier
    tenant: acme
    model_size: 23Mi
    exec_latency: 6ms
    command: [bin/serve, --threads, "1", ""]
    env: {MODEL_NAME: mlp, _LEVEL: "a b"}
    working_dir: fn/../functions
    model_files: [weights/mlp.safetensors, /data/shared.bin]
    timeout: 5s
    host_memory: 512Mi
  - name: echo
    model_size: 1Mi
    exec_latency: 0.05ms
    runtime: echo
  - name: sim-only
    model_size: 1Mi
    exec_latency: 1ms
)";

std::string ProcessErrorOf(const std::string& fields) {
  const std::string text =
      "functions:\n  - name: f\n    model_size: 1Mi\n    exec_latency: 1ms\n" + fields;
  auto catalog = ParseCatalog(text, "live.yaml", "/srv/catalogs");
  EXPECT_FALSE(catalog.ok()) << fields;
  return catalog.ok() ? "" : catalog.status().message();
}

TEST(CatalogProcessTest, ParsesEveryProcessField) {
  auto catalog = ParseCatalog(kLiveCatalog, "live.yaml", "/srv/catalogs");
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  const FunctionSpec& f = catalog->functions[0];
  EXPECT_TRUE(f.IsLive());
  EXPECT_EQ(f.command, (std::vector<std::string>{"bin/serve", "--threads", "1", ""}));
  EXPECT_TRUE(f.runtime.empty());
  EXPECT_EQ(f.env, (std::map<std::string, std::string>{{"MODEL_NAME", "mlp"}, {"_LEVEL", "a b"}}));
  // Relative paths are resolved against the catalog's folder and normalised; absolute ones kept.
  EXPECT_EQ(f.working_dir, "/srv/catalogs/functions");
  EXPECT_EQ(f.model_files, (std::vector<std::string>{"/srv/catalogs/weights/mlp.safetensors",
                                                     "/data/shared.bin"}));
  EXPECT_EQ(f.timeout, std::chrono::seconds(5));
  EXPECT_EQ(f.RequestTimeout(), std::chrono::seconds(5));
  EXPECT_EQ(f.host_memory_bytes, std::optional<std::uint64_t>(512ULL << 20));

  const FunctionSpec& echo = catalog->functions[1];
  EXPECT_TRUE(echo.IsLive());
  EXPECT_EQ(echo.runtime, "echo");
  EXPECT_TRUE(echo.command.empty());
  EXPECT_EQ(echo.RequestTimeout(), kDefaultRequestTimeout);

  // A simulation-only entry is unchanged: no process fields.
  const FunctionSpec& sim = catalog->functions[2];
  EXPECT_FALSE(sim.IsLive());
  EXPECT_TRUE(sim.env.empty());
  EXPECT_TRUE(sim.working_dir.empty());
  EXPECT_TRUE(sim.model_files.empty());
  EXPECT_FALSE(sim.timeout.has_value());
}

TEST(CatalogProcessTest, ProcessFieldsRoundTripThroughYaml) {
  auto catalog = ParseCatalog(kLiveCatalog, "live.yaml", "/srv/catalogs");
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  catalog->functions[0].env["MULTI_LINE"] = "one\ntwo \"quoted\" \\ done";
  const std::string text = CatalogToYaml(*catalog);
  // Paths are absolute once loaded, so the text reads back without a folder.
  auto again = ParseCatalog(text, "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
  ASSERT_EQ(again->functions.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& a = catalog->functions[i];
    const auto& b = again->functions[i];
    EXPECT_EQ(a.command, b.command) << a.name;
    EXPECT_EQ(a.runtime, b.runtime) << a.name;
    EXPECT_EQ(a.env, b.env) << a.name;
    EXPECT_EQ(a.working_dir, b.working_dir) << a.name;
    EXPECT_EQ(a.model_files, b.model_files) << a.name;
    EXPECT_EQ(a.timeout, b.timeout) << a.name;
    EXPECT_EQ(a.host_memory_bytes, b.host_memory_bytes) << a.name;
  }
  EXPECT_EQ(CatalogToYaml(*again), text);
}

TEST(CatalogProcessTest, LoadCatalogResolvesPathsAgainstTheFilesFolder) {
  const auto dir = std::filesystem::temp_directory_path() / "gshare_catalog_process_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "live.yaml").string();
  {
    std::ofstream out(path);
    out << kLiveCatalog;
  }
  auto catalog = LoadCatalog(path);
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  const std::filesystem::path folder = std::filesystem::absolute(dir).lexically_normal();
  EXPECT_EQ(catalog->functions[0].working_dir, (folder / "functions").string());
  EXPECT_EQ(catalog->functions[0].model_files[0],
            (folder / "weights" / "mlp.safetensors").string());
  std::filesystem::remove_all(dir);
}

TEST(CatalogProcessTest, CommandAndRuntimeErrors) {
  EXPECT_NE(ProcessErrorOf("    command: [a]\n    runtime: mlp\n")
                .find("live.yaml: functions[0] (f): runtime: give command or runtime, not both"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    command: serve --port 1\n")
                .find("command: expected a list: the program, then its arguments"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    command: []\n").find("command: must name a program"),
            std::string::npos);
  EXPECT_NE(
      ProcessErrorOf("    command: [\"\", x]\n").find("command[0]: the program must not be empty"),
      std::string::npos);
  EXPECT_NE(ProcessErrorOf("    command: [a, [b]]\n").find("command[1]: expected a single value"),
            std::string::npos);
  EXPECT_NE(
      ProcessErrorOf("    command: [\"a\\0b\"]\n").find("command[0]: must not contain a NUL byte"),
      std::string::npos);
  EXPECT_NE(ProcessErrorOf("    command: [a, " + std::string(kMaxArgumentBytes + 1, 'x') + "]\n")
                .find("command[1]: is 4097 bytes long; at most 4096"),
            std::string::npos);
  std::string many = "    command: [a";
  for (std::size_t i = 0; i < kMaxCommandArguments; ++i) many += ", x";
  EXPECT_NE(ProcessErrorOf(many + "]\n").find("command: has 257 items; at most 256"),
            std::string::npos);
  EXPECT_NE(
      ProcessErrorOf("    runtime: resnet\n")
          .find("runtime: unknown runtime 'resnet' (bundled: mlp, cnn, echo, pytorch, python)"),
      std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: [mlp]\n").find("runtime: expected a single value"),
            std::string::npos);
}

TEST(CatalogProcessTest, EnvErrors) {
  EXPECT_NE(
      ProcessErrorOf("    runtime: mlp\n    env: [A]\n").find("env: expected a map of name: value"),
      std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    env: {\"A=B\": x}\n")
                .find("env.A=B: 'A=B' is not an environment name"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    env: {1ABC: x}\n")
                .find("'1ABC' is not an environment name"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    env: {\"\": x}\n")
                .find("'' is not an environment name"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    env: {\"A\\0B\": x}\n")
                .find("env name: must not contain a NUL byte"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    env: {GSHARE_SOCKET: x}\n")
                .find("env.GSHARE_SOCKET: names starting with GSHARE_ are set by the node"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    env: {A: {b: c}}\n")
                .find("env.A: expected a single value"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    env: {A: \"x\\0y\"}\n")
                .find("env.A: must not contain a NUL byte"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf(
                "    runtime: mlp\n    env: {A: " + std::string(kMaxEnvValueBytes + 1, 'v') + "}\n")
                .find("env.A: is 32769 bytes long; at most 32768"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    env: {" + std::string(kMaxEnvNameBytes + 1, 'N') +
                           ": x}\n")
                .find("env name: is 257 bytes long; at most 256"),
            std::string::npos);
  std::string many = "    runtime: mlp\n    env:\n";
  for (std::size_t i = 0; i <= kMaxEnvEntries; ++i) many += fmt::format("      V{}: x\n", i);
  EXPECT_NE(ProcessErrorOf(many).find("env: has 257 entries; at most 256"), std::string::npos);
}

TEST(CatalogProcessTest, PathAndTimeoutErrors) {
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    working_dir: \"\"\n")
                .find("working_dir: must not be empty"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    working_dir: /" +
                           std::string(kMaxPathBytes, 'p') + "\n")
                .find("working_dir: is 4097 bytes long; at most 4096"),
            std::string::npos);
  // Within the bound as written, beyond it once joined to the catalog's folder.
  EXPECT_NE(ProcessErrorOf(
                "    runtime: mlp\n    working_dir: " + std::string(kMaxPathBytes - 2, 'p') + "\n")
                .find("working_dir: resolves to a path of"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    model_files: weights.bin\n")
                .find("model_files: expected a list"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    model_files: [a, \"\"]\n")
                .find("model_files[1]: must not be empty"),
            std::string::npos);
  std::string many = "    runtime: mlp\n    model_files: [a";
  for (std::size_t i = 0; i < kMaxModelFiles; ++i) many += ", a";
  EXPECT_NE(ProcessErrorOf(many + "]\n").find("model_files: has 257 items; at most 256"),
            std::string::npos);
  EXPECT_NE(
      ProcessErrorOf("    runtime: mlp\n    timeout: 0s\n").find("timeout: '0s' must be positive"),
      std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    timeout: 5\n").find("timeout:"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    timeout: 2h\n").find("timeout: must be at most"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    runtime: mlp\n    host_memory: 1Mi\n")
                .find("host_memory: must be from 16Mi to 1Ti"),
            std::string::npos);
  EXPECT_NE(ProcessErrorOf("    host_memory: 1Gi\n").find("needs a command or a runtime"),
            std::string::npos);
  // A live function's names become file names and request paths: plain names only.
  for (const char* bad : {"../x", "a b", "a/b", ".hidden", "x\r\ny"}) {
    const std::string text = fmt::format(
        "functions:\n  - name: \"{}\"\n    model_size: 1Mi\n    exec_latency: 1ms\n"
        "    runtime: echo\n",
        bad);
    auto catalog = ParseCatalog(text, "live.yaml", "/srv/catalogs");
    ASSERT_FALSE(catalog.ok()) << bad;
    EXPECT_NE(catalog.status().message().find("a live function's name is letters"),
              std::string::npos)
        << catalog.status().ToString();
  }
  EXPECT_NE(ProcessErrorOf("    runtime: echo\n    tenant: \"t/../u\"\n")
                .find("a live function's tenant"),
            std::string::npos);
  EXPECT_NE(
      ProcessErrorOf("    runtime: echo\n    model: \"m x\"\n").find("a live function's model"),
      std::string::npos);
  // A simulation-only function keeps any name (traces name functions as they please).
  EXPECT_TRUE(ParseCatalog("functions:\n  - name: \"a b/c\"\n    model_size: 1Mi\n"
                           "    exec_latency: 1ms\n",
                           "sim.yaml")
                  .ok());
  // Relative paths need a catalog file's folder.
  auto no_folder = ParseCatalog(
      "functions:\n  - name: f\n    model_size: 1Mi\n    exec_latency: 1ms\n    runtime: mlp\n"
      "    working_dir: fn\n",
      "text");
  ASSERT_FALSE(no_folder.ok());
  EXPECT_NE(no_folder.status().message().find("working_dir: 'fn' is relative"), std::string::npos);
}

TEST(CatalogProcessTest, ProcessFieldsNeedACommandOrRuntime) {
  for (const char* field : {"env: {A: b}", "working_dir: /x", "model_files: [/x]", "timeout: 1s"}) {
    EXPECT_NE(ProcessErrorOf(fmt::format("    {}\n", field))
                  .find("needs a command or a runtime (a function without either is "
                        "simulation-only)"),
              std::string::npos)
        << field;
  }
}

TEST(CatalogProcessTest, NamesAreBounded) {
  const std::string long_name(kMaxNameBytes + 1, 'n');
  EXPECT_NE(ErrorOf("functions:\n  - name: " + long_name +
                    "\n    model_size: 1Mi\n"
                    "    exec_latency: 1ms\n")
                .find("name: is 257 bytes long; at most 256"),
            std::string::npos);
  EXPECT_NE(ErrorOf("functions:\n  - name: \"a\\0b\"\n    model_size: 1Mi\n    exec_latency: 1ms\n")
                .find("name: must not contain a NUL byte"),
            std::string::npos);
}

}  // namespace
}  // namespace gshare

namespace gshare {
namespace {

TEST(CatalogTest, TensorsAreParsedCheckedAndRoundTrip) {
  constexpr std::string_view kEntry =
      "name: f\nmodel_size: 1Mi\nexec_latency: 1ms\nmax_batch: 8\nruntime: echo\n"
      "inputs:\n  - {name: image, datatype: FP32, shape: [-1, 3, 224, 224]}\n"
      "  - {name: 'a name: odd', datatype: BYTES, shape: [-1, -1]}\n"
      "outputs:\n  - {name: logits, datatype: FP16, shape: [-1, 10]}\n";
  auto spec = ParseFunctionEntry(kEntry, "f.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->inputs.size(), 2u);
  EXPECT_EQ(spec->inputs[0], (TensorSpec{"image", DataType::kFp32, {-1, 3, 224, 224}}));
  EXPECT_EQ(spec->inputs[1], (TensorSpec{"a name: odd", DataType::kBytes, {-1, -1}}));
  ASSERT_EQ(spec->outputs.size(), 1u);
  EXPECT_EQ(spec->outputs[0], (TensorSpec{"logits", DataType::kFp16, {-1, 10}}));
  const std::string text = FunctionSpecToYaml(*spec);
  auto again = ParseFunctionEntry(text, "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
  EXPECT_EQ(again->inputs, spec->inputs);
  EXPECT_EQ(again->outputs, spec->outputs);
  EXPECT_EQ(FunctionSpecToYaml(*again), text);

  const auto error = [](std::string_view tensors) {
    const std::string entry =
        "name: f\nmodel_size: 1Mi\nexec_latency: 1ms\nmax_batch: 4\nruntime: echo\n" +
        std::string(tensors);
    auto parsed = ParseFunctionEntry(entry, "f.yaml");
    return parsed.ok() ? std::string("ok") : parsed.status().message();
  };
  EXPECT_NE(error("inputs: {name: x}\n").find("inputs: expected a list"), std::string::npos);
  EXPECT_NE(error("inputs: [{name: x, datatype: FP33, shape: [-1]}]\n").find("FP33"),
            std::string::npos);
  EXPECT_NE(error("inputs: [{name: x, datatype: FP32}]\n").find("inputs[0].shape: missing"),
            std::string::npos);
  EXPECT_NE(
      error("inputs: [{name: x, datatype: FP32, shape: [-1, a]}]\n").find("'a' is not an integer"),
      std::string::npos);
  EXPECT_NE(error("inputs: [{name: x, datatype: FP32, shape: [-1], dims: 2}]\n")
                .find("unknown field 'dims'"),
            std::string::npos);
  // A batching model's first dimension is its batch dimension.
  EXPECT_NE(
      error("inputs: [{name: x, datatype: FP32, shape: [1, 16]}]\n").find("must be -1, not 1"),
      std::string::npos);
  EXPECT_NE(error("inputs: [{name: x, datatype: FP32, shape: [-1, -2]}]\n").find("-2"),
            std::string::npos);
  EXPECT_NE(error("inputs: [{name: x, datatype: FP32, shape: []}]\n").find("1 to 16"),
            std::string::npos);
  EXPECT_NE(error("outputs: [{name: y, datatype: FP32, shape: [-1]}, "
                  "{name: y, datatype: INT8, shape: [-1]}]\n")
                .find("'y' appears twice"),
            std::string::npos);
  // A model that does not batch may fix its first dimension.
  auto single = ParseFunctionEntry(
      "name: f\nmodel_size: 1Mi\nexec_latency: 1ms\nruntime: echo\n"
      "inputs: [{name: x, datatype: INT32, shape: [1, 16]}]\n",
      "f.yaml");
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_EQ(single->inputs[0].shape, (std::vector<std::int64_t>{1, 16}));
  // Tensors belong to a function a node runs.
  EXPECT_NE(ParseFunctionEntry("name: f\nmodel_size: 1Mi\nexec_latency: 1ms\n"
                               "inputs: [{name: x, datatype: FP32, shape: [-1]}]\n",
                               "f.yaml")
                .status()
                .message()
                .find("needs a command or a runtime"),
            std::string::npos);
}

}  // namespace
}  // namespace gshare

namespace gshare {
namespace {

// `switch:` names how a node on CUDA GPUs switches the function: shim unless given, written back
// only when it is not; any other value, or one on a simulation-only function, is refused.
TEST(CatalogTest, ASwitchMechanismIsShimUnlessTheSpecSaysCheckpoint) {
  constexpr std::string_view kHead =
      "name: app\nmodel_size: 1Mi\nexec_latency: 5ms\ncommand: [/bin/app]\n";
  auto plain = ParseFunctionEntry(std::string(kHead), "f.yaml");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->switch_mechanism, SwitchMechanism::kShim);
  EXPECT_EQ(FunctionSpecToYaml(*plain).find("switch:"), std::string::npos);

  auto checkpoint = ParseFunctionEntry(std::string(kHead) + "switch: checkpoint\n", "f.yaml");
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  EXPECT_EQ(checkpoint->switch_mechanism, SwitchMechanism::kCheckpoint);
  auto again = ParseFunctionEntry(FunctionSpecToYaml(*checkpoint), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->switch_mechanism, SwitchMechanism::kCheckpoint);

  auto shim = ParseFunctionEntry(std::string(kHead) + "switch: shim\n", "f.yaml");
  ASSERT_TRUE(shim.ok()) << shim.status().ToString();
  EXPECT_EQ(shim->switch_mechanism, SwitchMechanism::kShim);

  auto bad = ParseFunctionEntry(std::string(kHead) + "switch: criu\n", "f.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown switch mechanism 'criu'"), std::string::npos)
      << bad.status().ToString();
  auto simulated =
      ParseFunctionEntry("name: app\nmodel_size: 1Mi\nexec_latency: 5ms\nswitch: shim\n", "f.yaml");
  ASSERT_FALSE(simulated.ok());
  EXPECT_NE(simulated.status().message().find("needs a command or a runtime"), std::string::npos)
      << simulated.status().ToString();
}

TEST(CatalogTest, APytorchFunctionNamesItsOneFileAndItsTensors) {
  constexpr std::string_view kHead =
      "name: net\nmodel_size: 1Mi\nexec_latency: 5ms\nruntime: pytorch\n";
  constexpr std::string_view kTensors =
      "inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]\n"
      "outputs: [{name: y, datatype: FP32, shape: [-1, 4]}]\n";
  auto good = ParseFunctionEntry(
      std::string(kHead) + "threads: 3\nmodel_files: [/m/net.pt]\n" + std::string(kTensors),
      "f.yaml");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->threads, 3);
  const std::string text = FunctionSpecToYaml(*good);
  auto again = ParseFunctionEntry(text, "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
  EXPECT_EQ(again->threads, 3);
  EXPECT_EQ(FunctionSpecToYaml(*again), text);

  const auto error = [&](std::string rest) {
    auto parsed = ParseFunctionEntry(std::string(kHead) + rest, "f.yaml");
    return parsed.ok() ? std::string("ok") : parsed.status().message();
  };
  EXPECT_NE(error(std::string(kTensors)).find("exactly one model file"), std::string::npos);
  EXPECT_NE(
      error("model_files: [/a.pt, /b.pt]\n" + std::string(kTensors)).find("exactly one model file"),
      std::string::npos);
  EXPECT_NE(error("model_files: [/m/net.pt]\n").find("inputs and outputs declared"),
            std::string::npos);
  EXPECT_NE(error("model_files: [/m/net.pt]\nthreads: 0\n" + std::string(kTensors))
                .find("threads: must be between 1 and 64"),
            std::string::npos);
  EXPECT_NE(error("model_files: [/m/net.pt]\nthreads: 65\n" + std::string(kTensors))
                .find("threads: must be between 1 and 64"),
            std::string::npos);
  // The python runtime's first model file is its handler.
  constexpr std::string_view kPythonHead =
      "name: h\nmodel_size: 1Mi\nexec_latency: 5ms\nruntime: python\n";
  EXPECT_TRUE(ParseFunctionEntry(std::string(kPythonHead) +
                                     "model_files: [/m/handler.py, /m/w.npy]\n" +
                                     std::string(kTensors),
                                 "f.yaml")
                  .ok());
  auto not_py = ParseFunctionEntry(
      std::string(kPythonHead) + "model_files: [/m/w.npy, /m/handler.py]\n" + std::string(kTensors),
      "f.yaml");
  ASSERT_FALSE(not_py.ok());
  EXPECT_NE(not_py.status().message().find("its handler, a .py file"), std::string::npos);
  auto strings = ParseFunctionEntry(std::string(kPythonHead) + "model_files: [/m/handler.py]\n" +
                                        "inputs: [{name: x, datatype: BYTES, shape: [-1]}]\n"
                                        "outputs: [{name: y, datatype: FP32, shape: [-1, 4]}]\n",
                                    "f.yaml");
  ASSERT_FALSE(strings.ok());
  EXPECT_NE(strings.status().message().find("the python runtime takes no BYTES"),
            std::string::npos);
  // Without a process, threads means nothing.
  auto simulated =
      ParseFunctionEntry("name: s\nmodel_size: 1Mi\nexec_latency: 5ms\nthreads: 2\n", "f.yaml");
  EXPECT_FALSE(simulated.ok());
}

}  // namespace
}  // namespace gshare
