#include "gshare/serve/management_api.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "gshare/model/catalog.h"
#include "gshare/serve/http_client_for_test.h"
#include "gshare/serve/temp_dir_for_test.h"

namespace gshare::serve {
namespace {

namespace http = boost::beast::http;
using nlohmann::json;

constexpr std::string_view kAdminKey = "admin-key-of-the-management-tests";

// A live spec (the bundled echo runtime) holding `gpu_memory` of GPU memory.
std::string Spec(std::string_view name, std::string_view extra = "",
                 std::string_view gpu_memory = "100Mi") {
  return fmt::format(
      "name: {}\nmodel_size: 10Mi\ngpu_memory: {}\nexec_latency: 2ms\nruntime: echo\n{}", name,
      gpu_memory, extra);
}

// What the node side is told. It follows the Deployer's contract (a command is the admin's only;
// NotFound for a function that is not deployed; a deploy taken at once and settled later, on a
// thread of its own) and can be told to fail, to refuse, or to hold its settles.
class FakeDeployer final : public Deployer {
 public:
  FakeDeployer() : settler_([this] { Settle(); }) {}
  ~FakeDeployer() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      held_tenants_.clear();
      changed_.notify_all();
    }
    settler_.join();
  }

  Status Admit(const FunctionSpec& spec, bool by_admin) const override {
    std::unique_lock lock(mutex_);
    calls_.push_back(
        fmt::format("admit {}/{}{}", spec.tenant, spec.name, by_admin ? " by admin" : ""));
    if (gate_closed_) {
      ++held_;
      changed_.notify_all();
      changed_.wait(lock, [this] { return !gate_closed_; });
    }
    if (admit_error_) return *admit_error_;
    if (!spec.command.empty() && !by_admin) {
      return PermissionDenied("a command is run on the node only for the admin");
    }
    return Status::Ok();
  }
  Status Deploy(const FunctionSpec& spec, Settled settled) override {
    std::lock_guard lock(mutex_);
    calls_.push_back(fmt::format("deploy {}/{}", spec.tenant, spec.name));
    if (refuse_error_) return *refuse_error_;
    Status outcome = Status::Ok();
    if (deploy_error_ && deploy_failures_left_ != 0) {
      if (deploy_failures_left_ > 0) --deploy_failures_left_;
      outcome = *deploy_error_;
    } else {
      functions_[{spec.tenant, spec.name}] = {spec, {ModelState::kLoading, ""}};
    }
    settles_.push_back({spec.tenant, spec.name, std::move(settled), outcome});
    changed_.notify_all();
    return Status::Ok();
  }
  Status Undeploy(std::string_view tenant, std::string_view name) override {
    std::lock_guard lock(mutex_);
    calls_.push_back(fmt::format("undeploy {}/{}", tenant, name));
    if (undeploy_error_) return *undeploy_error_;
    if (functions_.erase({std::string(tenant), std::string(name)}) == 0) {
      return NotFound("not deployed");
    }
    return Status::Ok();
  }
  Status Load(std::string_view tenant, std::string_view name, Settled settled) override {
    std::lock_guard lock(mutex_);
    calls_.push_back(fmt::format("load {}/{}", tenant, name));
    auto found = functions_.find({std::string(tenant), std::string(name)});
    if (found == functions_.end()) return NotFound("not deployed");
    found->second.status = {ModelState::kReady, ""};
    settles_.push_back({std::string(tenant), std::string(name), std::move(settled), Status::Ok()});
    changed_.notify_all();
    return Status::Ok();
  }
  Status Unload(std::string_view tenant, std::string_view name) override {
    std::lock_guard lock(mutex_);
    calls_.push_back(fmt::format("unload {}/{}", tenant, name));
    auto found = functions_.find({std::string(tenant), std::string(name)});
    if (found == functions_.end()) return NotFound("not deployed");
    found->second.status = {ModelState::kUnavailable, "unloaded"};
    return Status::Ok();
  }
  Result<std::size_t> StopTenant(std::string_view tenant) override {
    std::lock_guard lock(mutex_);
    calls_.push_back(fmt::format("stop tenant {}", tenant));
    if (undeploy_error_) return *undeploy_error_;
    return std::erase_if(functions_,
                         [&](const auto& entry) { return entry.first.first == tenant; });
  }
  void KeepWarm(std::string_view tenant, std::string_view name, bool warm) override {
    std::lock_guard lock(mutex_);
    const std::pair<std::string, std::string> key(tenant, name);
    if (warm) {
      cold_.erase(key);
    } else {
      cold_.insert(key);
    }
  }
  // The functions told to keep cold, as "tenant/name".
  std::vector<std::string> Cold() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> cold;
    for (const auto& [tenant, name] : cold_) cold.push_back(tenant + "/" + name);
    return cold;
  }
  std::vector<std::string> Tenants() const override {
    std::lock_guard lock(mutex_);
    std::vector<std::string> tenants;
    for (const auto& [key, function] : functions_) {
      if (tenants.empty() || tenants.back() != key.first) tenants.push_back(key.first);
    }
    return tenants;
  }
  Result<ModelStatus> StatusOf(std::string_view tenant, std::string_view name) const override {
    std::lock_guard lock(mutex_);
    auto found = functions_.find({std::string(tenant), std::string(name)});
    if (found == functions_.end()) return NotFound("the function is not deployed on this node");
    return found->second.status;
  }
  // A deployed function's log is "<tenant>/<name> line i" for i up to 5, the last `lines` of it.
  Result<std::vector<std::string>> LogOf(std::string_view tenant, std::string_view name,
                                         std::size_t lines) const override {
    std::lock_guard lock(mutex_);
    if (functions_.count({std::string(tenant), std::string(name)}) == 0) {
      return NotFound("no log");
    }
    std::vector<std::string> log;
    for (std::size_t i = lines >= 5 ? 1 : 6 - lines; i <= 5; ++i) {
      log.push_back(fmt::format("{}/{} line {}", tenant, name, i));
    }
    return log;
  }

  void RemoveLogs(std::string_view tenant) override {
    std::lock_guard lock(mutex_);
    calls_.push_back(fmt::format("remove logs {}", tenant));
  }

  void FailAdmit(std::optional<Status> error) {
    std::lock_guard lock(mutex_);
    admit_error_ = std::move(error);
  }
  // Deploys settle with `error` `times` times (-1: until told otherwise): the node took the
  // change, and its function did not start.
  void FailDeploy(std::optional<Status> error, int times = -1) {
    std::lock_guard lock(mutex_);
    deploy_error_ = std::move(error);
    deploy_failures_left_ = times;
  }
  // Deploy itself refuses with `error` (the node did not take the change).
  void RefuseDeploy(std::optional<Status> error) {
    std::lock_guard lock(mutex_);
    refuse_error_ = std::move(error);
  }
  void FailUndeploy(std::optional<Status> error) {
    std::lock_guard lock(mutex_);
    undeploy_error_ = std::move(error);
  }
  // While the gate is closed, Admit (on the management API's worker) waits at it.
  void CloseGate() {
    std::lock_guard lock(mutex_);
    gate_closed_ = true;
  }
  void OpenGate() {
    std::lock_guard lock(mutex_);
    gate_closed_ = false;
    changed_.notify_all();
  }
  // Whether an Admit has come to the closed gate within 30 s (a safety net; it comes at once).
  bool WaitUntilHeld() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [this] { return held_ > 0; });
  }
  // The deploys of `tenant` do not settle (their models load) until ReleaseSettles.
  void HoldSettles(const std::string& tenant) {
    std::lock_guard lock(mutex_);
    held_tenants_.insert(tenant);
  }
  void ReleaseSettles() {
    std::lock_guard lock(mutex_);
    held_tenants_.clear();
    changed_.notify_all();
  }
  // Whether a deploy of a held tenant waits to settle, within 30 s (a safety net).
  bool WaitUntilSettleHeld() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [this] {
      return std::any_of(settles_.begin(), settles_.end(),
                         [this](const Pending& p) { return held_tenants_.contains(p.tenant); });
    });
  }
  // Whether `n` deploys wait to settle, within 30 s (a safety net).
  bool WaitUntilUnsettled(std::size_t n) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [&] { return settles_.size() >= n; });
  }
  void SetState(const std::string& tenant, const std::string& name, ModelStatus status) {
    std::lock_guard lock(mutex_);
    functions_.at({tenant, name}).status = std::move(status);
  }
  // Forgets a function as a node that restarted without it would.
  void Forget(const std::string& tenant, const std::string& name) {
    std::lock_guard lock(mutex_);
    functions_.erase({tenant, name});
  }
  // The deployed spec, as canonical YAML (FunctionSpec has no ==), or nothing.
  std::optional<std::string> Deployed(const std::string& tenant, const std::string& name) const {
    std::lock_guard lock(mutex_);
    auto found = functions_.find({tenant, name});
    if (found == functions_.end()) return std::nullopt;
    return FunctionSpecToYaml(found->second.spec);
  }
  std::size_t deployed_count() const {
    std::lock_guard lock(mutex_);
    return functions_.size();
  }
  std::vector<std::string> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  void ClearCalls() {
    std::lock_guard lock(mutex_);
    calls_.clear();
  }

 private:
  struct Function {
    FunctionSpec spec;
    ModelStatus status;
  };

  struct Pending {
    std::string tenant;
    std::string name;
    Settled settled;
    Status outcome;
  };

  // The first deploy that may settle now: not a held tenant's.
  std::deque<Pending>::iterator NextSettle() {
    return std::find_if(settles_.begin(), settles_.end(),
                        [this](const Pending& p) { return !held_tenants_.contains(p.tenant); });
  }
  // The settler: settles the deploys on its own thread, in order, as a node's loop would; a held
  // tenant's wait while the others go on.
  void Settle() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [this] { return stopping_ || NextSettle() != settles_.end(); });
      const auto it = NextSettle();
      if (it == settles_.end()) return;  // stopping, nothing left
      Pending next = std::move(*it);
      settles_.erase(it);
      if (auto found = functions_.find({next.tenant, next.name});
          next.outcome.ok() && found != functions_.end() &&
          found->second.status.state == ModelState::kLoading) {
        found->second.status = {ModelState::kReady, ""};  // its first instance is ready
      }
      lock.unlock();
      if (next.settled) next.settled(next.outcome);
      lock.lock();
    }
  }

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  mutable bool gate_closed_ = false;
  mutable int held_ = 0;
  mutable std::vector<std::string> calls_;
  std::optional<Status> admit_error_;
  std::optional<Status> deploy_error_;
  std::optional<Status> refuse_error_;
  int deploy_failures_left_ = 0;
  std::optional<Status> undeploy_error_;
  std::map<std::pair<std::string, std::string>, Function> functions_;
  std::set<std::pair<std::string, std::string>> cold_;
  std::deque<Pending> settles_;
  std::set<std::string> held_tenants_;
  bool stopping_ = false;
  std::thread settler_;  // last: it starts once every member above exists
};

class ManagementApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    data_dir_ = dir_.path() / "data";
    RegistryOptions registry_options;
    registry_options.now_unix_ms = [this] { return ++now_ms_; };
    auto registry = Registry::Open(data_dir_, registry_options);
    ASSERT_TRUE(registry.ok()) << registry.status().ToString();
    registry_ = std::move(registry).value();
    auto keys = TenantKeys::Open(*registry_, ServerSecret::FromBytes(std::string(32, 's')));
    ASSERT_TRUE(keys.ok()) << keys.status().ToString();
    keys_ = std::move(keys).value();
    auto alpha = keys_->AddTenant("alpha");
    ASSERT_TRUE(alpha.ok()) << alpha.status().ToString();
    alpha_key_ = *alpha;
    auto beta = keys_->AddTenant("beta");
    ASSERT_TRUE(beta.ok()) << beta.status().ToString();
    beta_key_ = *beta;
    OpenFiles(20ULL << 30, 4ULL << 30);
    Start(0);
  }
  void OpenFiles(std::uint64_t storage, std::uint64_t max_file) {
    ModelFileStoreOptions options;
    options.data_dir = data_dir_;
    options.tenant_storage_bytes = storage;
    options.max_file_bytes = max_file;
    auto files = ModelFileStore::Open(std::move(options));
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    files_ = std::move(files).value();
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    api_.reset();
    files_.reset();
  }

  void Start(std::uint64_t tenant_gpu_memory_bytes,
             const std::function<void(ManagementApiOptions&)>& more = {}) {
    client_.reset();
    server_.reset();
    api_.reset();
    ManagementApiOptions options;
    options.data_dir = data_dir_;
    options.admin_key_hash = keys_->secret().Hash(kAdminKey);
    options.tenant_gpu_memory_bytes = tenant_gpu_memory_bytes;
    options.files = files_.get();
    if (more) more(options);
    api_ = std::make_unique<ManagementApi>(std::move(options), *registry_, *keys_, deployer_);
    net::HttpServerOptions server_options;
    server_options.port = 0;
    server_options.io_threads = 2;
    server_options.limits.streamed_body_bytes = files_->options().max_file_bytes;
    auto server = net::HttpServer::Start(
        std::move(server_options),
        [this](net::ServerRequest request, net::Responder responder) {
          if (observer_) observer_(request, responder);
          api_->Handle(std::move(request), std::move(responder));
        },
        // The server's header check, for uploads only: it closes a connection whose request it
        // refuses, where these tests send the next request on the same one.
        [this](net::ServerRequest& head) -> std::optional<net::HttpResponse> {
          if (head.method != "PUT" || head.target.find("/files/") == std::string::npos) {
            return std::nullopt;
          }
          return api_->CheckHead(head);
        });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    client_.emplace(server_->port());
  }

  // One request on the fixture's connection; an answer with status 0 when none came.
  HttpClientResponse Send(std::string_view method, std::string_view target,
                          std::optional<std::string_view> key, std::string_view body = "") {
    auto answer = client_->Send(method, target, key, body);
    EXPECT_TRUE(answer) << method << " " << target << ": no answer";
    if (!answer) {
      HttpClientResponse none;
      none.result(0);
      return none;
    }
    return std::move(*answer);
  }

  // The names of `tenant`'s functions in the registry.
  std::vector<std::string> Names(std::string_view tenant) {
    auto records = registry_->ListFunctions(tenant);
    EXPECT_TRUE(records.ok()) << records.status().ToString();
    std::vector<std::string> names;
    if (records.ok()) {
      for (const FunctionRecord& record : *records) names.push_back(record.name);
    }
    return names;
  }
  std::string StoredSpec(std::string_view tenant, std::string_view name) {
    auto record = registry_->GetFunction(tenant, name);
    return record.ok() ? record->spec_yaml : "<" + record.status().ToString() + ">";
  }
  // `yaml` as the API stores it for `tenant`: parsed and written canonically.
  std::string Canonical(std::string_view yaml, const std::string& tenant) {
    auto spec = ParseFunctionEntry(yaml, "test", tenant, data_dir_ / "models" / tenant);
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    return spec.ok() ? FunctionSpecToYaml(*spec) : "";
  }
  std::size_t CountCalls(std::string_view prefix) {
    std::size_t count = 0;
    for (const std::string& call : deployer_.calls()) count += call.starts_with(prefix) ? 1 : 0;
    return count;
  }

  TempDirForTest dir_;
  std::filesystem::path data_dir_;
  std::atomic<std::int64_t> now_ms_{1'700'000'000'000};
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<TenantKeys> keys_;
  std::string alpha_key_;
  std::string beta_key_;
  FakeDeployer deployer_;
  std::unique_ptr<ModelFileStore> files_;
  std::unique_ptr<ManagementApi> api_;
  // Sees every request before the API does (set before the requests it is for are sent).
  std::function<void(const net::ServerRequest&, const net::Responder&)> observer_;
  std::unique_ptr<net::HttpServer> server_;
  std::optional<HttpClientForTest> client_;
};

TEST(ManagementApiServesTest, ApiAndRepositoryPathsOnly) {
  for (const std::string_view target :
       {"/api", "/api/", "/api/v1/functions", "/api/v1/functions/mlp?x=1", "/api/anything",
        "/v2/repository", "/v2/repository/index", "/v2/repository/models/mlp/load"}) {
    EXPECT_TRUE(ManagementApi::Serves(target)) << target;
  }
  for (const std::string_view target :
       {"/", "/apiary", "/v2", "/v2/models/mlp/infer", "/v2/health/ready", "/v2/repositoryx",
        "/v1/api", "?/api"}) {
    EXPECT_FALSE(ManagementApi::Serves(target)) << target;
  }
}

TEST_F(ManagementApiTest, CreateThenGetAndListReturnWhatWasCreated) {
  const std::string yaml = Spec("mlp", "slo: 50ms\nmax_batch: 4\nenv: {MODEL_NAME: mlp}\n");
  auto created = Send("POST", "/api/v1/functions", alpha_key_, yaml);
  ASSERT_EQ(created.result_int(), 201u) << created.body();
  EXPECT_EQ(created[http::field::content_type], "application/json");
  const json body = json::parse(created.body());
  EXPECT_EQ(body["tenant"], "alpha");
  EXPECT_EQ(body["name"], "mlp");
  EXPECT_EQ(body["state"], "READY");  // answered once its model was ready
  EXPECT_EQ(body["reason"], "");
  EXPECT_EQ(body["spec"], Canonical(yaml, "alpha"));
  EXPECT_EQ(body["created_unix_ms"], body["updated_unix_ms"]);

  // The registry and the node hold the same spec, tenant filled in.
  EXPECT_EQ(StoredSpec("alpha", "mlp"), Canonical(yaml, "alpha"));
  EXPECT_EQ(deployer_.Deployed("alpha", "mlp"), Canonical(yaml, "alpha"));
  EXPECT_EQ(deployer_.calls(), (std::vector<std::string>{"admit alpha/mlp", "deploy alpha/mlp"}));
  auto record = registry_->GetFunction("alpha", "mlp");
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(body["created_unix_ms"], record->created_unix_ms);

  auto got = Send("GET", "/api/v1/functions/mlp", alpha_key_);
  ASSERT_EQ(got.result_int(), 200u) << got.body();
  EXPECT_EQ(json::parse(got.body()), body);
  auto listed = Send("GET", "/api/v1/functions", alpha_key_);
  ASSERT_EQ(listed.result_int(), 200u) << listed.body();
  EXPECT_EQ(json::parse(listed.body()), json({{"functions", {body}}}));
  // The spec read back parses to the spec created.
  auto reparsed = ParseFunctionEntry(json::parse(got.body())["spec"].get<std::string>(), "got");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().ToString();
  EXPECT_EQ(FunctionSpecToYaml(*reparsed), Canonical(yaml, "alpha"));
  EXPECT_EQ(reparsed->slo, std::chrono::milliseconds(50));
  EXPECT_EQ(reparsed->max_batch, 4);
  EXPECT_EQ(reparsed->env.at("MODEL_NAME"), "mlp");

  // The deployer's state is the function's.
  deployer_.SetState("alpha", "mlp", {ModelState::kReady, ""});
  auto ready = Send("GET", "/api/v1/functions/mlp", alpha_key_);
  EXPECT_EQ(json::parse(ready.body())["state"], "READY");
}

TEST_F(ManagementApiTest, JsonAndYamlBodiesAreTheSameSpec) {
  constexpr std::string_view kJson = R"({
    "name": "bert",
    "model_size": "200Mi",
    "gpu_memory": "300Mi",
    "exec_latency": {"a100-40gb": {"1": "4ms", "8": "12ms"}, "t4": "9ms"},
    "env": {"MODEL_NAME": "bert", "THREADS": "4"},
    "max_batch": 8,
    "slo": "80ms",
    "runtime": "echo",
    "tenant": "alpha"
  })";
  constexpr std::string_view kYaml = R"(name: bert
