// gshare replay end to end, in-process, against a fake server made here on net::HttpServer: the
// server's API as docs/serve.md describes it, minimally (tenants, functions, readiness, inference
// that echoes its inputs, /metrics with counters the fake advances as it answers).
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/metrics/registry.h"
#include "gshare/model/catalog.h"
#include "gshare/net/http_server.h"
#include "gshare/protocol/kserve_json.h"
#include "gshare/serve/temp_dir_for_test.h"

namespace gshare::cli {
namespace {

using net::HttpResponse;
using net::ServerRequest;
using nlohmann::json;

constexpr std::string_view kAdminKey = "admin-key-of-the-fake-server";
// What the fake's counters advance by for each request it answers 200.
constexpr double kGpuSecondsPerAnswer = 0.25;
constexpr double kVgpuByteSecondsPerAnswer = 1024.0 * 1024 * 1024;  // 1 GiB-second
constexpr double kSwapBytes = 1 << 20;                              // per first answer

std::vector<std::string> Split(std::string_view path) {
  std::vector<std::string> parts;
  std::size_t start = 1;
  while (start <= path.size()) {
    const std::size_t slash = path.find('/', start);
    const std::size_t end = slash == std::string_view::npos ? path.size() : slash;
    parts.emplace_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

HttpResponse Json(int status, const json& body) { return {status, body.dump()}; }
HttpResponse Error(int status, std::string_view message) {
  return net::JsonErrorResponse(status, message);
}

// The fake server. Every handler runs under one mutex, so the state is consistent at every
// answer; the test reads it after the replay has returned.
class FakeServer {
 public:
  struct Function {
    std::string spec;  // canonical YAML
    std::string state = "READY";
    std::string reason;
    bool asked_ready = false;
    bool lies = false;     // answers something other than its inputs
    bool rejects = false;  // answers 429
    double vgpu_byte_seconds = 0;
    double swaps = 0;
    double swap_bytes = 0;
    std::map<std::string, double> outcomes;
  };

  FakeServer() {
    net::HttpServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.io_threads = 2;
    auto server =
        net::HttpServer::Start(options, [this](ServerRequest request, net::Responder responder) {
          std::lock_guard lock(mutex);
          responder.Respond(Handle(request));
        });
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    if (server.ok()) server_ = std::move(server).value();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }

  std::mutex mutex;
  std::map<std::string, std::string> keys;                            // tenant -> key
  std::map<std::pair<std::string, std::string>, Function> functions;  // (tenant, name)
  std::vector<std::string> calls;  // "METHOD TARGET" of every management call
  double gpu_seconds = 100;        // as if the server had run before the replay
  int keys_issued = 0;
  // Functions created with these names answer 429, or wrong outputs; or stay UNAVAILABLE.
  std::set<std::string> rejecting, lying, unavailable;

 private:
  std::optional<std::string> TenantOf(std::string_view authorization) {
    constexpr std::string_view kBearer = "Bearer ";
    if (authorization.substr(0, kBearer.size()) != kBearer) return std::nullopt;
    const std::string_view key = authorization.substr(kBearer.size());
    for (const auto& [tenant, tenant_key] : keys) {
      if (tenant_key == key) return tenant;
    }
    return std::nullopt;
  }

  std::string NewKey(const std::string& tenant) {
    keys[tenant] = tenant + "-key-" + std::to_string(++keys_issued);
    return keys[tenant];
  }

  json Describe(const std::string& tenant, const std::string& name) const {
    const Function& f = functions.at({tenant, name});
    return {{"tenant", tenant},
            {"name", name},
            {"state", f.state},
            {"reason", f.reason},
            {"spec", f.spec}};
  }

  HttpResponse Create(const std::string& tenant, const std::string& body) {
    auto spec = ParseFunctionEntry(body, "the request", tenant);
    if (!spec.ok()) return Error(400, spec.status().message());
    if (functions.contains({tenant, spec->name})) return Error(409, "exists");
    Function& f = functions[{tenant, spec->name}];
    f.spec = FunctionSpecToYaml(*spec);
    f.rejects = rejecting.contains(spec->name);
    f.lies = lying.contains(spec->name);
    if (unavailable.contains(spec->name)) {
      f.state = "UNAVAILABLE";
      f.reason = "its program exited at start";
    }
    return Json(201, Describe(tenant, spec->name));
  }

  HttpResponse Replace(const std::string& tenant, const std::string& name,
                       const std::string& body) {
    auto found = functions.find({tenant, name});
    if (found == functions.end()) return Error(404, "no such function");
    auto spec = ParseFunctionEntry(body, "the request", tenant);
    if (!spec.ok()) return Error(400, spec.status().message());
    found->second.spec = FunctionSpecToYaml(*spec);
    return Json(200, Describe(tenant, name));
  }

  HttpResponse Get(const std::string& tenant, const std::string& name) {
    if (!functions.contains({tenant, name})) return Error(404, "no such function");
    return Json(200, Describe(tenant, name));
  }

  HttpResponse Handle(const ServerRequest& request) {
    const std::vector<std::string> path = Split(request.target);
    const std::string& method = request.method;
    const bool admin = request.authorization == "Bearer " + std::string(kAdminKey);
    if (path.size() >= 2 && path[0] == "api") {
      calls.push_back(method + " " + request.target);
      if (path.size() >= 3 && path[2] == "tenants") {
        if (!admin) return Error(403, "the admin key is needed");
        if (method == "POST" && path.size() == 3) {
          const json body = json::parse(request.body, nullptr, false);
          const std::string name = body.value("name", "");
          if (keys.contains(name)) return Error(409, "the tenant exists");
          return Json(201, {{"name", name}, {"key", NewKey(name)}});
        }
        const std::string& tenant = path[3];
        if (method == "POST" && path.size() == 5 && path[4] == "keys") {
          if (!keys.contains(tenant)) return Error(404, "no such tenant");
          return Json(200, {{"name", tenant}, {"key", NewKey(tenant)}});
        }
        if (method == "POST" && path.size() == 5) return Create(tenant, request.body);
        if (method == "GET" && path.size() == 6) return Get(tenant, path[5]);
        if (method == "PUT" && path.size() == 6) return Replace(tenant, path[5], request.body);
        return Error(404, "no such endpoint");
      }
      const auto tenant = TenantOf(request.authorization);
      if (!tenant) return Error(401, "no such key");
      if (method == "POST" && path.size() == 3) return Create(*tenant, request.body);
      if (method == "GET" && path.size() == 4) return Get(*tenant, path[3]);
      if (method == "PUT" && path.size() == 4) return Replace(*tenant, path[3], request.body);
      return Error(404, "no such endpoint");
    }
    if (request.target == "/metrics") {
      if (!admin) return Error(403, "the admin key is needed");
      return {200, Metrics(), std::string(metrics::Registry::kContentType)};
    }
    if (path.size() == 4 && path[0] == "v2" && path[1] == "models") {
      const auto tenant = TenantOf(request.authorization);
      if (!tenant) return Error(401, "no such key");
      auto found = functions.find({*tenant, path[2]});
      if (found == functions.end()) return Error(404, "no such model");
      Function& f = found->second;
      if (method == "GET" && path[3] == "ready") {
        // Loading at first: the replay waits.
        const bool ready = f.asked_ready && f.state == "READY";
        f.asked_ready = true;
        return ready ? Json(200, {{"name", path[2]}, {"ready", true}}) : Error(503, "loading");
      }
      if (method == "POST" && path[3] == "infer") return Infer(path[2], f, request.body);
    }
    return Error(404, "no such endpoint");
  }

  HttpResponse Infer(const std::string& name, Function& f, const std::string& body) {
    auto request = ParseInferRequest(body);
    if (!request.ok()) return Error(400, request.status().message());
    if (f.rejects) {
      f.outcomes["rejected"] += 1;
      return Error(429, "over quota");
    }
    InferResponse response;
    response.model_name = name;
    response.model_version = "1";
    response.id = request->id;
    response.outputs = request->inputs;
    if (f.lies) {
      auto values = response.outputs.front().Values<float>();
      std::vector<float> changed(values->begin(), values->end());
      changed.front() += 1;
      response.outputs.front() =
          Tensor::FromValues<float>("output", response.outputs.front().shape(), changed).value();
    }
    auto text = SerializeInferResponse(response);
    if (!text.ok()) return Error(500, text.status().message());
    f.outcomes["ok"] += 1;
    gpu_seconds += kGpuSecondsPerAnswer;
    f.vgpu_byte_seconds += kVgpuByteSecondsPerAnswer;
    if (f.swaps == 0) {
      f.swaps = 1;
      f.swap_bytes = kSwapBytes;
    }
    return {200, *text};
  }

  std::string Metrics() const {
    using metrics::EscapeLabelValue;
    using metrics::FormatValue;
    std::string out =
        "# HELP gshare_gpu_seconds_total GPUs held, integrated over time (GPU-seconds).\n"
        "# TYPE gshare_gpu_seconds_total counter\n"
        "gshare_gpu_seconds_total " +
        FormatValue(gpu_seconds) + "\n";
    // A series no replayed function has: counted by nobody.
    out += "# TYPE gshare_swaps_total counter\n";
    out += "gshare_swaps_total{function=\"un\\\"related\\\\\",tenant=\"elsewhere\"} 99\n";
    for (const auto& [key, f] : functions) {
      const std::string labels = "function=\"" + EscapeLabelValue(key.second) + "\",tenant=\"" +
                                 EscapeLabelValue(key.first) + "\"";
      out += "gshare_swaps_total{" + labels + "} " + FormatValue(f.swaps) + "\n";
      out += "gshare_swap_bytes_total{" + labels + "} " + FormatValue(f.swap_bytes) + "\n";
      out += "gshare_vgpu_byte_seconds_total{" + labels + "} " + FormatValue(f.vgpu_byte_seconds) +
             "\n";
      for (const auto& [outcome, count] : f.outcomes) {
        out += "gshare_requests_total{" + labels + ",outcome=\"" + outcome + "\"} " +
               FormatValue(count) + "\n";
      }
    }
    return out;
  }

  std::unique_ptr<net::HttpServer> server_;
};

constexpr std::string_view kFunctionTail = R"(    model_size: 1Mi
    gpu_memory: 8Mi
    exec_latency: 1ms
    slo: 5s
    max_batch: 8
    runtime: echo
)";

std::string Entry(std::string_view name, std::string_view tenant) {
  return "  - name: " + std::string(name) + "\n    tenant: " + std::string(tenant) + "\n" +
         std::string(kFunctionTail);
}

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
}

json ReadJson(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return json::parse(text.str(), nullptr, false);
}

// `gshare ARGS...` as main runs it, with the replay command alone.
int RunGshare(const std::vector<std::string>& args) {
  CLI::App app{"gshare"};
  app.require_subcommand(1);
  CommandContext context;
  AddReplayCommand(app, context);
  std::vector<const char*> argv = {"gshare"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return context.exit_code;
}

class ReplayCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    admin_key_file_ = (dir_.path() / "admin.key").string();
    WriteFile(admin_key_file_, std::string(kAdminKey) + "\n");
    out_ = (dir_.path() / "out").string();
  }

