// `gshare serve` end to end, in this process: the Server on a free port of 127.0.0.1 over emulated
// GPUs, with real function processes (the bundled echo and mlp runtimes, gshare-function) that the
// server starts and stops itself. Requests go over TCP through the front, the scheduler, the live
// executor and the function protocol.
#include "gshare/serve/server.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gshare/common/proc_memory.h"
#include "gshare/serve/http_client_for_test.h"
#include "gshare/serve/temp_dir_for_test.h"

namespace gshare::serve {
namespace {

constexpr std::string_view kAdminKey = "test-admin-key-0123456789";

constexpr std::string_view kEchoSpec = R"(name: echo
model_size: 1Mi
gpu_memory: 8Mi
exec_latency: 1ms
slo: 1s
max_batch: 8
runtime: echo
timeout: 10s
)";

ServerOptions Options(const std::filesystem::path& dir) {
  ServerOptions options;
  options.data_dir = dir / "data";
  options.admin_key = std::string(kAdminKey);
  options.http.port = 0;
  options.http.io_threads = 2;
  LiveNodeOptions& node = options.backend.node;
  node.calibrate_copies = false;
  node.devices.backend = DeviceBackend::kEmulated;
  node.devices.emulated = {
      EmulatedGpuConfig{.name = "", .memory_bytes = kGiB, .link_bytes_per_second = 12e9}};
  node.snapshot_pool_bytes = 256 * kMiB;
  node.staging_bytes = 4 * kGiB;
  node.prepared_bytes_per_gpu = 64 * kMiB;
  options.backend.function_program = GSHARE_FUNCTION_PROGRAM;
  options.drain = std::chrono::seconds(5);
  options.http.limits.read_timeout = std::chrono::seconds(1);  // the slow client's test
  options.uid_ledger = dir / "uid-ranges";                     // not the host's
  return options;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

nlohmann::json Json(const std::optional<HttpClientResponse>& response) {
  if (!response) return nullptr;
  return nlohmann::json::parse(response->body(), nullptr, false);
}

std::string EchoRequest(std::string_view id) {
  return nlohmann::json{
      {"id", id},
      {"inputs",
       {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 3}}, {"data", {1.5, -2, 3}}}}}}
      .dump();
}

class ServerTest : public ::testing::Test {
 protected:
  void Start() {
    // The tenants' uids (where the test runs as root) enter the data directory.
    ::chmod(dir_.path().c_str(), 0711);
    ServerOptions options = Options(dir_.path());
    options.backend.tenant_max_in_flight = quota_;
    if (customize_) customize_(options);
    auto server = Server::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    client_ = std::make_unique<HttpClientForTest>(server_->port());
  }
  void Stop() {
    client_.reset();
    server_.reset();  // drains, stops the functions' processes
  }
  // A new tenant's key.
  std::string AddTenant(std::string_view name) {
    auto response =
        client_->Send("POST", "/api/v1/tenants", kAdminKey, nlohmann::json{{"name", name}}.dump());
    EXPECT_TRUE(response && response->result_int() == 201) << (response ? response->body() : "");
    return Json(response).value("key", "");
  }
  void Deploy(std::string_view key, std::string_view spec, std::string_view name) {
    auto response = client_->Send("POST", "/api/v1/functions", key, spec);
    ASSERT_TRUE(response);
    ASSERT_EQ(response->result_int(), 201) << response->body();
    Settle(std::string(Json(response).value("tenant", "")), name);
  }
  void Settle(const std::string& tenant, std::string_view name) {
    auto settled = server_->backend().WaitUntilSettled(tenant, name, std::chrono::seconds(60));
    ASSERT_TRUE(settled.ok()) << settled.status().ToString();
    ASSERT_EQ(settled->state, ModelState::kReady)
        << settled->reason << "\nits log:\n"
        << ReadFile(dir_.path() / "data" / "run" / "logs" / tenant / (std::string(name) + ".log"));
  }

  std::size_t quota_ = 0;                          // a tenant's in-flight quota for the next Start
  std::function<void(ServerOptions&)> customize_;  // changes the next Start's options
  TempDirForTest dir_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpClientForTest> client_;
};

// A tenant deploys the echo runtime and calls it: the answer is its input, under the request's
// id; another tenant cannot see it; the metrics count the request; everything survives a restart.
TEST_F(ServerTest, ATenantDeploysCallsAndKeepsItsFunctionAcrossARestart) {
  Start();
  const std::string acme = AddTenant("acme");
  const std::string other = AddTenant("other");
  Deploy(acme, kEchoSpec, "echo");

  auto answer = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("r-1"));
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->result_int(), 200) << answer->body();
  const nlohmann::json body = Json(answer);
  EXPECT_EQ(body["id"], "r-1");
  EXPECT_EQ(body["model_name"], "echo");
  ASSERT_EQ(body["outputs"].size(), 1u);
  EXPECT_EQ(body["outputs"][0]["datatype"], "FP32");
  EXPECT_EQ(body["outputs"][0]["shape"], nlohmann::json({1, 3}));
  EXPECT_EQ(body["outputs"][0]["data"], nlohmann::json({1.5, -2.0, 3.0}));

  // The other tenant gets exactly what a name nobody has gets.
  auto hidden = client_->Send("POST", "/v2/models/echo/infer", other, EchoRequest("r-2"));
  auto unknown = client_->Send("POST", "/v2/models/nothing/infer", other, EchoRequest("r-2"));
  ASSERT_TRUE(hidden && unknown);
  EXPECT_EQ(hidden->result_int(), 404);
  EXPECT_EQ(unknown->result_int(), 404);
  EXPECT_EQ(nlohmann::json::parse(hidden->body())["error"].get<std::string>().find("echo"),
            nlohmann::json::parse(unknown->body())["error"].get<std::string>().find("nothing"));

  // Metrics: the admin's only.
  auto metrics = client_->Send("GET", "/metrics", kAdminKey);
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->result_int(), 200);
  EXPECT_NE(metrics->body().find(
                R"(gshare_requests_total{function="echo",tenant="acme",outcome="ok"} 1)"),
            std::string::npos)
      << metrics->body();
  EXPECT_NE(metrics->body().find(R"(gshare_swaps_total{function="echo",tenant="acme"} 1)"),
            std::string::npos);
  // Prometheus's own parser and linter on the server's exposition (promtool: Debian's
  // prometheus package, which scripts/setup.sh installs; required where CI=true).
  if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    const std::filesystem::path exposition = dir_.path() / "metrics.txt";
    std::ofstream(exposition) << metrics->body();
    const std::string command = "promtool check metrics < '" + exposition.string() + "' > '" +
                                exposition.string() + ".out' 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << ReadFile(exposition.string() + ".out");
  } else {
    const char* ci = std::getenv("CI");
    EXPECT_FALSE(ci != nullptr && std::string(ci) == "true")
        << "promtool is not installed, and CI=true requires the check";
  }
  auto refused = client_->Send("GET", "/metrics", acme);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result_int(), 403);
  auto node = client_->Send("GET", "/api/v1/node", kAdminKey);
  ASSERT_TRUE(node);
  EXPECT_EQ(Json(node)["gpus"], 1);
  EXPECT_EQ(Json(node)["policy"], "gshare");

  Stop();
  Start();
  EXPECT_EQ(server_->deployed_at_start(), 1u);
  Settle("acme", "echo");
  auto again = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("r-3"));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->result_int(), 200) << again->body();
  EXPECT_EQ(Json(again)["id"], "r-3");
}