model_size: 200Mi
gpu_memory: 300Mi
exec_latency:
  a100-40gb: {1: 4ms, 8: 12ms}
  t4: 9ms
env:
  MODEL_NAME: bert
  THREADS: "4"
max_batch: 8
slo: 80ms
runtime: echo
)";
  auto from_json = Send("POST", "/api/v1/functions", alpha_key_, kJson);
  ASSERT_EQ(from_json.result_int(), 201u) << from_json.body();
  auto from_yaml = Send("POST", "/api/v1/functions", beta_key_, kYaml);
  ASSERT_EQ(from_yaml.result_int(), 201u) << from_yaml.body();

  auto json_spec = ParseFunctionEntry(StoredSpec("alpha", "bert"), "stored");
  ASSERT_TRUE(json_spec.ok()) << json_spec.status().ToString();
  // The nested maps came through: a latency table by GPU type, by batch size.
  ASSERT_EQ(json_spec->exec_latency.size(), 2u);
  EXPECT_EQ(json_spec->exec_latency.at("a100-40gb").by_batch.at(8), std::chrono::milliseconds(12));
  EXPECT_EQ(json_spec->exec_latency.at("t4").by_batch.at(1), std::chrono::milliseconds(9));
  EXPECT_EQ(json_spec->env.at("THREADS"), "4");
  // Apart from the tenant, the two stored specs are the same.
  EXPECT_EQ(StoredSpec("alpha", "bert"), Canonical(kYaml, "alpha"));
  EXPECT_EQ(StoredSpec("beta", "bert"), Canonical(kYaml, "beta"));
}

TEST_F(ManagementApiTest, RelativeModelFilesAreInTheTenantsModelFolder) {
  auto created = Send("POST", "/api/v1/functions", alpha_key_,
                      Spec("mlp", "model_files: [weights.safetensors]\nworking_dir: work\n"));
  ASSERT_EQ(created.result_int(), 201u) << created.body();
  auto spec = ParseFunctionEntry(StoredSpec("alpha", "mlp"), "stored");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(
      spec->model_files,
      std::vector<std::string>{(data_dir_ / "models" / "alpha" / "weights.safetensors").string()});
  EXPECT_EQ(spec->working_dir, (data_dir_ / "models" / "alpha" / "work").string());
  // The answer names them as the tenant did, without the node's folders; sent back, they are the
  // same files.
  const std::string shown = json::parse(created.body())["spec"];
  EXPECT_EQ(shown.find(data_dir_.string()), std::string::npos) << shown;
  auto again = ParseFunctionEntry(shown, "shown", "alpha", data_dir_ / "models" / "alpha");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->model_files, spec->model_files);
  EXPECT_EQ(again->working_dir, spec->working_dir);
}

TEST_F(ManagementApiTest, MalformedSpecsAre400AndWriteNothing) {
  for (const std::string& body : {
           std::string(""),
           std::string("{not yaml: ["),
           std::string("[1, 2]"),
           std::string("name: mlp\n"),                                   // no model_size
           Spec("mlp", "max_batch: 0\n"),                                // out of range
           Spec("mlp", "runtime2: x\nexec_latency2: 1ms\nslo: fast\n"),  // a bad duration
           Spec("mlp", "tenant: beta\n"),                                // another tenant's
           Spec("mlp", "tenant: alpha2\n"),
       }) {
    SCOPED_TRACE(body);
    auto answer = Send("POST", "/api/v1/functions", alpha_key_, body);
    EXPECT_EQ(answer.result_int(), 400u) << answer.body();
    EXPECT_FALSE(ErrorOf(answer).empty());
    EXPECT_FALSE(ErrorOf(answer).starts_with("<")) << answer.body();
  }
  auto other_tenant = Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp", "tenant: beta\n"));
  EXPECT_NE(ErrorOf(other_tenant).find("tenant"), std::string::npos) << other_tenant.body();
  EXPECT_TRUE(Names("alpha").empty());
  EXPECT_TRUE(Names("beta").empty());
  EXPECT_EQ(CountCalls("deploy"), 0u);
}

TEST_F(ManagementApiTest, TheDeployerAdmitsBeforeAnythingIsWritten) {
  // A command is the admin's only (the deployer says so: 403).
  const std::string with_command =
      "name: tool\nmodel_size: 1Mi\nexec_latency: 1ms\ncommand: [/bin/true]\n";
  auto refused = Send("POST", "/api/v1/functions", alpha_key_, with_command);
  EXPECT_EQ(refused.result_int(), 403u) << refused.body();
  EXPECT_EQ(ErrorOf(refused), "a command is run on the node only for the admin");
  // A spec the node cannot run (the deployer's InvalidArgument): 400.
  deployer_.FailAdmit(InvalidArgument("model file 'w.bin' is not a readable file"));
  auto invalid = Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp"));
  EXPECT_EQ(invalid.result_int(), 400u) << invalid.body();
  EXPECT_EQ(ErrorOf(invalid), "model file 'w.bin' is not a readable file");
  EXPECT_TRUE(Names("alpha").empty());
  EXPECT_EQ(CountCalls("deploy"), 0u);

  // The admin may give a command in any tenant's namespace.
  deployer_.FailAdmit(std::nullopt);
  auto admitted = Send("POST", "/api/v1/tenants/alpha/functions", kAdminKey, with_command);
  EXPECT_EQ(admitted.result_int(), 201u) << admitted.body();
  EXPECT_EQ(Names("alpha"), std::vector<std::string>{"tool"});
  EXPECT_EQ(CountCalls("admit alpha/tool by admin"), 1u);
}

TEST_F(ManagementApiTest, ADuplicateNameIs409) {
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp")).result_int(), 201u);
  const std::string stored = StoredSpec("alpha", "mlp");
  deployer_.ClearCalls();
  auto again = Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp", "slo: 9ms\n"));
  EXPECT_EQ(again.result_int(), 409u) << again.body();
  EXPECT_NE(ErrorOf(again).find("already exists"), std::string::npos) << again.body();
  EXPECT_EQ(StoredSpec("alpha", "mlp"), stored);
  EXPECT_EQ(CountCalls("deploy"), 0u);
  // The same name in another tenant's namespace is another function.
  EXPECT_EQ(Send("POST", "/api/v1/functions", beta_key_, Spec("mlp")).result_int(), 201u);
}

TEST_F(ManagementApiTest, ACreateWhoseDeployFailsLeavesNothing) {
  deployer_.FailDeploy(Unavailable("the node is draining"));
  auto answer = Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp"));
  EXPECT_EQ(answer.result_int(), 503u) << answer.body();
  EXPECT_EQ(ErrorOf(answer), "the node is draining");
  EXPECT_TRUE(Names("alpha").empty());
  EXPECT_EQ(deployer_.deployed_count(), 0u);
  deployer_.FailDeploy(Internal("the node is broken"));
  EXPECT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp")).result_int(), 500u);
  EXPECT_TRUE(Names("alpha").empty());
  // Once the node takes it, the same name can be created.
  deployer_.FailDeploy(std::nullopt);
  EXPECT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp")).result_int(), 201u);
  EXPECT_EQ(Names("alpha"), std::vector<std::string>{"mlp"});
}

TEST_F(ManagementApiTest, UpdateReplacesTheSpecAndRedeploys) {
  auto created = Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp"));
  ASSERT_EQ(created.result_int(), 201u) << created.body();
  const std::string new_yaml = Spec("mlp", "slo: 75ms\n", "200Mi");
  auto updated = Send("PUT", "/api/v1/functions/mlp", alpha_key_, new_yaml);
  ASSERT_EQ(updated.result_int(), 200u) << updated.body();
  const json body = json::parse(updated.body());
  EXPECT_EQ(body["spec"], Canonical(new_yaml, "alpha"));
  EXPECT_EQ(body["created_unix_ms"], json::parse(created.body())["created_unix_ms"]);
  EXPECT_GT(body["updated_unix_ms"].get<std::int64_t>(),
            body["created_unix_ms"].get<std::int64_t>());
  EXPECT_EQ(StoredSpec("alpha", "mlp"), Canonical(new_yaml, "alpha"));
  EXPECT_EQ(deployer_.Deployed("alpha", "mlp"), Canonical(new_yaml, "alpha"));
  auto got = Send("GET", "/api/v1/functions/mlp", alpha_key_);
  EXPECT_EQ(json::parse(got.body()), body);
}

TEST_F(ManagementApiTest, UpdateChecksAndAFailedDeployRestoresTheOldSpec) {
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp")).result_int(), 201u);
  const std::string old_spec = StoredSpec("alpha", "mlp");
  deployer_.ClearCalls();

  // The spec names another function: 400.
  auto renamed = Send("PUT", "/api/v1/functions/mlp", alpha_key_, Spec("cnn"));
  EXPECT_EQ(renamed.result_int(), 400u) << renamed.body();
  EXPECT_NE(ErrorOf(renamed).find("'cnn'"), std::string::npos) << renamed.body();
  // A malformed spec: 400; no such function: 404.
  EXPECT_EQ(Send("PUT", "/api/v1/functions/mlp", alpha_key_, "name: [").result_int(), 400u);
  auto absent = Send("PUT", "/api/v1/functions/cnn", alpha_key_, Spec("cnn"));
  EXPECT_EQ(absent.result_int(), 404u) << absent.body();
  EXPECT_EQ(ErrorOf(absent), "function 'cnn' not found");
  EXPECT_EQ(Names("alpha"), std::vector<std::string>{"mlp"});
  EXPECT_EQ(StoredSpec("alpha", "mlp"), old_spec);
  EXPECT_EQ(CountCalls("deploy"), 0u);

  // The node refuses the new spec: the old one is back in the registry and deployed again.
  deployer_.Forget("alpha", "mlp");
  deployer_.FailDeploy(InvalidArgument("the node cannot run this"), 1);
  auto failed = Send("PUT", "/api/v1/functions/mlp", alpha_key_, Spec("mlp", "slo: 1s\n"));
  EXPECT_EQ(failed.result_int(), 400u) << failed.body();
  EXPECT_EQ(ErrorOf(failed), "the node cannot run this");
  EXPECT_EQ(StoredSpec("alpha", "mlp"), old_spec);
  EXPECT_EQ(CountCalls("deploy alpha/mlp"), 2u);  // the new spec, then the old one again
  EXPECT_EQ(deployer_.Deployed("alpha", "mlp"), old_spec);
}