  // Writes the catalog and the trace: `rows` of (function, seconds).
  void WriteInputs(const std::string& catalog,
                   const std::vector<std::pair<std::string, double>>& rows) {
    catalog_ = (dir_.path() / "catalog.yaml").string();
    WriteFile(catalog_, "functions:\n" + catalog);
    trace_ = (dir_.path() / "trace.csv").string();
    std::string text = "function,timestamp\n";
    for (const auto& [function, seconds] : rows) {
      text += function + "," + std::to_string(seconds) + "\n";
    }
    WriteFile(trace_, text);
  }

  std::vector<std::string> Args(std::vector<std::string> extra) const {
    std::vector<std::string> args = {"replay", "--url",   server_.url(), "--catalog",
                                     catalog_, "--trace", trace_,        "--speedup",
                                     "100",    "--out",   out_};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  serve::TempDirForTest dir_;
  FakeServer server_;
  std::string admin_key_file_;
  std::string out_;
  std::string catalog_;
  std::string trace_;
};

TEST_F(ReplayCommandTest, DeploysReplaysAndReportsWithTheAdminKey) {
  WriteInputs(Entry("echo", "demo") + Entry("busy", "demo") + Entry("other", "acme"),
              {{"echo", 0},
               {"busy", 0.01},
               {"other", 0.02},
               {"echo", 0.03},
               {"echo", 0.03},
               {"echo", 0.03},
               {"busy", 0.05},
               {"other", 0.06},
               {"echo", 0.07},
               {"echo", 0.08}});
  {
    std::lock_guard lock(server_.mutex);
    // demo exists (its key is rotated), with echo deployed under another spec (replaced) and busy
    // missing (created), which rejects every request; acme does not exist.
    server_.keys["demo"] = "old-demo-key";
    std::string old_spec = Entry("echo", "demo");
    old_spec.replace(old_spec.find("slo: 5s"), 7, "slo: 1s");
    auto parsed = ParseCatalog("functions:\n" + old_spec, "old");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    server_.functions[{"demo", "echo"}].spec = FunctionSpecToYaml(parsed->functions.front());
    server_.rejecting = {"busy"};
  }
  testing::internal::CaptureStderr();
  const int code = RunGshare(Args({"--admin-key-file", admin_key_file_, "--concurrency", "4"}));
  const std::string stderr_text = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 0) << stderr_text;
  EXPECT_NE(stderr_text.find("tenant 'demo' exists"), std::string::npos) << stderr_text;
  EXPECT_NE(stderr_text.find("needs the server to itself"), std::string::npos);