// An update serves the new spec; a delete makes the name unknown; an unloaded model is not ready
// (503) until it is loaded again.
TEST_F(ServerTest, UpdateUnloadLoadAndDelete) {
  Start();
  const std::string acme = AddTenant("acme");
  Deploy(acme, kEchoSpec, "echo");

  std::string updated(kEchoSpec);
  updated.replace(updated.find("slo: 1s"), 7, "slo: 2s");
  auto put = client_->Send("PUT", "/api/v1/functions/echo", acme, updated);
  ASSERT_TRUE(put);
  ASSERT_EQ(put->result_int(), 200) << put->body();
  Settle("acme", "echo");
  auto model = server_->backend().FindModel("acme", "echo");
  ASSERT_TRUE(model);
  EXPECT_EQ(model->slo, std::chrono::seconds(2));
  auto answer = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("u"));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 200) << answer->body();

  // An update whose new version cannot start changes nothing: the old spec keeps serving and the
  // registry keeps it (a file that is no safetensors file makes the mlp runtime fail at start).
  std::filesystem::create_directories(dir_.path() / "data" / "models" / "acme");
  std::ofstream(dir_.path() / "data" / "models" / "acme" / "broken.safetensors") << "not weights";
  const std::string broken = std::string(kEchoSpec).replace(
                                 std::string(kEchoSpec).find("runtime: echo"), 13, "runtime: mlp") +
                             "model_files: [broken.safetensors]\n";
  auto failed = client_->Send("PUT", "/api/v1/functions/echo", acme, broken);
  ASSERT_TRUE(failed);
  EXPECT_GE(failed->result_int(), 500) << failed->body();
  auto kept = client_->Send("GET", "/api/v1/functions/echo", acme);
  ASSERT_TRUE(kept);
  EXPECT_NE(Json(kept)["spec"].get<std::string>().find("runtime: echo"), std::string::npos)
      << kept->body();
  auto still = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("still"));
  ASSERT_TRUE(still);
  EXPECT_EQ(still->result_int(), 200) << still->body();
  EXPECT_EQ(Json(still)["outputs"][0]["data"], nlohmann::json({1.5, -2.0, 3.0}));

  auto unload = client_->Send("POST", "/v2/repository/models/echo/unload", acme, "{}");
  ASSERT_TRUE(unload);
  EXPECT_EQ(unload->result_int(), 200) << unload->body();
  auto not_ready = client_->Send("GET", "/v2/models/echo/ready", acme);
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->result_int(), 503);
  auto load = client_->Send("POST", "/v2/repository/models/echo/load", acme, "{}");
  ASSERT_TRUE(load);
  EXPECT_EQ(load->result_int(), 200) << load->body();
  Settle("acme", "echo");
  auto ready = client_->Send("GET", "/v2/models/echo/ready", acme);
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->result_int(), 200);

  auto removed = client_->Send("DELETE", "/api/v1/functions/echo", acme);
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->result_int(), 204);
  auto gone = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("g"));
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->result_int(), 404);
  // Every version (the create, the update, the failed update, the load) has left the node, and
  // the node keeps nothing of them: no record, command or per-function state.
  ASSERT_TRUE(server_->backend().WaitUntilDrained(std::chrono::milliseconds(60'000)).ok());
  const LiveBackend::Tables tables = server_->backend().tables();
  EXPECT_EQ(tables.entries + tables.versions + tables.pending + tables.feed, 0u);
  EXPECT_EQ(tables.node.registry, 0u);
  EXPECT_EQ(tables.node.scheduler, 0u);
  EXPECT_EQ(tables.node.executor, 0u);
  EXPECT_EQ(tables.node.host, 0u);
}

// A request that cannot start within its SLO is answered 504 and never runs; the metrics say so.
TEST_F(ServerTest, ARequestThatCannotStartBeforeItsDeadlineIs504) {
  Start();
  const std::string acme = AddTenant("acme");
  std::string spec(kEchoSpec);
  spec.replace(spec.find("slo: 1s"), 7, "slo: 1us");  // no restore is that fast
  Deploy(acme, spec, "echo");
  auto late = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("late"));
  ASSERT_TRUE(late);
  EXPECT_EQ(late->result_int(), 504) << late->body();
  auto metrics = client_->Send("GET", "/metrics", kAdminKey);
  ASSERT_TRUE(metrics);
  EXPECT_NE(
      metrics->body().find(
          R"(gshare_requests_total{function="echo",tenant="acme",outcome="deadline_exceeded"} 1)"),
      std::string::npos)
      << metrics->body();
}

// A function process killed while requests are in flight on it: every request gets exactly one
// answer (200, or an error), none is lost, and the function serves again afterwards.
TEST_F(ServerTest, AFunctionKilledMidRequestLosesNoRequest) {
  Start();
  const std::string acme = AddTenant("acme");
  Deploy(acme, kEchoSpec, "echo");
  constexpr int kClients = 8;
  constexpr int kPerClient = 40;
  std::vector<std::vector<int>> statuses(kClients);
  std::mutex errors_mutex;
  std::vector<std::string> errors;  // the answers that were not 200
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < kPerClient; ++i) {
        HttpClientForTest client(server_->port());
        auto answer = client.Send("POST", "/v2/models/echo/infer", acme,
                                  EchoRequest(fmt::format("{}-{}", c, i)));
        statuses[c].push_back(answer ? answer->result_int() : 0);
        if (answer && answer->result_int() != 200) {
          std::lock_guard lock(errors_mutex);
          errors.push_back(answer->body());
        }
        ++answered;
      }
    });
  }
  // Once some requests are answered (others are in flight), the instance is killed.
  while (answered.load() < kClients * kPerClient / 4) std::this_thread::yield();
  const std::vector<pid_t> pids = server_->backend().FunctionPids();
  ASSERT_FALSE(pids.empty());
  for (const pid_t pid : pids) ::kill(pid, SIGKILL);
  for (std::thread& client : clients) client.join();
  int ok = 0;
  for (const auto& client : statuses) {
    ASSERT_EQ(client.size(), static_cast<std::size_t>(kPerClient));
    for (const int status : client) {
      EXPECT_NE(status, 0) << "a request got no answer";
      if (status == 200) ++ok;
    }
  }
  EXPECT_GT(ok, 0);
  std::printf("%zu answers were not 200%s%s\n", errors.size(),
              errors.empty() ? "" : ", the first: ", errors.empty() ? "" : errors.front().c_str());
  // The tenant reads why without the node's instance ids, pids or paths.
  for (const std::string& error : errors) {
    EXPECT_EQ(error.find("(pid "), std::string::npos) << error;
    EXPECT_FALSE(std::regex_search(error, std::regex(R"(instance [0-9]|instance-[0-9])"))) << error;
    EXPECT_EQ(error.find(dir_.path().string()), std::string::npos) << error;
  }
  auto after = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("after"));
  ASSERT_TRUE(after);
  EXPECT_EQ(after->result_int(), 200) << after->body();
}

// The processes on this host whose command line holds `token`.
std::vector<pid_t> ProcessesWithToken(const std::string& token) {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(entry.path() / "cmdline");
    const std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    if (cmdline.find(token) != std::string::npos) pids.push_back(std::stoi(name));
  }
  return pids;
}
bool ProcessWithTokenRuns(const std::string& token) { return !ProcessesWithToken(token).empty(); }