TEST_F(ManagementApiTest, DeleteRemovesAndUndeploys) {
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp")).result_int(), 201u);
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("cnn")).result_int(), 201u);
  auto removed = Send("DELETE", "/api/v1/functions/mlp", alpha_key_);
  EXPECT_EQ(removed.result_int(), 204u) << removed.body();
  EXPECT_EQ(removed.body(), "");
  EXPECT_EQ(Names("alpha"), std::vector<std::string>{"cnn"});
  EXPECT_FALSE(deployer_.Deployed("alpha", "mlp"));
  EXPECT_TRUE(deployer_.Deployed("alpha", "cnn"));
  auto again = Send("DELETE", "/api/v1/functions/mlp", alpha_key_);
  EXPECT_EQ(again.result_int(), 404u);
  EXPECT_EQ(ErrorOf(again), "function 'mlp' not found");
  EXPECT_EQ(Send("GET", "/api/v1/functions/mlp", alpha_key_).result_int(), 404u);

  // A function the node does not serve (its deploy failed at start) is deleted all the same.
  deployer_.Forget("alpha", "cnn");
  auto listed = Send("GET", "/api/v1/functions/cnn", alpha_key_);
  EXPECT_EQ(json::parse(listed.body())["state"], "UNAVAILABLE");
  EXPECT_EQ(json::parse(listed.body())["reason"], "the function is not deployed on this node");
  EXPECT_EQ(Send("DELETE", "/api/v1/functions/cnn", alpha_key_).result_int(), 204u);
  EXPECT_TRUE(Names("alpha").empty());
}

TEST_F(ManagementApiTest, ATenantCannotSeeOrTouchAnothersFunctions) {
  ASSERT_EQ(Send("POST", "/api/v1/functions", beta_key_, Spec("secret")).result_int(), 201u);
  const std::string beta_spec = StoredSpec("beta", "secret");
  deployer_.ClearCalls();

  const std::vector<std::tuple<std::string, std::string, std::string>> requests = {
      {"GET", "/api/v1/functions/{}", ""},
      {"HEAD", "/api/v1/functions/{}", ""},
      {"PUT", "/api/v1/functions/{}", "SPEC"},
      {"DELETE", "/api/v1/functions/{}", ""},
      {"POST", "/v2/repository/models/{}/load", ""},
      {"POST", "/v2/repository/models/{}/unload", ""},
      {"POST", "/v2/repository/models/{}/load", "{}"},
  };
  auto ask_as_alpha = [&](const std::string& name) {
    std::vector<std::string> wires;
    for (const auto& [method, pattern, body] : requests) {
      std::string target = pattern;
      target.replace(target.find("{}"), 2, name);
      auto answer = Send(method, target, alpha_key_, body == "SPEC" ? Spec(name) : body);
      EXPECT_EQ(answer.result_int(), 404u) << method << " " << pattern << ": " << answer.body();
      // The answers name the asked name, so compare them with it replaced.
      std::string wire = Wire(answer);
      for (std::size_t at = wire.find(name); at != std::string::npos; at = wire.find(name)) {
        wire.replace(at, name.size(), "NAME");
      }
      wires.push_back(wire);
    }
    return wires;
  };
  // Beta's function and a name nobody has (of the same length) get the same bytes.
  EXPECT_EQ(ask_as_alpha("secret"), ask_as_alpha("nosuch"));
  auto listed = Send("GET", "/api/v1/functions", alpha_key_);
  EXPECT_EQ(json::parse(listed.body()), json({{"functions", json::array()}}));
  auto index = Send("POST", "/v2/repository/index", alpha_key_);
  EXPECT_EQ(json::parse(index.body()), json::array());

  // Beta's function is untouched, in the registry and on the node.
  EXPECT_EQ(StoredSpec("beta", "secret"), beta_spec);
  EXPECT_EQ(deployer_.Deployed("beta", "secret"), beta_spec);
  for (const std::string& call : deployer_.calls()) {
    EXPECT_FALSE(call.find("beta/") != std::string::npos) << call;
  }
  // Alpha's own "secret" is another function.
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("secret", "slo: 1s\n")).result_int(),
            201u);
  EXPECT_EQ(StoredSpec("beta", "secret"), beta_spec);
  EXPECT_EQ(Names("beta"), std::vector<std::string>{"secret"});
  auto own = Send("GET", "/api/v1/functions/secret", beta_key_);
  EXPECT_EQ(json::parse(own.body())["spec"], beta_spec);
}

TEST_F(ManagementApiTest, RepositoryIndexLoadAndUnload) {
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("cnn")).result_int(), 201u);
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp")).result_int(), 201u);
  deployer_.SetState("alpha", "cnn", {ModelState::kLoading, ""});  // an update loading, say
  const json everything = {
      {{"name", "cnn"}, {"version", "1"}, {"state", "LOADING"}, {"reason", ""}},
      {{"name", "mlp"}, {"version", "1"}, {"state", "READY"}, {"reason", ""}}};
  for (const std::string_view body : {"", "{}", R"({"ready": false})"}) {
    auto index = Send("POST", "/v2/repository/index", alpha_key_, body);
    ASSERT_EQ(index.result_int(), 200u) << index.body();
    EXPECT_EQ(json::parse(index.body()), everything) << body;
  }
  auto ready = Send("POST", "/v2/repository/index", alpha_key_, R"({"ready": true})");
  ASSERT_EQ(ready.result_int(), 200u) << ready.body();
  EXPECT_EQ(json::parse(ready.body()), json::array({everything[1]}));
  for (const std::string_view body : {"{", "[]", R"({"ready": "yes"})"}) {
    auto bad = Send("POST", "/v2/repository/index", alpha_key_, body);
    EXPECT_EQ(bad.result_int(), 400u) << body;
    EXPECT_FALSE(ErrorOf(bad).starts_with("<")) << bad.body();
  }

  auto unloaded = Send("POST", "/v2/repository/models/mlp/unload", alpha_key_);
  ASSERT_EQ(unloaded.result_int(), 200u) << unloaded.body();
  EXPECT_EQ(json::parse(unloaded.body()), json::object());
  auto after_unload = Send("POST", "/v2/repository/index", alpha_key_);
  EXPECT_EQ(
      json::parse(after_unload.body())[1],
      json({{"name", "mlp"}, {"version", "1"}, {"state", "UNAVAILABLE"}, {"reason", "unloaded"}}));
  auto loaded = Send("POST", "/v2/repository/models/mlp/load", alpha_key_, "{}");
  ASSERT_EQ(loaded.result_int(), 200u) << loaded.body();
  EXPECT_EQ(json::parse(Send("GET", "/api/v1/functions/mlp", alpha_key_).body())["state"], "READY");
  EXPECT_EQ(CountCalls("unload alpha/mlp"), 1u);
  EXPECT_EQ(CountCalls("load alpha/mlp"), 1u);
  // What tritonclient sends by default is taken: an empty 'parameters' on a load, and
  // unload_dependents on an unload.
  auto empty = Send("POST", "/v2/repository/models/mlp/load", alpha_key_, R"({"parameters": {}})");
  EXPECT_EQ(empty.result_int(), 200u) << empty.body();
  auto dependents = Send("POST", "/v2/repository/models/mlp/unload", alpha_key_,
                         R"({"parameters": {"unload_dependents": false}})");
  EXPECT_EQ(dependents.result_int(), 200u) << dependents.body();
  EXPECT_EQ(CountCalls("unload alpha/mlp"), 2u);
  ASSERT_EQ(Send("POST", "/v2/repository/models/mlp/load", alpha_key_).result_int(), 200u);
  // A configuration override is not taken.
  auto override = Send("POST", "/v2/repository/models/mlp/load", alpha_key_,
                       R"({"parameters": {"config": "{}"}})");
  EXPECT_EQ(override.result_int(), 400u) << override.body();
  EXPECT_EQ(ErrorOf(override),
            "load parameter 'config' is not supported (a configuration or files given with the "
            "request); change a function's spec with PUT /api/v1/functions/{name}");
  // A function the node does not serve is answered as one nobody has.
  deployer_.Forget("alpha", "cnn");
  auto gone = Send("POST", "/v2/repository/models/cnn/load", alpha_key_);
  EXPECT_EQ(gone.result_int(), 404u);
  EXPECT_EQ(ErrorOf(gone), "model 'cnn' not found");
}

TEST_F(ManagementApiTest, EveryEndpointNeedsAKey) {
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/api/v1/functions"},
           {"POST", "/api/v1/functions"},
           {"GET", "/api/v1/functions/mlp"},
           {"PUT", "/api/v1/functions/mlp"},
           {"DELETE", "/api/v1/functions/mlp"},
           {"POST", "/v2/repository/index"},
           {"POST", "/v2/repository/models/mlp/load"},
           {"POST", "/v2/repository/models/mlp/unload"},
           {"GET", "/api/v1/tenants"},
           {"POST", "/api/v1/tenants"},
           {"GET", "/api/v1/tenants/alpha"},
           {"DELETE", "/api/v1/tenants/alpha"},
           {"POST", "/api/v1/tenants/alpha/keys"},
           {"GET", "/api/v1/tenants/alpha/functions"},
           {"DELETE", "/api/v1/tenants/alpha/functions/mlp"}}) {
    SCOPED_TRACE(method + " " + target);
    auto missing = Send(method, target, std::nullopt);
    EXPECT_EQ(missing.result_int(), 401u);
    EXPECT_EQ(missing[http::field::www_authenticate], "Bearer");
    auto wrong = Send(method, target, "gsk_not-a-key");
    EXPECT_EQ(wrong.result_int(), 401u);
    EXPECT_EQ(wrong[http::field::www_authenticate], "Bearer error=\"invalid_token\"");
    EXPECT_EQ(ErrorOf(wrong), "the API key is not valid");
  }
  auto basic = client_->SendRaw(
      "GET /api/v1/functions HTTP/1.1\r\nHost: test\r\nAuthorization: Basic YWxwaGE=\r\n\r\n");
  ASSERT_TRUE(basic);
  EXPECT_EQ(basic->result_int(), 401u);
  EXPECT_EQ(registry_->ListTenants()->size(), 2u);
  EXPECT_TRUE(deployer_.calls().empty());
}