  const json summary = ReadJson(std::filesystem::path(out_) / "summary.json");
  ASSERT_TRUE(summary.is_object());
  EXPECT_EQ(summary["answered"], 10);
  EXPECT_EQ(summary["unanswered"], 0);
  EXPECT_EQ(summary["wrong_outputs"], 0);
  EXPECT_EQ(summary["trace"]["requests"], 10);
  const json& live = summary["policies"]["live"];
  EXPECT_EQ(live["requests"], 10);
  // 8 answered 200 (echo 6, other 2), busy's 2 rejected; the fake's counters advanced by the 8.
  EXPECT_EQ(summary["statuses"], json({{"200", 8}, {"429", 2}}));
  EXPECT_EQ(summary["failed"], 2);
  EXPECT_EQ(live["failed_requests"], 2);
  EXPECT_EQ(live["gpu_seconds"].get<double>(), 8 * kGpuSecondsPerAnswer);
  EXPECT_EQ(live["vgpu_gib_seconds"].get<double>(), 8.0);
  EXPECT_EQ(live["swaps"], 2);
  EXPECT_EQ(live["swap_bytes"], 2 * kSwapBytes);
  EXPECT_EQ(summary["server"]["requests_by_outcome"]["ok"].dump(), "8");  // counts as integers
  EXPECT_TRUE(live["peak_gpus"].is_null());
  EXPECT_TRUE(live["cost_usd"].is_null());
  EXPECT_GE(live["slo_attainment"].get<double>(), 0.0);
  EXPECT_LE(live["slo_attainment"].get<double>(), 1.0);
  EXPECT_EQ(summary["functions"]["echo"]["requests"], 6);
  EXPECT_EQ(summary["functions"]["echo"]["swaps"], 1);
  EXPECT_EQ(summary["functions"]["busy"]["statuses"], json({{"429", 2}}));
  EXPECT_EQ(summary["functions"]["other"]["tenant"], "acme");
  EXPECT_EQ(summary["server"]["requests_by_outcome"]["ok"], 8);
  EXPECT_EQ(summary["server"]["requests_by_outcome"]["rejected"], 2);