// An admin's command function whose shell leaves a process outside its group (setsid) before it
// becomes the echo runtime: once the function is deleted and its process gone, so is that one,
// since it was in the instance's PID namespace.
TEST_F(ServerTest, NothingAFunctionStartedOutlivesItsDelete) {
  {
    const pid_t probe = ::fork();  // may this process make PID namespaces? (root with
    if (probe == 0) _exit(::unshare(CLONE_NEWPID) == 0 ? 0 : 1);  // CAP_SYS_ADMIN)
    int status = 0;
    if (probe < 0 || ::waitpid(probe, &status, 0) != probe || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      GTEST_SKIP() << "PID namespaces are refused here";
    }
  }
  Start();
  AddTenant("acme");
  const std::string token = fmt::format("86400.{}", ::getpid());
  const std::string spec = fmt::format(
      "name: echo\nmodel_size: 1Mi\ngpu_memory: 8Mi\nexec_latency: 1ms\nslo: 1s\ntimeout: 10s\n"
      "command: [/bin/sh, -c, 'setsid sleep {} </dev/null >/dev/null 2>&1 & exec {} --model "
      "echo']\n",
      token, GSHARE_FUNCTION_PROGRAM);
  auto created = client_->Send("POST", "/api/v1/tenants/acme/functions", kAdminKey, spec);
  ASSERT_TRUE(created);
  ASSERT_EQ(created->result_int(), 201) << created->body();
  Settle("acme", "echo");
  // The shell forked it before it became the runtime; it may still be starting.
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!ProcessWithTokenRuns(token) && std::chrono::steady_clock::now() < guard) {
    std::this_thread::yield();
  }
  ASSERT_TRUE(ProcessWithTokenRuns(token));
  auto deleted = client_->Send("DELETE", "/api/v1/tenants/acme/functions/echo", kAdminKey);
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->result_int(), 204) << deleted->body();
  ASSERT_TRUE(server_->backend().WaitUntilDrained(std::chrono::seconds(60)).ok());
  while (!server_->backend().FunctionPids().empty() && std::chrono::steady_clock::now() < guard) {
    std::this_thread::yield();
  }
  ASSERT_TRUE(server_->backend().FunctionPids().empty());
  const std::vector<pid_t> survivors = ProcessesWithToken(token);
  EXPECT_TRUE(survivors.empty());
  for (const pid_t pid : survivors) ::kill(pid, SIGKILL);  // this test's own leftover
}

// A tenant with its quota of unanswered requests gets 429 for one more, and is served again once
// one is answered. The function's process is stopped (SIGSTOP) so that a request stays in flight
// (queued, restoring or running: the backend counts it from its arrival); the function has one
// instance at most, so no other process can take the held request.
TEST_F(ServerTest, ATenantOverItsInFlightQuotaGets429) {
  quota_ = 1;
  Start();
  const std::string acme = AddTenant("acme");
  Deploy(acme, std::string(kEchoSpec) + "max_instances: 1\n", "echo");
  auto warm = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("warm"));
  ASSERT_TRUE(warm);
  ASSERT_EQ(warm->result_int(), 200) << warm->body();
  const std::vector<pid_t> pids = server_->backend().FunctionPids();
  ASSERT_FALSE(pids.empty());
  for (const pid_t pid : pids) ::kill(pid, SIGSTOP);
  std::optional<HttpClientResponse> held;
  std::thread first([&] {
    HttpClientForTest client(server_->port());
    held = client.Send("POST", "/v2/models/echo/infer", acme, EchoRequest("held"));
  });
  // Wait until the backend has taken the held request (it cannot be answered: the process is
  // stopped).
  bool reached = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!reached && std::chrono::steady_clock::now() < give_up) {
    reached = server_->backend().TenantInFlight("acme") == 1;
    if (!reached) std::this_thread::yield();
  }
  if (!reached) {
    for (const pid_t pid : pids) ::kill(pid, SIGCONT);
    first.join();
    FAIL() << "the held request was not taken (in flight: "
           << server_->backend().TenantInFlight("acme") << ", pids stopped: " << pids.size()
           << "); it got "
           << (held ? std::to_string(held->result_int()) + " " + held->body() : "no answer");
  }
  auto over = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("over"));
  ASSERT_TRUE(over);
  EXPECT_EQ(over->result_int(), 429) << over->body();
  for (const pid_t pid : pids) ::kill(pid, SIGCONT);
  first.join();
  ASSERT_TRUE(held);
  EXPECT_EQ(held->result_int(), 200) << held->body();
  auto again = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("again"));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->result_int(), 200) << again->body();
}

// Triton's statistics extension, counted by the live backend: every answered request once, with
// its queueing and its run.
TEST_F(ServerTest, ModelStatisticsCountWhatWasServed) {
  Start();
  const std::string acme = AddTenant("acme");
  const std::string other = AddTenant("other");
  Deploy(acme, kEchoSpec, "echo");
  for (int i = 0; i < 3; ++i) {
    auto answer = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("s"));
    ASSERT_TRUE(answer);
    ASSERT_EQ(answer->result_int(), 200) << answer->body();
  }
  auto stats = client_->Send("GET", "/v2/models/echo/stats", acme);
  ASSERT_TRUE(stats);
  ASSERT_EQ(stats->result_int(), 200) << stats->body();
  const nlohmann::json body = nlohmann::json::parse(stats->body());
  ASSERT_EQ(body["model_stats"].size(), 1u) << body;
  const nlohmann::json& model = body["model_stats"][0];
  EXPECT_EQ(model["name"], "echo");
  EXPECT_EQ(model["inference_count"], 3);
  const nlohmann::json& inference = model["inference_stats"];
  EXPECT_EQ(inference["success"]["count"], 3);
  EXPECT_EQ(inference["fail"]["count"], 0);
  EXPECT_EQ(inference["queue"]["count"], 3);
  EXPECT_EQ(inference["compute_infer"]["count"], 3);
  EXPECT_GT(inference["compute_infer"]["ns"].get<std::uint64_t>(), 0u);
  // Each request's inputs encoded for the function, and (sent one at a time) each answer decoded
  // alone.
  EXPECT_EQ(inference["compute_input"]["count"], 3);
  EXPECT_GT(inference["compute_input"]["ns"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(inference["compute_output"]["count"], 3);
  EXPECT_GT(inference["compute_output"]["ns"].get<std::uint64_t>(), 0u);
  EXPECT_GE(inference["success"]["ns"].get<std::uint64_t>(),
            inference["compute_infer"]["ns"].get<std::uint64_t>());
  // An unload and a load keep them.
  ASSERT_EQ(client_->Send("POST", "/v2/repository/models/echo/unload", acme)->result_int(), 200);
  ASSERT_EQ(client_->Send("POST", "/v2/repository/models/echo/load", acme)->result_int(), 200);
  auto all = client_->Send("GET", "/v2/models/stats", acme);
  ASSERT_TRUE(all);
  const nlohmann::json listed = nlohmann::json::parse(all->body())["model_stats"];
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["inference_stats"]["success"]["count"], 3);
  // Another tenant sees none of it.
  auto theirs = client_->Send("GET", "/v2/models/echo/stats", other);
  ASSERT_TRUE(theirs);
  EXPECT_EQ(theirs->result_int(), 404);
  auto none = client_->Send("GET", "/v2/models/stats", other);
  ASSERT_TRUE(none);
  EXPECT_EQ(nlohmann::json::parse(none->body())["model_stats"], nlohmann::json::array());
}

// A tenant may not deploy a command (code execution on the node), set the environment, nor read
// model files outside its folder; the admin may.
TEST_F(ServerTest, CommandsAreTheAdminsOnly) {
  Start();
  const std::string acme = AddTenant("acme");
  std::string spec(kEchoSpec);
  spec.replace(spec.find("runtime: echo"), 13, "command: [/bin/true]");
  auto refused = client_->Send("POST", "/api/v1/functions", acme, spec);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result_int(), 403) << refused->body();
  std::string files(kEchoSpec);
  files += "model_files: [/etc/hostname]\n";
  auto outside = client_->Send("POST", "/api/v1/functions", acme, files);
  ASSERT_TRUE(outside);
  EXPECT_EQ(outside->result_int(), 403) << outside->body();
  std::string with_env(kEchoSpec);
  with_env += "env: {LD_PRELOAD: /tmp/x.so}\n";
  auto env = client_->Send("POST", "/api/v1/functions", acme, with_env);
  ASSERT_TRUE(env);
  EXPECT_EQ(env->result_int(), 403) << env->body();
  auto listed = client_->Send("GET", "/api/v1/functions", acme);
  ASSERT_TRUE(listed);
  EXPECT_TRUE(Json(listed)["functions"].empty());
}