TEST_F(ManagementApiTest, AdminEndpointsRefuseTenantKeysAndTenantEndpointsTheAdminKey) {
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/api/v1/tenants"},
           {"POST", "/api/v1/tenants"},
           {"GET", "/api/v1/tenants/alpha"},
           {"DELETE", "/api/v1/tenants/beta"},
           {"POST", "/api/v1/tenants/alpha/keys"},
           {"POST", "/api/v1/tenants/alpha/functions"},
           {"GET", "/api/v1/tenants/alpha/functions"},
           {"GET", "/api/v1/tenants/alpha/functions/mlp"},
           {"PUT", "/api/v1/tenants/alpha/functions/mlp"},
           {"DELETE", "/api/v1/tenants/alpha/functions/mlp"}}) {
    SCOPED_TRACE(method + " " + target);
    auto answer = Send(method, target, alpha_key_,
                       method == "POST" && target == "/api/v1/tenants" ? R"({"name": "x"})" : "");
    EXPECT_EQ(answer.result_int(), 403u);
    EXPECT_EQ(ErrorOf(answer), "this endpoint needs the admin key");
  }
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/api/v1/functions"},
           {"POST", "/api/v1/functions"},
           {"GET", "/api/v1/functions/mlp"},
           {"PUT", "/api/v1/functions/mlp"},
           {"DELETE", "/api/v1/functions/mlp"},
           {"POST", "/v2/repository/index"},
           {"POST", "/v2/repository/models/mlp/load"},
           {"POST", "/v2/repository/models/mlp/unload"}}) {
    SCOPED_TRACE(method + " " + target);
    auto answer = Send(method, target, kAdminKey, method == "POST" ? Spec("mlp") : "");
    EXPECT_EQ(answer.result_int(), 403u);
    EXPECT_NE(ErrorOf(answer).find("/api/v1/tenants/{tenant}/functions"), std::string::npos)
        << answer.body();
  }
  EXPECT_EQ(registry_->ListTenants()->size(), 2u);
  EXPECT_TRUE(Names("alpha").empty());
  EXPECT_TRUE(deployer_.calls().empty());
}

TEST_F(ManagementApiTest, AdminAddsListsAndGetsTenants) {
  auto added = Send("POST", "/api/v1/tenants", kAdminKey, R"({"name": "gamma"})");
  ASSERT_EQ(added.result_int(), 201u) << added.body();
  const json body = json::parse(added.body());
  EXPECT_EQ(body["name"], "gamma");
  const std::string key = body["key"].get<std::string>();
  EXPECT_TRUE(key.starts_with(kApiKeyPrefix)) << key;
  EXPECT_EQ(keys_->Authenticate(key), "gamma");
  // The new key manages gamma's namespace at once.
  auto own = Send("POST", "/api/v1/functions", key, Spec("mlp"));
  ASSERT_EQ(own.result_int(), 201u) << own.body();
  EXPECT_EQ(json::parse(own.body())["tenant"], "gamma");

  auto duplicate = Send("POST", "/api/v1/tenants", kAdminKey, R"({"name": "gamma"})");
  EXPECT_EQ(duplicate.result_int(), 409u) << duplicate.body();
  EXPECT_EQ(ErrorOf(duplicate), "tenant 'gamma' already exists");
  for (const std::string_view bad : {"", "{", "[]", "{}", R"({"name": 7})", R"({"name": ""})",
                                     R"({"name": "a/b"})", R"({"name": "-x"})"}) {
    SCOPED_TRACE(bad);
    auto answer = Send("POST", "/api/v1/tenants", kAdminKey, bad);
    EXPECT_EQ(answer.result_int(), 400u) << answer.body();
    EXPECT_FALSE(ErrorOf(answer).starts_with("<")) << answer.body();
  }

  auto listed = Send("GET", "/api/v1/tenants", kAdminKey);
  ASSERT_EQ(listed.result_int(), 200u) << listed.body();
  const json tenants = json::parse(listed.body())["tenants"];
  ASSERT_EQ(tenants.size(), 3u);
  EXPECT_EQ(tenants[0]["name"], "alpha");
  EXPECT_EQ(tenants[2]["name"], "gamma");
  EXPECT_EQ(tenants[2]["functions"], 1);
  auto gamma = registry_->GetTenant("gamma");
  ASSERT_TRUE(gamma.ok());
  EXPECT_EQ(tenants[2]["created_unix_ms"], gamma->created_unix_ms);
  auto one = Send("GET", "/api/v1/tenants/gamma", kAdminKey);
  ASSERT_EQ(one.result_int(), 200u) << one.body();
  EXPECT_EQ(json::parse(one.body()), tenants[2]);
  auto unknown = Send("GET", "/api/v1/tenants/delta", kAdminKey);
  EXPECT_EQ(unknown.result_int(), 404u);
  EXPECT_EQ(ErrorOf(unknown), "tenant 'delta' does not exist");
}

TEST_F(ManagementApiTest, KeyRotationMakesTheOldKeyFail) {
  ASSERT_EQ(Send("GET", "/api/v1/functions", alpha_key_).result_int(), 200u);
  auto rotated = Send("POST", "/api/v1/tenants/alpha/keys", kAdminKey);
  ASSERT_EQ(rotated.result_int(), 200u) << rotated.body();
  const json body = json::parse(rotated.body());
  EXPECT_EQ(body["name"], "alpha");
  const std::string new_key = body["key"].get<std::string>();
  EXPECT_NE(new_key, alpha_key_);
  auto old = Send("GET", "/api/v1/functions", alpha_key_);
  EXPECT_EQ(old.result_int(), 401u);
  EXPECT_EQ(Send("GET", "/api/v1/functions", new_key).result_int(), 200u);
  // Beta's key is not touched.
  EXPECT_EQ(Send("GET", "/api/v1/functions", beta_key_).result_int(), 200u);
  auto unknown = Send("POST", "/api/v1/tenants/delta/keys", kAdminKey);
  EXPECT_EQ(unknown.result_int(), 404u);
}

TEST_F(ManagementApiTest, RemovingATenantUndeploysAndRemovesItsFunctions) {
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp")).result_int(), 201u);
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("cnn")).result_int(), 201u);
  ASSERT_EQ(Send("POST", "/api/v1/functions", beta_key_, Spec("mlp")).result_int(), 201u);

  // A function the node cannot stop keeps the tenant, whose removal can be asked again.
  deployer_.FailUndeploy(Unavailable("the node is busy"));
  auto kept = Send("DELETE", "/api/v1/tenants/alpha", kAdminKey);
  EXPECT_EQ(kept.result_int(), 503u) << kept.body();
  EXPECT_EQ(Names("alpha").size(), 2u);
  EXPECT_EQ(keys_->Authenticate(alpha_key_), "alpha");

  deployer_.FailUndeploy(std::nullopt);
  deployer_.ClearCalls();
  auto removed = Send("DELETE", "/api/v1/tenants/alpha", kAdminKey);
  EXPECT_EQ(removed.result_int(), 204u) << removed.body();
  EXPECT_EQ(deployer_.calls(),
            (std::vector<std::string>{"stop tenant alpha", "remove logs alpha"}));
  EXPECT_FALSE(deployer_.Deployed("alpha", "mlp"));
  EXPECT_FALSE(deployer_.Deployed("alpha", "cnn"));
  EXPECT_TRUE(deployer_.Deployed("beta", "mlp"));
  EXPECT_EQ(registry_->GetTenant("alpha").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(registry_->GetFunction("alpha", "mlp").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Names("beta"), std::vector<std::string>{"mlp"});
  EXPECT_EQ(Send("GET", "/api/v1/functions", alpha_key_).result_int(), 401u);
  EXPECT_EQ(Send("DELETE", "/api/v1/tenants/alpha", kAdminKey).result_int(), 404u);
}

TEST_F(ManagementApiTest, TheAdminManagesAnyTenantsFunctions) {
  const std::string yaml = Spec("mlp");
  auto created = Send("POST", "/api/v1/tenants/alpha/functions", kAdminKey, yaml);
  ASSERT_EQ(created.result_int(), 201u) << created.body();
  EXPECT_EQ(json::parse(created.body())["tenant"], "alpha");
  EXPECT_EQ(StoredSpec("alpha", "mlp"), Canonical(yaml, "alpha"));
  // The tenant sees what the admin made in its namespace.
  EXPECT_EQ(Send("GET", "/api/v1/functions/mlp", alpha_key_).body(), created.body());

  auto listed = Send("GET", "/api/v1/tenants/alpha/functions", kAdminKey);
  EXPECT_EQ(json::parse(listed.body()), json({{"functions", {json::parse(created.body())}}}));
  EXPECT_EQ(Send("GET", "/api/v1/tenants/alpha/functions/mlp", kAdminKey).body(), created.body());
  const std::string new_yaml = Spec("mlp", "slo: 40ms\n");
  auto updated = Send("PUT", "/api/v1/tenants/alpha/functions/mlp", kAdminKey, new_yaml);
  EXPECT_EQ(updated.result_int(), 200u) << updated.body();
  EXPECT_EQ(StoredSpec("alpha", "mlp"), Canonical(new_yaml, "alpha"));
  EXPECT_EQ(CountCalls("admit alpha/mlp by admin"), 2u);
  // Beta's namespace is another: the same name is not there.
  EXPECT_EQ(Send("GET", "/api/v1/tenants/beta/functions/mlp", kAdminKey).result_int(), 404u);
  // A spec naming another tenant than the path's is refused.
  EXPECT_EQ(Send("POST", "/api/v1/tenants/beta/functions", kAdminKey, Spec("x", "tenant: alpha\n"))
                .result_int(),
            400u);
  auto removed = Send("DELETE", "/api/v1/tenants/alpha/functions/mlp", kAdminKey);
  EXPECT_EQ(removed.result_int(), 204u);
  EXPECT_TRUE(Names("alpha").empty());
  EXPECT_FALSE(deployer_.Deployed("alpha", "mlp"));

  // A tenant nobody has.
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/api/v1/tenants/delta/functions"},
           {"POST", "/api/v1/tenants/delta/functions"},
           {"GET", "/api/v1/tenants/delta/functions/mlp"},
           {"PUT", "/api/v1/tenants/delta/functions/mlp"},
           {"DELETE", "/api/v1/tenants/delta/functions/mlp"}}) {
    SCOPED_TRACE(method + " " + target);
    auto answer = Send(method, target, kAdminKey, method == "GET" ? "" : Spec("mlp"));
    EXPECT_EQ(answer.result_int(), 404u) << answer.body();
    EXPECT_EQ(ErrorOf(answer), "tenant 'delta' does not exist");
  }
  EXPECT_EQ(registry_->ListTenants()->size(), 2u);
}