  std::lock_guard lock(server_.mutex);

  // The set-up: demo re-keyed, acme created; echo replaced, busy and other created.
  EXPECT_NE(server_.keys["demo"], "old-demo-key");
  EXPECT_TRUE(server_.keys.contains("acme"));
  auto catalog = LoadCatalog(catalog_);
  ASSERT_TRUE(catalog.ok());
  for (const FunctionSpec& spec : catalog->functions) {
    const auto key = std::make_pair(spec.tenant, spec.name);
    EXPECT_EQ(server_.functions[key].spec, FunctionSpecToYaml(spec)) << spec.name;
  }
  const std::vector<std::string>& calls = server_.calls;
  auto called = [&](const std::string& call) {
    return std::find(calls.begin(), calls.end(), call) != calls.end();
  };
  EXPECT_TRUE(called("POST /api/v1/tenants/demo/keys"));
  EXPECT_TRUE(called("PUT /api/v1/tenants/demo/functions/echo"));
  EXPECT_TRUE(called("POST /api/v1/tenants/demo/functions"));
  EXPECT_TRUE(called("POST /api/v1/tenants/acme/functions"));
  EXPECT_FALSE(called("PUT /api/v1/tenants/acme/functions/other"));
}

TEST_F(ReplayCommandTest, WrongAnswersFailTheReplay) {
  WriteInputs(Entry("liar", "demo"), {{"liar", 0}, {"liar", 0.01}, {"liar", 0.02}});
  {
    std::lock_guard lock(server_.mutex);
    server_.lying = {"liar"};
  }
  testing::internal::CaptureStderr();
  const int code = RunGshare(Args({"--admin-key-file", admin_key_file_}));
  const std::string stderr_text = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1) << stderr_text;
  EXPECT_NE(stderr_text.find("wrong answer to request"), std::string::npos) << stderr_text;
  const json summary = ReadJson(std::filesystem::path(out_) / "summary.json");
  ASSERT_TRUE(summary.is_object());
  EXPECT_EQ(summary["answered"], 3);
  EXPECT_EQ(summary["wrong_outputs"], 3);
  EXPECT_EQ(summary["statuses"], json({{"200", 3}}));
  // A wrong answer is no answer OK: it misses its SLO and counts as failed.
  EXPECT_EQ(summary["policies"]["live"]["slo_attainment"], 0.0);
  EXPECT_EQ(summary["policies"]["live"]["failed_requests"], 3);
}