// A function that asks for the driver's checkpoint API cannot run on emulated GPUs: its deploy is
// a 400 that says why, and nothing is kept.
TEST_F(ServerTest, TheCheckpointMechanismIsRefusedOnEmulatedGpus) {
  Start();
  AddTenant("acme");
  std::string spec(kEchoSpec);
  spec.replace(spec.find("runtime: echo"), 13, "command: [/bin/true]\nswitch: checkpoint");
  auto refused = client_->Send("POST", "/api/v1/tenants/acme/functions", kAdminKey, spec);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result_int(), 400) << refused->body();
  EXPECT_NE(refused->body().find("switch: checkpoint"), std::string::npos) << refused->body();
  EXPECT_NE(refused->body().find("needs a CUDA GPU"), std::string::npos) << refused->body();
  auto listed = client_->Send("GET", "/api/v1/tenants/acme/functions", kAdminKey);
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->result_int(), 200) << listed->body();
  EXPECT_TRUE(Json(listed)["functions"].empty()) << listed->body();
}

// Malformed input gets a 4xx and the server stays up: broken JSON, bad UTF-8, an unknown
// datatype, a shape its data does not fill, a shape the model does not take (the function's own
// 400), bodies and headers past the limits, a client too slow to send its request.
TEST_F(ServerTest, MalformedInputIs4xxAndTheServerStaysUp) {
  Start();
  const std::string acme = AddTenant("acme");
  constexpr std::string_view kMlpSpec = R"(name: mlp
model_size: 23298088
gpu_memory: 64Mi
exec_latency: {a100-40gb: {1: 3ms, 8: 8ms}}
slo: 10s
max_batch: 8
runtime: mlp
timeout: 10s
)";
  Deploy(acme, kMlpSpec, "mlp");
  const std::vector<std::pair<std::string, int>> corpus = {
      {R"({"inputs":[)", 400},
      {"", 400},
      {"[]", 400},
      {"{\"inputs\":[{\"name\":\"\xff\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}", 400},
      {R"({"inputs":[{"name":"x","datatype":"BOGUS","shape":[1],"data":[1]}]})", 400},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,784],"data":[1,2]}]})", 400},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[-1,3],"data":[1,2,3]}]})", 400},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]})", 400},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,3],"data":[1,"a",3]}]})", 400},
  };
  for (const auto& [body, status] : corpus) {
    HttpClientForTest client(server_->port());
    auto answer = client.Send("POST", "/v2/models/mlp/infer", acme, body);
    ASSERT_TRUE(answer) << body;
    EXPECT_EQ(answer->result_int(), status) << body << " -> " << answer->body();
    EXPECT_TRUE(Json(answer).contains("error")) << answer->body();
  }
  {
    HttpClientForTest client(server_->port());
    // Refused from its declared length, before any of it is read.
    auto huge =
        client.SendRaw("POST /v2/models/mlp/infer HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " +
                       acme + "\r\nContent-Length: " + std::to_string(65 << 20) + "\r\n\r\n");
    ASSERT_TRUE(huge);
    EXPECT_EQ(huge->result_int(), 413);
  }
  {
    HttpClientForTest client(server_->port());
    auto header = client.SendRaw("GET /v2/health/live HTTP/1.1\r\nHost: t\r\nX-Big: " +
                                 std::string(20'000, 'a') + "\r\n\r\n");
    ASSERT_TRUE(header);
    EXPECT_EQ(header->result_int(), 431);
  }
  {
    // Half a request, then nothing: the server answers 408 once its read timeout has passed.
    HttpClientForTest client(server_->port());
    auto slow =
        client.SendRaw("POST /v2/models/mlp/infer HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " +
                       acme + "\r\nContent-Length: 10\r\n\r\n{");
    ASSERT_TRUE(slow);
    EXPECT_EQ(slow->result_int(), 408);
  }
  // Still up, and still right.
  std::vector<float> image(784);
  for (std::size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>(i % 7) / 7.0f;
  auto good = client_->Send(
      "POST", "/v2/models/mlp/infer", acme,
      nlohmann::json{
          {"inputs",
           {{{"name", "input"}, {"datatype", "FP32"}, {"shape", {1, 1, 28, 28}}, {"data", image}}}}}
          .dump());
  ASSERT_TRUE(good);
  ASSERT_EQ(good->result_int(), 200) << good->body();
  EXPECT_EQ(Json(good)["outputs"][0]["shape"], nlohmann::json({1, 10}));
  // The runtime reported its tensors at readiness: the metadata lists them, and the front holds
  // requests to them (another name, a flat image) before they are queued.
  auto metadata = client_->Send("GET", "/v2/models/mlp", acme);
  ASSERT_TRUE(metadata);
  EXPECT_EQ(Json(metadata)["inputs"],
            nlohmann::json::parse(R"([{"name":"input","datatype":"FP32","shape":[-1,1,28,28]}])"));
  EXPECT_EQ(Json(metadata)["outputs"],
            nlohmann::json::parse(R"([{"name":"logits","datatype":"FP32","shape":[-1,10]}])"));
  for (const auto& [body, message] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"inputs",
              {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 1, 28, 28}}, {"data", image}}}}},
            "model 'mlp': the model has no input 'x' (its inputs: input)"},
           {{{"inputs",
              {{{"name", "input"}, {"datatype", "FP32"}, {"shape", {1, 784}}, {"data", image}}}}},
            "model 'mlp': input 'input' has shape [1,784]; the model takes [-1,1,28,28]"}}) {
    auto refused = client_->Send("POST", "/v2/models/mlp/infer", acme, body.dump());
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->result_int(), 400);
    EXPECT_EQ(Json(refused).value("error", ""), message);
  }
  auto live = client_->Send("GET", "/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->result_int(), 200);
}

// A spec's inputs and outputs are the model's: the metadata and the config list them, requests
// are checked against them, and the raw binary form takes the one input.
TEST_F(ServerTest, ASpecsTensorsAreTheModels) {
  Start();
  const std::string acme = AddTenant("acme");
  Deploy(acme,
         std::string(kEchoSpec) +
             "inputs: [{name: x, datatype: FP32, shape: [-1, 3]}]\n"
             "outputs: [{name: output, datatype: FP32, shape: [-1, 3]}]\n",
         "echo");
  auto metadata = client_->Send("GET", "/v2/models/echo", acme);
  ASSERT_TRUE(metadata);
  EXPECT_EQ(Json(metadata)["inputs"],
            nlohmann::json::parse(R"([{"name":"x","datatype":"FP32","shape":[-1,3]}])"));
  auto config = client_->Send("GET", "/v2/models/echo/config", acme);
  ASSERT_TRUE(config);
  EXPECT_EQ(Json(config)["input"],
            nlohmann::json::parse(R"([{"name":"x","data_type":"TYPE_FP32","dims":[3]}])"));
  auto good = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("t1"));
  ASSERT_TRUE(good);
  ASSERT_EQ(good->result_int(), 200) << good->body();
  auto wrong =
      client_->Send("POST", "/v2/models/echo/infer", acme,
                    R"({"inputs":[{"name":"x","datatype":"FP64","shape":[1,3],"data":[1,2,3]}]})");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->result_int(), 400);
  EXPECT_EQ(Json(wrong).value("error", ""),
            "model 'echo': input 'x' is FP64; the model takes FP32");
  // The raw form: the body is x's data, one row of 3.
  const std::vector<float> row = {1.0f, 2.0f, 4.0f};
  const std::string raw(reinterpret_cast<const char*>(row.data()), sizeof(float) * row.size());
  auto answer = client_->SendRaw(
      "POST /v2/models/echo/infer HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + acme +
      "\r\nInference-Header-Content-Length: 0\r\nContent-Length: " + std::to_string(raw.size()) +
      "\r\n\r\n" + raw);
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->result_int(), 200) << answer->body();
  const std::string body = answer->body();
  ASSERT_GE(body.size(), raw.size());
  EXPECT_EQ(body.substr(body.size() - raw.size()), raw);
}