TEST_F(ManagementApiTest, OverTheQuotaIs429AndWritesNothing) {
  Start(250 * kMiB);
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("a", "", "100Mi")).result_int(),
            201u);
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("b", "", "100Mi")).result_int(),
            201u);
  deployer_.ClearCalls();
  auto over = Send("POST", "/api/v1/functions", alpha_key_, Spec("c", "", "60Mi"));
  EXPECT_EQ(over.result_int(), 429u) << over.body();
  EXPECT_NE(ErrorOf(over).find("quota"), std::string::npos) << over.body();
  EXPECT_EQ(Names("alpha"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(CountCalls("deploy"), 0u);
  // Up to the quota exactly is fine; an update counts the function once, with its new size.
  EXPECT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("c", "", "50Mi")).result_int(),
            201u);
  const std::string before = StoredSpec("alpha", "a");
  auto grown = Send("PUT", "/api/v1/functions/a", alpha_key_, Spec("a", "", "101Mi"));
  EXPECT_EQ(grown.result_int(), 429u) << grown.body();
  EXPECT_EQ(StoredSpec("alpha", "a"), before);
  auto shrunk = Send("PUT", "/api/v1/functions/a", alpha_key_, Spec("a", "", "90Mi"));
  EXPECT_EQ(shrunk.result_int(), 200u) << shrunk.body();
  // The quota is per tenant, and the admin is held to it too.
  EXPECT_EQ(Send("POST", "/api/v1/functions", beta_key_, Spec("a", "", "250Mi")).result_int(),
            201u);
  EXPECT_EQ(
      Send("POST", "/api/v1/tenants/beta/functions", kAdminKey, Spec("b", "", "10Mi")).result_int(),
      429u);
  EXPECT_EQ(Names("beta"), std::vector<std::string>{"a"});
}

TEST_F(ManagementApiTest, ATenantsFunctionsAreCounted) {
  Start(0, [](ManagementApiOptions& options) { options.tenant_max_functions = 2; });
  for (const char* name : {"a", "b"}) {
    ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec(name)).result_int(), 201u);
  }
  auto third = Send("POST", "/api/v1/functions", alpha_key_, Spec("c"));
  EXPECT_EQ(third.result_int(), 429u) << third.body();
  EXPECT_EQ(ErrorOf(third),
            "tenant 'alpha' has 2 functions, its limit; delete one before "
            "creating 'c'");
  EXPECT_EQ(Send("PUT", "/api/v1/functions/a", alpha_key_, Spec("a", "", "20Mi")).result_int(),
            200u);
  EXPECT_EQ(Send("POST", "/api/v1/functions", beta_key_, Spec("c")).result_int(), 201u);
  EXPECT_EQ(Send("DELETE", "/api/v1/functions/b", alpha_key_).result_int(), 204u);
  EXPECT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("c")).result_int(), 201u);
}

// A 400 MiB pool between alpha and beta. Alone, alpha may fill it; beta's first deploys take
// beta's share (200 MiB) back from alpha's loans, the most recently changed first (those go
// cold); beyond its share beta borrows only what is left. A third tenant takes its share back
// the same way, and the loans return as the others leave.
TEST_F(ManagementApiTest, TheSnapshotPoolIsSharedFairlyAndLoansAreTakenBack) {
  Start(0, [](ManagementApiOptions& options) { options.snapshot_pool_bytes = 400 * kMiB; });
  for (const char* name : {"a", "b", "c", "d"}) {
    EXPECT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec(name, "", "100Mi")).result_int(),
              201u)
        << name;
  }
  auto over = Send("POST", "/api/v1/functions", alpha_key_, Spec("e", "", "10Mi"));
  EXPECT_EQ(over.result_int(), 429u) << over.body();
  EXPECT_NE(ErrorOf(over).find("snapshot pool"), std::string::npos) << over.body();
  EXPECT_NE(ErrorOf(over).find("400.0 MiB of 400.0 MiB in use"), std::string::npos) << over.body();
  EXPECT_EQ(deployer_.Cold(), std::vector<std::string>{});

  // beta's first function: alpha's last loan (d) goes cold; its second: c too.
  EXPECT_EQ(Send("POST", "/api/v1/functions", beta_key_, Spec("a", "", "100Mi")).result_int(),
            201u);
  EXPECT_EQ(deployer_.Cold(), std::vector<std::string>{"alpha/d"});
  auto d = Send("GET", "/api/v1/functions/d", alpha_key_);
  EXPECT_EQ(nlohmann::json::parse(d.body()).at("kept_warm"), false) << d.body();
  EXPECT_EQ(Send("POST", "/api/v1/functions", beta_key_, Spec("b", "", "100Mi")).result_int(),
            201u);
  EXPECT_EQ(deployer_.Cold(), (std::vector<std::string>{"alpha/c", "alpha/d"}));
  auto a = Send("GET", "/api/v1/functions/a", alpha_key_);
  EXPECT_EQ(nlohmann::json::parse(a.body()).at("kept_warm"), true) << a.body();
  // Beyond their shares, neither borrows what is not left.
  EXPECT_EQ(Send("POST", "/api/v1/functions", beta_key_, Spec("c", "", "100Mi")).result_int(),
            429u);
  EXPECT_EQ(Send("PUT", "/api/v1/functions/a", alpha_key_, Spec("a", "", "250Mi")).result_int(),
            429u);
  EXPECT_EQ(deployer_.Cold(), (std::vector<std::string>{"alpha/c", "alpha/d"}));

  // A third tenant's first function takes its share (133 MiB) back from the loans: beta's b (the
  // newest) and then, of alpha's, a's share no longer holds b; b is lent what is left.
  auto gamma = keys_->AddTenant("gamma");
  ASSERT_TRUE(gamma.ok());
  auto third = Send("POST", "/api/v1/functions", *gamma, Spec("a", "", "100Mi"));
  EXPECT_EQ(third.result_int(), 201u) << third.body();
  EXPECT_EQ(deployer_.Cold(), (std::vector<std::string>{"alpha/c", "alpha/d", "beta/b"}));
  ASSERT_EQ(Send("DELETE", "/api/v1/functions/a", *gamma).result_int(), 204u);
  EXPECT_EQ(deployer_.Cold(), (std::vector<std::string>{"alpha/c", "alpha/d"}));
  ASSERT_TRUE(keys_->RemoveTenant("gamma").ok());

  // With beta gone, alpha's loans come back.
  for (const char* name : {"a", "b"}) {
    ASSERT_EQ(Send("DELETE", "/api/v1/functions/" + std::string(name), beta_key_).result_int(),
              204u);
  }
  EXPECT_EQ(deployer_.Cold(), std::vector<std::string>{});
  EXPECT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("e", "", "10Mi")).result_int(),
            429u);
}

TEST_F(ManagementApiTest, ConcurrentCreatesOfOneNameGiveOneCreated) {
  constexpr int kThreads = 8;
  std::vector<unsigned> statuses(kThreads, 0);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      HttpClientForTest client(server_->port());
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      auto answer = client.Send("POST", "/api/v1/functions", alpha_key_,
                                Spec("mlp", fmt::format("env: {{WHO: \"{}\"}}\n", i)));
      statuses[static_cast<std::size_t>(i)] = answer ? answer->result_int() : 0;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 201u), 1);
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 409u), kThreads - 1);
  EXPECT_EQ(Names("alpha"), std::vector<std::string>{"mlp"});
  // The one created is the one deployed.
  EXPECT_EQ(CountCalls("deploy"), 1u);
  EXPECT_EQ(deployer_.Deployed("alpha", "mlp"), StoredSpec("alpha", "mlp"));
}