// --references: a function with reference files is sent their request and its answer is held to
// their outputs within the tolerance; one that answers otherwise is wrong; one without files is
// checked as before (a bundled runtime's reference).
TEST_F(ReplayCommandTest, ReferenceFilesAreSentAndHeldToTheirAnswers) {
  WriteInputs(Entry("model", "demo") + Entry("liar", "demo") + Entry("plain", "demo"),
              {{"model", 0}, {"model", 0.01}, {"liar", 0.02}, {"plain", 0.03}});
  {
    std::lock_guard lock(server_.mutex);
    server_.lying = {"liar"};
  }
  const auto references = dir_.path() / "references";
  std::filesystem::create_directories(references);
  for (const char* name : {"model", "liar"}) {
    WriteFile((references / (std::string(name) + ".request.json")).string(),
              R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3],
                  "data": [100.0, -2.0, 0.5]}]})");
    // The fake echoes: the reference is the input, off by less than 1e-4 of 100 in one place.
    WriteFile((references / (std::string(name) + ".response.json")).string(),
              R"({"model_name": "m", "outputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3],
                  "data": [100.0, -2.0, 0.5099]}]})");
  }
  testing::internal::CaptureStderr();
  const int code = RunGshare(Args({"--admin-key-file", admin_key_file_, "--references",
                                   references.string(), "--tolerance", "1e-4"}));
  const std::string stderr_text = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1) << stderr_text;  // the liar
  EXPECT_NE(stderr_text.find("2 of 3 functions are checked against the answers"), std::string::npos)
      << stderr_text;
  EXPECT_NE(stderr_text.find("no output 'x'"), std::string::npos) << stderr_text;
  const json summary = ReadJson(std::filesystem::path(out_) / "summary.json");
  ASSERT_TRUE(summary.is_object());
  EXPECT_EQ(summary["answered"], 4);
  EXPECT_EQ(summary["wrong_outputs"], 1);
  EXPECT_EQ(summary["unchecked"], 0);
  EXPECT_EQ(summary["functions"]["model"]["wrong_outputs"], 0) << summary["functions"].dump();
  EXPECT_EQ(summary["functions"]["plain"]["wrong_outputs"], 0) << summary["functions"].dump();

  // A tighter tolerance makes the model's answers wrong too (0.0099 of 100 is 9.9e-5).
  testing::internal::CaptureStderr();
  const int tight = RunGshare(Args({"--admin-key-file", admin_key_file_, "--references",
                                    references.string(), "--tolerance", "1e-5"}));
  const std::string tight_text = testing::internal::GetCapturedStderr();
  EXPECT_EQ(tight, 1);
  EXPECT_NE(tight_text.find("element 2 is 0.5, the reference 0.5099"), std::string::npos)
      << tight_text;
  EXPECT_NE(tight_text.find("a difference of 9.9e-05 of the reference's largest magnitude (at "
                            "most 1e-05)"),
            std::string::npos)
      << tight_text;
  EXPECT_EQ(ReadJson(std::filesystem::path(out_) / "summary.json")["wrong_outputs"], 3);

  // A request file without its answer is refused before anything is sent.
  std::filesystem::remove(references / "model.response.json");
  testing::internal::CaptureStderr();
  EXPECT_NE(
      RunGshare(Args({"--admin-key-file", admin_key_file_, "--references", references.string()})),
      0);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("model.request.json without"),
            std::string::npos);
}