// The process's peak resident memory since the last ResetOwnPeakMemory, in bytes.
std::optional<std::uint64_t> PeakMemory() {
  const auto memory = ReadOwnMemory();
  if (!memory.ok() || memory->peak_rss_bytes == 0) return std::nullopt;
  return memory->peak_rss_bytes;
}

// 50 clients without a key announce 60 MiB bodies at once, half with `Expect: 100-continue`
// (answered at once, no body sent) and half sending the body until the server stops reading:
// each gets 401 at its header, no `100 Continue`, and the process's peak memory (the server is in
// this process) grows by at most 64 MiB while they are answered; the server then serves a tenant.
TEST_F(ServerTest, KeylessLargeBodiesAreRefusedBeforeTheyAreRead) {
  Start();
  const std::string acme = AddTenant("acme");
  Deploy(acme, kEchoSpec, "echo");
  if (!ResetOwnPeakMemory().ok()) GTEST_SKIP() << "/proc/self/clear_refs cannot reset the peak";
  const std::optional<std::uint64_t> before = PeakMemory();
  ASSERT_TRUE(before);
  constexpr int kClients = 50;
  static constexpr std::uint64_t kBody = 60 << 20;
  static const std::string chunk(1 << 20, '[');
  std::vector<std::thread> clients;
  std::atomic<int> refused{0};
  std::atomic<int> continued{0};
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      const bool expect = i % 2 == 0;
      boost::asio::io_context io;
      boost::asio::ip::tcp::socket socket(io);
      boost::system::error_code error;
      socket.connect({boost::asio::ip::make_address("127.0.0.1"), server_->port()}, error);
      if (error) return;
      const timeval limit{30, 0};  // a safety net; nothing asserts on it
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
      std::string header =
          "POST /v2/models/echo/infer HTTP/1.1\r\nHost: t\r\n"
          "Content-Type: application/json\r\nContent-Length: " +
          std::to_string(kBody) + "\r\n";
      if (expect) header += "Expect: 100-continue\r\n";
      header += "\r\n";
      boost::asio::write(socket, boost::asio::buffer(header), error);
      // The body, on a thread of its own, until the server stops taking it.
      std::thread sender;
      if (!expect) {
        sender = std::thread([&socket] {
          for (std::uint64_t sent = 0; sent < kBody; sent += chunk.size()) {
            if (::send(socket.native_handle(), chunk.data(), chunk.size(), MSG_NOSIGNAL) < 0) {
              return;
            }
          }
        });
      }
      boost::beast::flat_buffer buffer;
      boost::beast::http::response_parser<boost::beast::http::string_body> parser;
      boost::beast::http::read(socket, buffer, parser, error);
      if (!error && parser.get().result_int() == 401) ++refused;
      if (!error && parser.get().result_int() == 100) ++continued;
      ::shutdown(socket.native_handle(), SHUT_RDWR);  // ends the sender's send
      if (sender.joinable()) sender.join();
    });
  }
  for (std::thread& client : clients) client.join();
  const std::optional<std::uint64_t> after = PeakMemory();
  ASSERT_TRUE(after);
  EXPECT_EQ(refused.load(), kClients);
  EXPECT_EQ(continued.load(), 0);
  EXPECT_LE(*after, *before + (64 << 20))
      << "peak memory grew by " << (*after - *before) / (1 << 20) << " MiB";
  auto answer = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("after"));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 200) << answer->body();
}

// `gshare tenant remove` and `gshare tenant add` beside a running server (here the code they run,
// on a second connection to the server's registry): once the server has polled, the removed
// tenant's key is refused and its function is stopped, another tenant's is untouched, and the
// added tenant's key works.
TEST_F(ServerTest, TenantChangesBesideTheServerTakeEffect) {
  Start();
  const std::string acme = AddTenant("acme");
  const std::string other = AddTenant("other");
  Deploy(acme, kEchoSpec, "echo");
  Deploy(other, kEchoSpec, "echo");
  auto served = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("a"));
  ASSERT_TRUE(served);
  ASSERT_EQ(served->result_int(), 200) << served->body();
  const std::filesystem::path data = dir_.path() / "data";
  auto registry = Registry::Open(data);
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  auto secret = ServerSecret::LoadOrCreate(data);
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  auto keys = TenantKeys::Open(**registry, std::move(secret).value());
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();

  const std::uint64_t before = server_->management().reconciled();
  ASSERT_TRUE((*registry)->RemoveTenant("acme").ok());  // what `gshare tenant remove` does
  ASSERT_TRUE(server_->management().WaitUntilReconciled(before + 1, std::chrono::seconds(60)));
  auto refused = client_->Send("POST", "/v2/models/echo/infer", acme, EchoRequest("b"));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result_int(), 401) << refused->body();
  client_ = std::make_unique<HttpClientForTest>(server_->port());  // a refused body closes
  EXPECT_EQ(server_->backend().StatusOf("acme", "echo").status().code(), StatusCode::kNotFound);
  auto untouched = client_->Send("POST", "/v2/models/echo/infer", other, EchoRequest("c"));
  ASSERT_TRUE(untouched);
  EXPECT_EQ(untouched->result_int(), 200) << untouched->body();

  auto added = (*keys)->AddTenant("beta");  // what `gshare tenant add` does
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  ASSERT_TRUE(server_->management().WaitUntilReconciled(before + 2, std::chrono::seconds(60)));
  auto welcomed = client_->Send("GET", "/api/v1/functions", *added);
  ASSERT_TRUE(welcomed);
  EXPECT_EQ(welcomed->result_int(), 200) << welcomed->body();
}

// Two servers on one host (one uid ledger) give their tenants disjoint uids, and a server keeps
// its range across a restart.
TEST_F(ServerTest, TwoServersOnOneHostGiveOutDisjointUids) {
  if (::geteuid() != 0) GTEST_SKIP() << "tenants' uids are switched only as root";
  Start();
  TempDirForTest other_dir;
  ::chmod(other_dir.path().c_str(), 0711);
  ServerOptions options = Options(other_dir.path());
  options.uid_ledger = dir_.path() / "uid-ranges";  // the same host's ledger
  auto other = Server::Start(std::move(options));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(server_->tenant_first_uid(), 70000u);
  EXPECT_EQ((*other)->tenant_first_uid(), 80000u);
  Stop();
  Start();
  EXPECT_EQ(server_->tenant_first_uid(), 70000u);
}