TEST_F(ManagementApiTest, ARequestWhoseClientLeftBeforeItsTurnIsNotCarriedOut) {
  std::mutex mutex;
  std::condition_variable changed;
  bool second_arrived = false;
  bool second_cancelled = false;
  observer_ = [&](const net::ServerRequest& request, const net::Responder& responder) {
    if (request.body.find("name: second") == std::string::npos) return;
    responder.OnCancel([&] {
      std::lock_guard lock(mutex);
      second_cancelled = true;
      changed.notify_all();
    });
    std::lock_guard lock(mutex);
    second_arrived = true;
    changed.notify_all();
  };
  // The worker is held in the first create's deploy, so the second waits its turn.
  deployer_.CloseGate();
  unsigned first_status = 0;
  std::thread first([&] {
    HttpClientForTest client(server_->port());
    auto answer = client.Send("POST", "/api/v1/functions", alpha_key_, Spec("first"));
    first_status = answer ? answer->result_int() : 0;
  });
  // Each wait gives up after 30 s (a safety net: the events come at once), so that a failure
  // still opens the gate and joins.
  const bool held = deployer_.WaitUntilHeld();
  HttpClientForTest second(server_->port());
  second.Write(HttpClientForTest::Request("POST", "/api/v1/functions", alpha_key_, Spec("second")));
  bool arrived = false;
  bool cancelled = false;
  {
    std::unique_lock lock(mutex);
    arrived = changed.wait_for(lock, std::chrono::seconds(30), [&] { return second_arrived; });
  }
  second.Close();
  {
    std::unique_lock lock(mutex);
    cancelled = changed.wait_for(lock, std::chrono::seconds(30), [&] { return second_cancelled; });
  }
  deployer_.OpenGate();
  first.join();
  ASSERT_TRUE(held && arrived && cancelled) << held << arrived << cancelled;
  EXPECT_EQ(first_status, 201u);
  // The cancellation ran on the second's connection after the handler had returned, so the second
  // was queued by then; a request queued after it is answered only once the second had its turn.
  auto listed = Send("GET", "/api/v1/functions", alpha_key_);
  ASSERT_EQ(listed.result_int(), 200u);
  EXPECT_EQ(json::parse(listed.body())["functions"].size(), 1u);
  EXPECT_EQ(Names("alpha"), std::vector<std::string>{"first"});
  EXPECT_EQ(CountCalls("admit alpha/second"), 0u);
  EXPECT_EQ(CountCalls("deploy"), 1u);
}

// A create answers once its model is ready, but the worker does not wait for the load: another
// tenant's calls (a create, a list) are answered meanwhile, and the slow create still answers
// with the change's outcome once it settles.
TEST_F(ManagementApiTest, ASlowLoadDelaysNoOtherTenantsCalls) {
  deployer_.HoldSettles("alpha");
  unsigned slow_status = 0;
  std::thread slow([&] {
    HttpClientForTest client(server_->port());
    auto answer = client.Send("POST", "/api/v1/functions", alpha_key_, Spec("big"));
    slow_status = answer ? answer->result_int() : 0;
  });
  const bool held = deployer_.WaitUntilSettleHeld();
  auto other = Send("POST", "/api/v1/functions", beta_key_, Spec("small"));
  auto listed = Send("GET", "/api/v1/functions", beta_key_);
  const unsigned slow_before_release = slow_status;
  deployer_.ReleaseSettles();
  slow.join();
  ASSERT_TRUE(held);
  EXPECT_EQ(other.result_int(), 201u) << other.body();
  EXPECT_EQ(listed.result_int(), 200u);
  EXPECT_EQ(json::parse(listed.body())["functions"].size(), 1u);
  EXPECT_EQ(slow_before_release, 0u);  // not answered while its model loaded
  EXPECT_EQ(slow_status, 201u);
  EXPECT_EQ(Names("alpha"), std::vector<std::string>{"big"});
}

// A deploy that fails when it settles is undone in the registry, after the worker went on.
TEST_F(ManagementApiTest, ADeployThatFailsWhenItSettlesIsUndone) {
  deployer_.HoldSettles("alpha");
  deployer_.FailDeploy(Unavailable("the function exited at start"), 1);
  unsigned status = 0;
  std::thread create([&] {
    HttpClientForTest client(server_->port());
    auto answer = client.Send("POST", "/api/v1/functions", alpha_key_, Spec("crashy"));
    status = answer ? answer->result_int() : 0;
  });
  const bool held = deployer_.WaitUntilSettleHeld();
  EXPECT_EQ(Names("alpha"), std::vector<std::string>{"crashy"});  // written, loading
  deployer_.ReleaseSettles();
  create.join();
  ASSERT_TRUE(held);
  EXPECT_EQ(status, 503u);
  EXPECT_TRUE(Names("alpha").empty());
}

TEST_F(ManagementApiTest, WrongMethodIs405) {
  for (const auto& [method, target, allowed] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"PUT", "/api/v1/functions", "GET, HEAD, POST"},
           {"DELETE", "/api/v1/functions", "GET, HEAD, POST"},
           {"POST", "/api/v1/functions/mlp", "GET, HEAD, PUT, DELETE"},
           {"PATCH", "/api/v1/functions/mlp", "GET, HEAD, PUT, DELETE"},
           {"GET", "/v2/repository/index", "POST"},
           {"GET", "/v2/repository/models/mlp/load", "POST"},
           {"DELETE", "/api/v1/tenants", "GET, HEAD, POST"},
           {"PUT", "/api/v1/tenants/alpha", "GET, HEAD, DELETE"},
           {"GET", "/api/v1/tenants/alpha/keys", "POST"},
           {"DELETE", "/api/v1/tenants/alpha/functions", "GET, HEAD, POST"}}) {
    SCOPED_TRACE(method + " " + target);
    // The method is checked before the key.
    auto answer = Send(method, target, std::nullopt);
    EXPECT_EQ(answer.result_int(), 405u);
    EXPECT_EQ(answer[http::field::allow], allowed);
    EXPECT_FALSE(ErrorOf(answer).starts_with("<"));
  }
}

TEST_F(ManagementApiTest, UnknownPathsAre404) {
  for (const std::string target :
       {"/api", "/api/v1", "/api/v2/functions", "/api/v1/function", "/api/v1/functions/",
        "/api/v1/functions//x", "/api/v1/functions/mlp/more", "/api/v1/tenants/alpha/keys/1",
        "/api/v1/tenants/alpha/other", "/api/v1/tenants/alpha/functions/mlp/x", "/v2/repository",
        "/v2/repository/models", "/v2/repository/models/mlp", "/v2/repository/models/mlp/reload",
        "/v2/repository/index/x"}) {
    SCOPED_TRACE(target);
    auto answer = Send("GET", target, alpha_key_);
    EXPECT_EQ(answer.result_int(), 404u);
    EXPECT_EQ(ErrorOf(answer), "not found");
  }
}

TEST_F(ManagementApiTest, ABodyPastTheLimitIs413) {
  const std::string big =
      Spec("mlp", "model: \"" + std::string(kMaxManagementBodyBytes, 'x') + "\"\n");
  auto answer = Send("POST", "/api/v1/functions", alpha_key_, big);
  EXPECT_EQ(answer.result_int(), 413u);
  EXPECT_FALSE(ErrorOf(answer).starts_with("<"));
  EXPECT_TRUE(Names("alpha").empty());
}

TEST_F(ManagementApiTest, DeployAllDeploysWhatTheRegistryHolds) {
  ASSERT_TRUE(registry_->CreateFunction("alpha", Spec("mlp")).ok());
  ASSERT_TRUE(registry_->CreateFunction("alpha", Spec("cnn")).ok());
  ASSERT_TRUE(registry_->CreateFunction("beta", Spec("mlp")).ok());
  auto deployed = api_->DeployAll();
  ASSERT_TRUE(deployed.ok()) << deployed.status().ToString();
  EXPECT_EQ(*deployed, 3u);
  EXPECT_EQ(deployer_.Deployed("alpha", "cnn"), StoredSpec("alpha", "cnn"));
  EXPECT_EQ(deployer_.Deployed("beta", "mlp"), StoredSpec("beta", "mlp"));

  // A deploy that fails is skipped, not fatal: the others are still tried.
  deployer_.ClearCalls();
  deployer_.FailDeploy(Unavailable("no"));
  auto none = api_->DeployAll();
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, 0u);
  EXPECT_EQ(CountCalls("deploy"), 3u);
}

// DeployAll loads in parallel, at most kParallelLoads at once, and returns once all settled.
TEST_F(ManagementApiTest, DeployAllLoadsInParallelBounded) {
  constexpr int kFunctions = kParallelLoads + 3;
  for (int i = 0; i < kFunctions; ++i) {
    ASSERT_TRUE(registry_->CreateFunction("alpha", Spec(fmt::format("f{}", i))).ok());
  }
  deployer_.HoldSettles("alpha");
  Result<std::size_t> deployed = Internal("not run");
  std::thread all([&] { deployed = api_->DeployAll(); });
  const bool bounded = deployer_.WaitUntilUnsettled(kParallelLoads);
  const std::size_t calls_while_held = CountCalls("deploy");
  deployer_.ReleaseSettles();
  all.join();
  ASSERT_TRUE(bounded);
  EXPECT_EQ(calls_while_held, static_cast<std::size_t>(kParallelLoads));
  ASSERT_TRUE(deployed.ok()) << deployed.status().ToString();
  EXPECT_EQ(*deployed, static_cast<std::size_t>(kFunctions));
}

// Callers take turns at the worker: while it is held in one of alpha's creates and four more of
// alpha's wait, beta's create is carried out right after alpha's next one, not after all four.
TEST_F(ManagementApiTest, TenantsTakeTurnsAtTheWorker) {
  deployer_.CloseGate();
  std::vector<std::thread> callers;
  std::vector<unsigned> statuses(6, 0);
  const auto create = [&](std::size_t slot, const std::string& key, const std::string& name) {
    callers.emplace_back([&, slot, key, name] {
      HttpClientForTest client(server_->port());
      auto answer = client.Send("POST", "/api/v1/functions", key, Spec(name));
      statuses[slot] = answer ? answer->result_int() : 0;
    });
  };
  create(0, alpha_key_, "f0");
  const bool held = deployer_.WaitUntilHeld();
  for (std::size_t i = 1; i <= 4; ++i) create(i, alpha_key_, "f" + std::to_string(i));
  // Each wait is bounded (a safety net: the requests are queued at once).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (api_->queued() < 4 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::yield();
  const std::size_t queued = api_->queued();
  create(5, beta_key_, "g0");
  while (api_->queued() < 5 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::yield();
  deployer_.OpenGate();
  for (std::thread& caller : callers) caller.join();
  ASSERT_TRUE(held);
  ASSERT_EQ(queued, 4u);
  for (const unsigned status : statuses) EXPECT_EQ(status, 201u);
  std::vector<std::string> admits;
  for (const std::string& call : deployer_.calls()) {
    if (call.starts_with("admit ")) admits.push_back(call.substr(6));
  }
  ASSERT_EQ(admits.size(), 6u);
  EXPECT_EQ(admits[0], "alpha/f0");
  EXPECT_TRUE(admits[1].starts_with("alpha/f")) << admits[1];  // f1..f4 queued in any order
  EXPECT_EQ(admits[2], "beta/g0");  // first in, first out would make it the last
}

}  // namespace
}  // namespace gshare::serve