TEST_F(ReplayCommandTest, ATenantsKeyDeploysItsFunctionsWithoutGpuUsage) {
  // --duration 50ms: the first three rows.
  WriteInputs(Entry("echo", "demo"),
              {{"echo", 0}, {"echo", 0.02}, {"echo", 0.04}, {"echo", 0.06}, {"echo", 0.08}});
  {
    std::lock_guard lock(server_.mutex);
    server_.keys["demo"] = "demo-key";
  }
  testing::internal::CaptureStderr();
  const int code =
      RunGshare(Args({"--key", "demo-key", "--duration", "50ms", "--concurrency", "1"}));
  const std::string stderr_text = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 0) << stderr_text;
  EXPECT_NE(stderr_text.find("GPU usage is not available"), std::string::npos) << stderr_text;
  const json summary = ReadJson(std::filesystem::path(out_) / "summary.json");
  ASSERT_TRUE(summary.is_object());
  EXPECT_EQ(summary["policies"]["live"]["requests"], 3);
  EXPECT_EQ(summary["statuses"], json({{"200", 3}}));
  EXPECT_LE(summary["late_sends"].get<int>(), 3);
  for (const char* field : {"gpu_seconds", "avg_gpus", "vgpu_gib_seconds", "swaps", "swap_bytes"}) {
    EXPECT_TRUE(summary["policies"]["live"][field].is_null()) << field;
  }
  EXPECT_NE(summary["server"]["gpu_usage"].get<std::string>().find("admin key"), std::string::npos);
  std::lock_guard lock(server_.mutex);
  EXPECT_EQ(server_.keys["demo"], "demo-key");  // not rotated
  const std::vector<std::string> expected = {"GET /api/v1/functions/echo",
                                             "POST /api/v1/functions"};
  EXPECT_EQ(server_.calls, expected);
}

TEST_F(ReplayCommandTest, ATenantsKeyRefusesOtherTenantsFunctions) {
  WriteInputs(Entry("echo", "demo") + Entry("other", "acme"), {{"echo", 0}, {"other", 0.01}});
  testing::internal::CaptureStderr();
  const int code = RunGshare(Args({"--key", "demo-key"}));
  const std::string stderr_text = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 2);
  EXPECT_NE(stderr_text.find("'other' (tenant 'acme')"), std::string::npos) << stderr_text;
  std::lock_guard lock(server_.mutex);
  EXPECT_TRUE(server_.calls.empty());
}

TEST_F(ReplayCommandTest, AFunctionThatCannotBeServedEndsTheWait) {
  WriteInputs(Entry("echo", "demo"), {{"echo", 0}});
  {
    std::lock_guard lock(server_.mutex);
    server_.unavailable = {"echo"};
  }
  testing::internal::CaptureStderr();
  const int code = RunGshare(Args({"--admin-key-file", admin_key_file_}));
  const std::string stderr_text = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_NE(stderr_text.find("its program exited at start"), std::string::npos) << stderr_text;
}

TEST_F(ReplayCommandTest, RefusesBadFlags) {
  WriteInputs(Entry("echo", "demo"), {{"echo", 0}});
  const std::vector<std::vector<std::string>> bad = {
      {"--admin-key-file", admin_key_file_, "--speedup", "0"},
      {"--admin-key-file", admin_key_file_, "--speedup", "nan"},
      {"--admin-key-file", admin_key_file_, "--speedup", "inf"},
      {"--admin-key-file", admin_key_file_, "--speedup", "-1"},
      {"--admin-key-file", admin_key_file_, "--concurrency", "0"},
      {"--admin-key-file", admin_key_file_, "--concurrency", "4097"},
      {"--admin-key-file", admin_key_file_, "--duration", "0s"},
      {"--admin-key-file", admin_key_file_, "--ready-timeout", "2h"},
      {"--admin-key-file", admin_key_file_, "--key", "k"},
      {},
      {"--admin-key-file", (dir_.path() / "missing.key").string()},
      {"--admin-key-file", admin_key_file_, "--url", "https://127.0.0.1:1"},
      {"--admin-key-file", admin_key_file_, "--trace-format", "nope"},
  };
  for (const std::vector<std::string>& extra : bad) {
    testing::internal::CaptureStderr();
    std::vector<std::string> args = Args(extra);
    // A later --url replaces the first.
    const int code = RunGshare(args);
    const std::string stderr_text = testing::internal::GetCapturedStderr();
    EXPECT_EQ(code, 2) << testing::PrintToString(extra) << "\n" << stderr_text;
  }
  std::lock_guard lock(server_.mutex);
  EXPECT_TRUE(server_.calls.empty());
}

}  // namespace
}  // namespace gshare::cli