// One io thread, and a parse pool of one thread held shut: one tenant's four large bodies wait
// for the pool, and meanwhile another tenant's small inference and the health check are answered
// on the io thread; once the pool opens, the four are answered too.
TEST_F(ServerTest, LargeBodiesParseOffTheIoThreadAndNobodyWaitsBehindThem) {
  std::mutex gate_mutex;
  std::condition_variable gate_changed;
  bool open = false;
  int waiting = 0;
  customize_ = [&](ServerOptions& options) {
    options.http.io_threads = 1;
    options.parse_pool.threads = 1;
    options.parse_pool.before_job = [&] {
      std::unique_lock lock(gate_mutex);
      ++waiting;
      gate_changed.notify_all();
      gate_changed.wait(lock, [&] { return open; });
    };
  };
  Start();
  const std::string acme = AddTenant("acme");
  const std::string other = AddTenant("other");
  Deploy(acme, kEchoSpec, "echo");
  Deploy(other, kEchoSpec, "echo");
  // 40,000 elements: about 280 KiB of JSON, past what parses on the io thread.
  std::vector<float> data(40'000, 0.25f);
  const std::string large =
      nlohmann::json{
          {"inputs",
           {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 40'000}}, {"data", data}}}}}
          .dump();
  ASSERT_GT(large.size(), kInlineParseBytes);
  std::vector<std::optional<HttpClientResponse>> answers(4);
  std::vector<std::thread> senders;
  const auto open_gate = [&] {
    {
      std::lock_guard lock(gate_mutex);
      open = true;
    }
    gate_changed.notify_all();
  };
  // However the test ends, the gate opens and the senders are joined before the locals go.
  struct Finally {
    std::function<void()> run;
    ~Finally() { run(); }
  } finally{[&] {
    open_gate();
    for (std::thread& sender : senders) {
      if (sender.joinable()) sender.join();
    }
  }};
  for (std::size_t i = 0; i < answers.size(); ++i) {
    senders.emplace_back([&, i] {
      HttpClientForTest client(server_->port());
      answers[i] = client.Send("POST", "/v2/models/echo/infer", acme, large);
    });
  }
  {
    std::unique_lock lock(gate_mutex);  // the first large body is in the pool
    gate_changed.wait(lock, [&] { return waiting >= 1; });
  }
  HttpClientForTest client(server_->port());
  auto small = client.Send("POST", "/v2/models/echo/infer", other, EchoRequest("small"));
  ASSERT_TRUE(small);
  EXPECT_EQ(small->result_int(), 200) << small->body();
  auto live = client.Send("GET", "/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->result_int(), 200);
  open_gate();
  for (std::thread& sender : senders) sender.join();
  for (const auto& answer : answers) {
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 200) << answer->body().substr(0, 200);
    EXPECT_EQ(Json(answer)["outputs"][0]["shape"], nlohmann::json({1, 40'000}));
  }
}

// A spec this node can never hold is a bad spec (400), not a full node (429); and what a tenant
// is told names no path of the node: a missing model file by its name in the tenant's folder.
TEST_F(ServerTest, SpecsBeyondTheNodeAre400AndErrorsNameNoNodePaths) {
  Start();
  const std::string acme = AddTenant("acme");
  const std::string root = dir_.path().string();
  const auto refused = [&](std::string spec, int status) {
    auto answer = client_->Send("POST", "/api/v1/functions", acme, spec);
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), status) << answer->body();
    EXPECT_EQ(answer->body().find(root), std::string::npos) << answer->body();
    EXPECT_EQ(answer->body().find(GSHARE_FUNCTION_PROGRAM), std::string::npos) << answer->body();
  };
  std::string huge(kEchoSpec);
  huge.replace(huge.find("model_size: 1Mi"), 15, "model_size: 9223372036854775807");
  huge.replace(huge.find("gpu_memory: 8Mi"), 15, "gpu_memory: 9223372036854775807");
  refused(huge, 400);
  refused(std::string(kEchoSpec) + "min_instances: 10000\n", 400);
  refused(std::string(kEchoSpec) + "model_files: [/etc/hostname]\n", 403);
  refused(std::string(kEchoSpec) + "model_files: [missing.bin]\n", 400);
  auto missing = client_->Send("POST", "/api/v1/functions", acme,
                               std::string(kEchoSpec) + "model_files: [missing.bin]\n");
  ASSERT_TRUE(missing);
  EXPECT_NE(missing->body().find("missing.bin"), std::string::npos) << missing->body();
}

// A tenant uploads its model files through the API, past the held body limit (the upload streams
// to disk), deploys a function that names one (which then stays as it is), and reads the log of a
// function whose model did not load, without the node's paths.
TEST_F(ServerTest, ATenantUploadsItsFilesAndReadsTheLogOfAFailedDeploy) {
  customize_ = [](ServerOptions& options) {
    options.http.limits.body_bytes = 1 * kMiB;
    options.max_file_bytes = 8 * kMiB;
  };
  Start();
  const std::string acme = AddTenant("acme");
  const std::string root = dir_.path().string();
  std::string weights(3 * kMiB, '\0');
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<char>(i * 7 % 251);
  auto stored = client_->Send("PUT", "/api/v1/files/nets/weights.bin", acme, weights);
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->result_int(), 201) << stored->body();
  EXPECT_EQ(Json(stored)["size"], weights.size());
  EXPECT_EQ(Json(stored).value("sha256", "").size(), 64u);
  EXPECT_EQ(ReadFile(dir_.path() / "data" / "models" / "acme" / "nets" / "weights.bin"), weights);
  Deploy(acme, std::string(kEchoSpec) + "model_files: [nets/weights.bin]\n", "echo");
  auto replaced = client_->Send("PUT", "/api/v1/files/nets/weights.bin", acme, "other");
  ASSERT_TRUE(replaced);
  EXPECT_EQ(replaced->result_int(), 409) << replaced->body();
  EXPECT_EQ(ReadFile(dir_.path() / "data" / "models" / "acme" / "nets" / "weights.bin"), weights);

  // Not a safetensors file: the mlp runtime fails to load it and says so in its log.
  auto bad = client_->Send("PUT", "/api/v1/files/bad.safetensors", acme, "abc");
  ASSERT_TRUE(bad);
  ASSERT_EQ(bad->result_int(), 201) << bad->body();
  std::string spec(kEchoSpec);
  spec.replace(spec.find("name: echo"), 10, "name: broken");
  spec.replace(spec.find("runtime: echo"), 13, "runtime: mlp");
  auto failed =
      client_->Send("POST", "/api/v1/functions", acme, spec + "model_files: [bad.safetensors]\n");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->result_int(), 400) << failed->body();
  EXPECT_NE(failed->body().find("GET /api/v1/functions/broken/logs"), std::string::npos)
      << failed->body();
  auto log = client_->Send("GET", "/api/v1/functions/broken/logs?tail=50", acme);
  ASSERT_TRUE(log);
  ASSERT_EQ(log->result_int(), 200) << log->body();
  EXPECT_NE(log->body().find("bad.safetensors"), std::string::npos) << log->body();
  EXPECT_EQ(log->body().find(root), std::string::npos) << log->body();
  // Another tenant reads none of it, nor does a tenant added later under the name.
  const std::string other = AddTenant("other");
  auto hidden = client_->Send("GET", "/api/v1/functions/broken/logs", other);
  ASSERT_TRUE(hidden);
  EXPECT_EQ(hidden->result_int(), 404);
  auto removed = client_->Send("DELETE", "/api/v1/tenants/acme", kAdminKey);
  ASSERT_TRUE(removed);
  ASSERT_EQ(removed->result_int(), 204) << removed->body();
  const std::string again = AddTenant("acme");
  auto gone = client_->Send("GET", "/api/v1/functions/broken/logs", again);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->result_int(), 404) << gone->body();
  // Only an upload streams: an inference body past --max-body is 413 at its header.
  auto large =
      client_->SendRaw("POST /v2/models/echo/infer HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " +
                       again + "\r\nContent-Length: 2097152\r\n\r\n");
  ASSERT_TRUE(large);
  EXPECT_EQ(large->result_int(), 413) << large->body();
}

// Writes a small TorchScript model (two linear layers around a batch norm with set statistics,
// refusing inputs that sum past 1000), an input batch and the model's output on it, computed in
// this Python alone, into `dir`.
constexpr std::string_view kMakeTorchScript = R"(import sys, torch
torch.manual_seed(7)
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 8)
        self.norm = torch.nn.BatchNorm1d(8)
        self.b = torch.nn.Linear(8, 4)
    def forward(self, x):
        if bool(x.sum() > 1000.0):
            raise RuntimeError("an input too large for this model")
        return self.b(torch.relu(self.norm(self.a(x))))
net = Net().eval()
with torch.no_grad():
    net.norm.running_mean.uniform_(-1, 1)
    net.norm.running_var.uniform_(0.5, 2)
model = torch.jit.script(net)
model.save(sys.argv[1] + "/net.pt")
x = torch.rand(3, 16, generator=torch.Generator().manual_seed(3))
torch.set_num_threads(1)
with torch.inference_mode():
    y = model(x)
open(sys.argv[1] + "/x.bin", "wb").write(x.numpy().tobytes())
open(sys.argv[1] + "/y.bin", "wb").write(y.numpy().tobytes())
)";