namespace gshare::serve {
namespace {

// SHA-256 of "abc".
constexpr std::string_view kAbcSha256 =
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

TEST_F(ManagementApiTest, ATenantUploadsListsReplacesAndDeletesItsModelFiles) {
  auto created = Send("PUT", "/api/v1/files/nets/abc.pt", alpha_key_, "abc");
  ASSERT_EQ(created.result_int(), 201u) << created.body();
  EXPECT_EQ(json::parse(created.body()),
            json({{"name", "nets/abc.pt"}, {"size", 3}, {"sha256", kAbcSha256}}));
  auto listed = Send("GET", "/api/v1/files", alpha_key_);
  ASSERT_EQ(listed.result_int(), 200u) << listed.body();
  const json list = json::parse(listed.body());
  ASSERT_EQ(list["files"].size(), 1u);
  EXPECT_EQ(list["files"][0]["name"], "nets/abc.pt");
  EXPECT_EQ(list["stored_bytes"], 3);
  EXPECT_EQ(list["storage_bytes"], 20ULL << 30);
  auto replaced = Send("PUT", "/api/v1/files/nets/abc.pt", alpha_key_, "abcd");
  ASSERT_EQ(replaced.result_int(), 200u) << replaced.body();
  EXPECT_EQ(json::parse(replaced.body())["size"], 4);
  auto one = Send("GET", "/api/v1/files/nets/abc.pt", alpha_key_);
  ASSERT_EQ(one.result_int(), 200u) << one.body();
  EXPECT_EQ(json::parse(one.body())["size"], 4);
  // The function's folder is where a spec's relative model_files point.
  std::ifstream stored(data_dir_ / "models" / "alpha" / "nets" / "abc.pt");
  std::string content;
  std::getline(stored, content);
  EXPECT_EQ(content, "abcd");
  // Another tenant sees nothing of it; its own file of that name is its own.
  EXPECT_EQ(Send("GET", "/api/v1/files/nets/abc.pt", beta_key_).result_int(), 404u);
  EXPECT_EQ(json::parse(Send("GET", "/api/v1/files", beta_key_).body())["files"].size(), 0u);
  EXPECT_EQ(Send("DELETE", "/api/v1/files/nets/abc.pt", beta_key_).result_int(), 404u);
  ASSERT_EQ(Send("PUT", "/api/v1/files/nets/abc.pt", beta_key_, "abc").result_int(), 201u);
  EXPECT_EQ(Send("DELETE", "/api/v1/files/nets/abc.pt", alpha_key_).result_int(), 204u);
  EXPECT_EQ(Send("GET", "/api/v1/files/nets/abc.pt", alpha_key_).result_int(), 404u);
  EXPECT_EQ(Send("GET", "/api/v1/files/nets/abc.pt", beta_key_).result_int(), 200u);
}

TEST_F(ManagementApiTest, TheAdminReachesATenantsFilesAtItsPathOnly) {
  auto put = Send("PUT", "/api/v1/tenants/alpha/files/m.pt", kAdminKey, "abc");
  ASSERT_EQ(put.result_int(), 201u) << put.body();
  EXPECT_EQ(Send("GET", "/api/v1/files/m.pt", alpha_key_).result_int(), 200u);
  EXPECT_EQ(Send("GET", "/api/v1/tenants/alpha/files", kAdminKey).result_int(), 200u);
  EXPECT_EQ(Send("GET", "/api/v1/files", kAdminKey).result_int(), 403u);
  EXPECT_EQ(Send("GET", "/api/v1/tenants/alpha/files", alpha_key_).result_int(), 403u);
  EXPECT_EQ(Send("PUT", "/api/v1/tenants/nobody/files/m.pt", kAdminKey, "abc").result_int(), 404u);
  EXPECT_FALSE(std::filesystem::exists(data_dir_ / "models" / "nobody"));
  EXPECT_EQ(Send("DELETE", "/api/v1/tenants/alpha/files/m.pt", kAdminKey).result_int(), 204u);
}

TEST_F(ManagementApiTest, AFileAFunctionNamesIsNeitherReplacedNorDeleted) {
  ASSERT_EQ(Send("PUT", "/api/v1/files/w.bin", alpha_key_, "abc").result_int(), 201u);
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp", "model_files: [w.bin]\n"))
                .result_int(),
            201u);
  auto replaced = Send("PUT", "/api/v1/files/w.bin", alpha_key_, "other");
  EXPECT_EQ(replaced.result_int(), 409u) << replaced.body();
  EXPECT_NE(replaced.body().find("mlp"), std::string::npos) << replaced.body();
  auto deleted = Send("DELETE", "/api/v1/files/w.bin", alpha_key_);
  EXPECT_EQ(deleted.result_int(), 409u) << deleted.body();
  EXPECT_EQ(json::parse(Send("GET", "/api/v1/files/w.bin", alpha_key_).body())["sha256"],
            kAbcSha256);
  EXPECT_EQ(Send("DELETE", "/api/v1/functions/mlp", alpha_key_).result_int(), 204u);
  EXPECT_EQ(Send("DELETE", "/api/v1/files/w.bin", alpha_key_).result_int(), 204u);
  EXPECT_TRUE(std::filesystem::is_empty(data_dir_ / "uploads"));
}

TEST_F(ManagementApiTest, BadNamesOversizedFilesAndTheQuotaKeepNothing) {
  OpenFiles(10, 8);
  Start(0);
  for (const std::string_view target : {"/api/v1/files/../x", "/api/v1/files/.hidden",
                                        "/api/v1/files/a%2Fb", "/api/v1/files/a/./b"}) {
    client_.emplace(server_->port());  // a refused upload's connection is closed
    auto refused = Send("PUT", target, alpha_key_, "abc");
    EXPECT_EQ(refused.result_int(), 400u) << target << ": " << refused.body();
  }
  client_.emplace(server_->port());
  auto large = Send("PUT", "/api/v1/files/big", alpha_key_, "012345678");
  EXPECT_EQ(large.result_int(), 413u) << large.body();
  client_.emplace(server_->port());  // the refusal closed the connection
  ASSERT_EQ(Send("PUT", "/api/v1/files/a", alpha_key_, "0123456").result_int(), 201u);
  auto over = Send("PUT", "/api/v1/files/b", alpha_key_, "0123");
  EXPECT_EQ(over.result_int(), 429u) << over.body();
  client_.emplace(server_->port());
  EXPECT_EQ(Send("PUT", "/api/v1/files/a", alpha_key_, "01234567").result_int(), 200u);
  auto keyless = Send("PUT", "/api/v1/files/c", std::nullopt, "abc");
  EXPECT_EQ(keyless.result_int(), 401u);
  client_.emplace(server_->port());
  const json list = json::parse(Send("GET", "/api/v1/files", alpha_key_).body());
  ASSERT_EQ(list["files"].size(), 1u);
  EXPECT_EQ(list["files"][0]["name"], "a");
  EXPECT_TRUE(std::filesystem::is_empty(data_dir_ / "uploads"));
}

TEST_F(ManagementApiTest, RemovingATenantRemovesItsFiles) {
  ASSERT_EQ(Send("PUT", "/api/v1/files/m.pt", alpha_key_, "abc").result_int(), 201u);
  EXPECT_EQ(Send("DELETE", "/api/v1/tenants/alpha", kAdminKey).result_int(), 204u);
  EXPECT_FALSE(std::filesystem::exists(data_dir_ / "models" / "alpha"));
  EXPECT_FALSE(std::filesystem::exists(data_dir_ / "digests" / "alpha"));
}

TEST_F(ManagementApiTest, ATenantReadsItsOwnFunctionsLogAndNoOthers) {
  ASSERT_EQ(Send("POST", "/api/v1/functions", alpha_key_, Spec("mlp")).result_int(), 201u);
  auto log = Send("GET", "/api/v1/functions/mlp/logs", alpha_key_);
  ASSERT_EQ(log.result_int(), 200u) << log.body();
  EXPECT_EQ(log[http::field::content_type], "text/plain; charset=utf-8");
  EXPECT_EQ(log.body(),
            "alpha/mlp line 1\nalpha/mlp line 2\nalpha/mlp line 3\nalpha/mlp line 4\n"
            "alpha/mlp line 5\n");
  EXPECT_EQ(Send("GET", "/api/v1/functions/mlp/logs?tail=2", alpha_key_).body(),
            "alpha/mlp line 4\nalpha/mlp line 5\n");
  EXPECT_EQ(Send("GET", "/api/v1/tenants/alpha/functions/mlp/logs?x=1&tail=1", kAdminKey).body(),
            "alpha/mlp line 5\n");
  for (const std::string_view bad : {"tail=0", "tail=abc", "tail=10001", "tail=", "tail=-1"}) {
    auto refused = Send("GET", fmt::format("/api/v1/functions/mlp/logs?{}", bad), alpha_key_);
    EXPECT_EQ(refused.result_int(), 400u) << bad;
  }
  // Another tenant's function is answered as an unknown one, byte for byte.
  auto other = Send("GET", "/api/v1/functions/mlp/logs", beta_key_);
  auto unknown = Send("GET", "/api/v1/functions/nosuch/logs", beta_key_);
  EXPECT_EQ(other.result_int(), 404u);
  EXPECT_EQ(ErrorOf(other), "function 'mlp' not found");
  EXPECT_EQ(Send("GET", "/api/v1/functions/mlp", beta_key_).body(), other.body());
  EXPECT_EQ(unknown.result_int(), 404u);
  EXPECT_EQ(Send("POST", "/api/v1/functions/mlp/logs", alpha_key_).result_int(), 405u);
}

}  // namespace
}  // namespace gshare::serve