std::vector<float> ReadFloats(const std::filesystem::path& path) {
  const std::string bytes = ReadFile(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// A tenant's own TorchScript model, uploaded and deployed with `runtime: pytorch`: its answers are
// the outputs the model gives in a Python of its own, bit for bit, request after request (its
// parameters live in the function's device memory, which the node switches); a file that is not
// TorchScript fails the deploy with the loader's words in the answer.
TEST_F(ServerTest, ATenantsTorchScriptModelAnswersAsItDoesAlone) {
  const std::string python = GSHARE_TORCH_PYTHON;
  if (python.empty()) {
    GTEST_SKIP() << "no Python with PyTorch here (scripts/setup.sh installs python3-torch)";
  }
  const auto made = dir_.path() / "made";
  std::filesystem::create_directories(made);
  {
    std::ofstream script(made / "make.py");
    script << kMakeTorchScript;
  }
  ASSERT_EQ(
      std::system(fmt::format("'{}' '{}' '{}'", python, (made / "make.py").string(), made.string())
                      .c_str()),
      0);
  customize_ = [&](ServerOptions& options) { options.backend.python = python; };
  Start();
  const std::string acme = AddTenant("acme");
  auto stored = client_->Send("PUT", "/api/v1/files/nets/net.pt", acme, ReadFile(made / "net.pt"));
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->result_int(), 201) << stored->body();
  const std::string spec = R"(name: net
model_size: 1Mi
gpu_memory: 16Mi
exec_latency: 5ms
slo: 5s
max_batch: 4
timeout: 30s
runtime: pytorch
model_files: [nets/net.pt]
inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]
outputs: [{name: y, datatype: FP32, shape: [-1, 4]}]
)";
  Deploy(acme, spec, "net");
  const std::vector<float> x = ReadFloats(made / "x.bin");
  const std::vector<float> y = ReadFloats(made / "y.bin");
  ASSERT_EQ(x.size(), 48u);
  ASSERT_EQ(y.size(), 12u);
  const std::string request =
      nlohmann::json{
          {"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {3, 16}}, {"data", x}}}}}
          .dump();
  for (int round = 0; round < 3; ++round) {
    auto answer = client_->Send("POST", "/v2/models/net/infer", acme, request);
    ASSERT_TRUE(answer);
    ASSERT_EQ(answer->result_int(), 200) << answer->body();
    const nlohmann::json output = Json(answer)["outputs"][0];
    EXPECT_EQ(output["shape"], nlohmann::json({3, 4}));
    EXPECT_EQ(output["data"].get<std::vector<float>>(), y) << "round " << round;
  }
  // The parameters were placed in device memory: the function says so in its log.
  auto placed = client_->Send("GET", "/api/v1/functions/net/logs", acme);
  ASSERT_TRUE(placed);
  EXPECT_NE(placed->body().find("9 parameters and buffers"), std::string::npos) << placed->body();
  // The model raises: 500 for that request, its words in the log, and the process goes on.
  std::vector<float> large(16, 100.0f);
  auto raised = client_->Send(
      "POST", "/v2/models/net/infer", acme,
      nlohmann::json{
          {"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 16}}, {"data", large}}}}}
          .dump());
  ASSERT_TRUE(raised);
  EXPECT_EQ(raised->result_int(), 500) << raised->body();
  EXPECT_NE(raised->body().find("an input too large for this model"), std::string::npos)
      << raised->body();
  // A NaN (the binary form carries one): refused by the runtime.
  std::vector<float> with_nan(16, 0.5f);
  with_nan[3] = std::numeric_limits<float>::quiet_NaN();
  const std::string header =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,16],"parameters":{"binary_data_size":64}}]})";
  auto nan = client_->SendRaw(
      "POST /v2/models/net/infer HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + acme +
      "\r\nInference-Header-Content-Length: " + std::to_string(header.size()) +
      "\r\nContent-Length: " + std::to_string(header.size() + 64) + "\r\n\r\n" + header +
      std::string(reinterpret_cast<const char*>(with_nan.data()), 64));
  ASSERT_TRUE(nan);
  EXPECT_EQ(nan->result_int(), 400) << nan->body();
  auto after = client_->Send("POST", "/v2/models/net/infer", acme, request);
  ASSERT_TRUE(after);
  ASSERT_EQ(after->result_int(), 200) << after->body();
  EXPECT_EQ(Json(after)["outputs"][0]["data"].get<std::vector<float>>(), y);

  // Not TorchScript: the deploy fails, and its answer carries the loader's words.
  auto junk = client_->Send("PUT", "/api/v1/files/junk.pt", acme, "not a model");
  ASSERT_TRUE(junk);
  ASSERT_EQ(junk->result_int(), 201);
  std::string broken = spec;
  broken.replace(broken.find("name: net"), 9, "name: junk");
  broken.replace(broken.find("nets/net.pt"), 11, "junk.pt");
  auto failed = client_->Send("POST", "/api/v1/functions", acme, broken);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->result_int(), 400) << failed->body();
  EXPECT_NE(failed->body().find("not a TorchScript model"), std::string::npos) << failed->body();
  EXPECT_EQ(failed->body().find(dir_.path().string()), std::string::npos) << failed->body();
}

// A tenant's handler that tries to leave its sandbox in load(): each try is refused (1 in its
// answer) while what the sandbox allows works (its own model folder read, /tmp written), and its
// process runs as the tenant's own uid on the host. GET /api/v1/node says the sandbox is on.
TEST_F(ServerTest, ATenantsHandlerStaysInItsSandbox) {
  const std::string python = GSHARE_TORCH_PYTHON;
  if (python.empty()) {
    GTEST_SKIP() << "no Python with PyTorch and numpy here (scripts/setup.sh installs them)";
  }
  customize_ = [&](ServerOptions& options) { options.backend.python = python; };
  Start();
  auto node = client_->Send("GET", "/api/v1/node", kAdminKey);
  ASSERT_TRUE(node);
  if (Json(node).value("sandbox", "") != "on") {
    // Only where the test runs as root on a kernel that gives it namespaces.
    GTEST_SKIP() << "no sandbox here: " << Json(node).value("sandbox_reason", "");
  }
  const std::string acme = AddTenant("acme");
  const std::string other = AddTenant("other");
  auto secret = client_->Send("PUT", "/api/v1/files/secret.txt", other, "the neighbour's");
  ASSERT_TRUE(secret && secret->result_int() == 201);
  const std::filesystem::path data = dir_.path() / "data";
  const std::string handler =
      fmt::format(R"(import ctypes, os, socket
import numpy as np

DATA = "{data}"


def refused(attempt):
    try:
        attempt()
    except OSError:
        return 1.0
    return 0.0


def connect():
    with socket.create_connection(("127.0.0.1", {port}), timeout=2):
        pass


def user_namespace():
    if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare")


class Model:
    def load(self):
        with open("/tmp/scratch", "w") as f:
            f.write("mine")
        with open("mine.txt") as f:
            assert f.read() == "mine"
        self.flags = [
            refused(lambda: open(DATA + "/models/other/secret.txt").read()),
            refused(lambda: open(DATA + "/registry.db", "rb").read(1)),
            refused(lambda: os.listdir(DATA + "/run/logs")),
            refused(lambda: open(DATA + "/models/acme/planted", "w")),
            refused(lambda: open("/usr/planted", "w")),
            refused(connect),
            refused(lambda: os.kill({server_pid}, 0)),
            refused(user_namespace),
            float(os.getuid()),
        ]

    def predict(self, inputs):
        return {{"y": np.array([self.flags], dtype=np.float32)}}
)",
                  fmt::arg("data", data.string()), fmt::arg("port", server_->port()),
                  fmt::arg("server_pid", ::getpid()));
  for (const auto& [name, content] :
       {std::pair<std::string, std::string>{"escape.py", handler}, {"mine.txt", "mine"}}) {
    auto stored = client_->Send("PUT", "/api/v1/files/" + name, acme, content);
    ASSERT_TRUE(stored);
    ASSERT_EQ(stored->result_int(), 201) << stored->body();
  }
  Deploy(acme, R"(name: escape
model_size: 1Mi
gpu_memory: 8Mi
exec_latency: 5ms
slo: 5s
timeout: 30s
runtime: python
model_files: [escape.py, mine.txt]
inputs: [{name: x, datatype: FP32, shape: [1]}]
outputs: [{name: y, datatype: FP32, shape: [1, 9]}]
)",
         "escape");
  auto answer = client_->Send(
      "POST", "/v2/models/escape/infer", acme,
      R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [0]}]})");
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->result_int(), 200) << answer->body();
  const auto flags = Json(answer)["outputs"][0]["data"].get<std::vector<float>>();
  ASSERT_EQ(flags.size(), 9u);
  const char* tries[] = {"another tenant's file",       "the registry",    "the node's logs",
                         "a write to its model folder", "a write to /usr", "a connection out",
                         "a signal to the server",      "a user namespace"};
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(flags[i], 1.0f) << tries[i] << " got through";
  const uid_t uid = server_->tenant_first_uid();
  EXPECT_GT(uid, 0u);
  EXPECT_GE(flags[8], static_cast<float>(uid));  // the tenant's own uid, not root
  EXPECT_FALSE(std::filesystem::exists(data / "models" / "acme" / "planted"));
  EXPECT_FALSE(std::filesystem::exists("/usr/planted"));
}

// A tenant's Python handler (runtime: python), with a data file beside it: its answers are what its
// predict computes; a predict that raises is 500 with its words and the function goes on; a
// handler that does not import fails the deploy with Python's words.
TEST_F(ServerTest, ATenantsPythonHandlerServesWhatItPredicts) {
  const std::string python = GSHARE_TORCH_PYTHON;
  if (python.empty()) {
    GTEST_SKIP() << "no Python with PyTorch and numpy here (scripts/setup.sh installs them)";
  }
  customize_ = [&](ServerOptions& options) { options.backend.python = python; };
  Start();
  const std::string acme = AddTenant("acme");
  const std::string handler = R"(import numpy as np


class Model:
    def load(self):
        with open("offset.txt") as f:
            self.offset = np.float32(f.read())

    def predict(self, inputs):
        x = inputs["x"]
        if x[0, 0] < -1000:
            raise ValueError("a first value below -1000")
        return {"y": (x * 2 + self.offset).astype(np.float32)}
)";
  for (const auto& [name, content] : {std::pair<std::string, std::string>{"h/handler.py", handler},
                                      {"h/offset.txt", "0.5"},
                                      {"bad/handler.py", "def predict(:\n"}}) {
    auto stored = client_->Send("PUT", "/api/v1/files/" + name, acme, content);
    ASSERT_TRUE(stored);
    ASSERT_EQ(stored->result_int(), 201) << stored->body();
  }
  const std::string spec = R"(name: doubler
model_size: 1Mi
gpu_memory: 8Mi
exec_latency: 5ms
slo: 5s
max_batch: 4
timeout: 30s
runtime: python
model_files: [h/handler.py, h/offset.txt]
inputs: [{name: x, datatype: FP32, shape: [-1, 3]}]
outputs: [{name: y, datatype: FP32, shape: [-1, 3]}]
)";
  Deploy(acme, spec, "doubler");
  const auto infer = [&](std::vector<float> x) {
    return client_->Send(
        "POST", "/v2/models/doubler/infer", acme,
        nlohmann::json{
            {"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 3}}, {"data", x}}}}}
            .dump());
  };
  auto answer = infer({1.0f, 2.0f, -3.0f});
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->result_int(), 200) << answer->body();
  EXPECT_EQ(Json(answer)["outputs"][0]["data"].get<std::vector<float>>(),
            (std::vector<float>{2.5f, 4.5f, -5.5f}));
  auto raised = infer({-2000.0f, 0.0f, 0.0f});
  ASSERT_TRUE(raised);
  EXPECT_EQ(raised->result_int(), 500) << raised->body();
  EXPECT_NE(raised->body().find("a first value below -1000"), std::string::npos) << raised->body();
  auto again = infer({0.0f, 0.0f, 1.0f});
  ASSERT_TRUE(again);
  ASSERT_EQ(again->result_int(), 200) << again->body();
  EXPECT_EQ(Json(again)["outputs"][0]["data"].get<std::vector<float>>(),
            (std::vector<float>{0.5f, 0.5f, 2.5f}));

  std::string broken = spec;
  broken.replace(broken.find("name: doubler"), 13, "name: broken");
  broken.replace(broken.find("[h/handler.py, h/offset.txt]"), 28, "[bad/handler.py]");
  auto failed = client_->Send("POST", "/api/v1/functions", acme, broken);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->result_int(), 400) << failed->body();
  EXPECT_NE(failed->body().find("SyntaxError"), std::string::npos) << failed->body();
  EXPECT_EQ(failed->body().find(dir_.path().string()), std::string::npos) << failed->body();
  // Nothing changed: no function of that name, and the first one still serves.
  auto gone = client_->Send("GET", "/api/v1/functions/broken", acme);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->result_int(), 404);
  auto still = infer({1.0f, 1.0f, 1.0f});
  ASSERT_TRUE(still);
  EXPECT_EQ(still->result_int(), 200) << still->body();
  // The predict that raised left its words, and its handler line, in the function's log.
  auto log = client_->Send("GET", "/api/v1/functions/doubler/logs?tail=200", acme);
  ASSERT_TRUE(log);
  EXPECT_NE(log->body().find("a first value below -1000 (handler line 12)"), std::string::npos)
      << log->body();
}

// A tenant removed and added again under its name between two looks at the registry is a new
// tenant: the old one's function stops, its key is refused, and the new key works.
TEST_F(ServerTest, ATenantRemovedAndAddedAgainBesideTheServerIsANewTenant) {
  Start();
  const std::string acme = AddTenant("acme");
  Deploy(acme, kEchoSpec, "echo");
  const std::filesystem::path data = dir_.path() / "data";
  auto registry = Registry::Open(data);
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  auto secret = ServerSecret::LoadOrCreate(data);
  ASSERT_TRUE(secret.ok());
  auto keys = TenantKeys::Open(**registry, std::move(secret).value());
  ASSERT_TRUE(keys.ok());
  const std::uint64_t before = server_->management().reconciled();
  ASSERT_TRUE((*keys)->RemoveTenant("acme").ok());
  auto again = (*keys)->AddTenant("acme");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  // One look at the registry or two, depending on when the polls fell: after at most two, the
  // new key is known.
  ASSERT_TRUE(server_->management().WaitUntilReconciled(before + 1, std::chrono::seconds(60)));
  auto welcomed = client_->Send("GET", "/api/v1/functions", *again);
  ASSERT_TRUE(welcomed);
  if (welcomed->result_int() == 401) {
    ASSERT_TRUE(server_->management().WaitUntilReconciled(before + 2, std::chrono::seconds(60)));
    welcomed = client_->Send("GET", "/api/v1/functions", *again);
    ASSERT_TRUE(welcomed);
  }
  EXPECT_EQ(welcomed->result_int(), 200) << welcomed->body();
  EXPECT_TRUE(Json(welcomed)["functions"].empty()) << welcomed->body();
  EXPECT_EQ(server_->backend().StatusOf("acme", "echo").status().code(), StatusCode::kNotFound);
  auto old_key = client_->Send("GET", "/api/v1/functions", acme);
  ASSERT_TRUE(old_key);
  EXPECT_EQ(old_key->result_int(), 401);
}

}  // namespace
}  // namespace gshare::serve
