// The gRPC service end to end: a server on free ports with real function processes, called with
// the generated C++ client, as a tritonclient.grpc user would.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <map>
#include <sstream>

#include <cstring>
#include <nlohmann/json.hpp>

#include "gshare/protocol/grpc/inference.grpc.pb.h"
#include "gshare/serve/grpc/grpc_server.h"
#include "gshare/serve/http_client_for_test.h"
#include "gshare/serve/server.h"
#include "gshare/serve/temp_dir_for_test.h"

namespace gshare::serve {
namespace {

using inference::GRPCInferenceService;

constexpr std::string_view kAdminKey = "test-admin-key-0123456789";
constexpr std::string_view kEchoSpec = R"(name: echo
model_size: 1Mi
gpu_memory: 8Mi
exec_latency: 1ms
slo: 5s
max_batch: 8
runtime: echo
timeout: 10s
inputs: [{name: x, datatype: FP32, shape: [-1, 3]}]
outputs: [{name: output, datatype: FP32, shape: [-1, 3]}]
)";

class GrpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::chmod(dir_.path().c_str(), 0711);
    ServerOptions options;
    options.data_dir = dir_.path() / "data";
    options.admin_key = std::string(kAdminKey);
    options.http.port = 0;
    options.http.io_threads = 2;
    options.grpc_listen = "127.0.0.1:0";
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
    options.uid_ledger = dir_.path() / "uid-ranges";
    auto server = Server::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    ASSERT_GT(server_->grpc_port(), 0);
    http_ = std::make_unique<HttpClientForTest>(server_->port());
    stub_ = GRPCInferenceService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->grpc_port()), grpc::InsecureChannelCredentials()));
    acme_ = AddTenant("acme");
    beta_ = AddTenant("beta");
    auto deployed = http_->Send("POST", "/api/v1/functions", acme_, kEchoSpec);
    ASSERT_TRUE(deployed);
    ASSERT_EQ(deployed->result_int(), 201) << deployed->body();
    auto settled = server_->backend().WaitUntilSettled("acme", "echo", std::chrono::seconds(60));
    ASSERT_TRUE(settled.ok());
    ASSERT_EQ(settled->state, ModelState::kReady) << settled->reason;
  }

  std::string AddTenant(std::string_view name) {
    auto response =
        http_->Send("POST", "/api/v1/tenants", kAdminKey, nlohmann::json{{"name", name}}.dump());
    EXPECT_TRUE(response && response->result_int() == 201);
    return nlohmann::json::parse(response->body()).value("key", "");
  }

  static void Authorize(grpc::ClientContext& context, const std::string& key) {
    context.AddMetadata("authorization", "Bearer " + key);
  }

  static inference::ModelInferRequest EchoRequest(std::string id, std::vector<float> row) {
    inference::ModelInferRequest request;
    request.set_model_name("echo");
    request.set_id(std::move(id));
    auto* input = request.add_inputs();
    input->set_name("x");
    input->set_datatype("FP32");
    input->add_shape(1);
    input->add_shape(static_cast<std::int64_t>(row.size()));
    request.add_raw_input_contents(
        std::string(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float)));
    return request;
  }

  TempDirForTest dir_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<HttpClientForTest> http_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
  std::string acme_;
  std::string beta_;
};

TEST_F(GrpcServerTest, HealthMetadataAndInference) {
  {
    grpc::ClientContext context;
    inference::ServerLiveResponse live;
    ASSERT_TRUE(stub_->ServerLive(&context, {}, &live).ok());
    EXPECT_TRUE(live.live());
  }
  {
    grpc::ClientContext context;
    inference::ServerReadyResponse ready;
    ASSERT_TRUE(stub_->ServerReady(&context, {}, &ready).ok());
    EXPECT_TRUE(ready.ready());
  }
  {
    grpc::ClientContext context;
    Authorize(context, acme_);
    inference::ServerMetadataResponse metadata;
    ASSERT_TRUE(stub_->ServerMetadata(&context, {}, &metadata).ok());
    EXPECT_EQ(metadata.name(), "gshare");
  }
  {
    grpc::ClientContext context;
    Authorize(context, acme_);
    inference::ModelMetadataRequest request;
    request.set_name("echo");
    inference::ModelMetadataResponse metadata;
    ASSERT_TRUE(stub_->ModelMetadata(&context, request, &metadata).ok());
    ASSERT_EQ(metadata.inputs_size(), 1);
    EXPECT_EQ(metadata.inputs(0).name(), "x");
    EXPECT_EQ(metadata.inputs(0).datatype(), "FP32");
    EXPECT_EQ(std::vector<std::int64_t>(metadata.inputs(0).shape().begin(),
                                        metadata.inputs(0).shape().end()),
              (std::vector<std::int64_t>{-1, 3}));
  }
  {
    grpc::ClientContext context;
    Authorize(context, acme_);
    inference::ModelConfigRequest request;
    request.set_name("echo");
    inference::ModelConfigResponse config;
    ASSERT_TRUE(stub_->ModelConfig(&context, request, &config).ok());
    EXPECT_EQ(config.config().max_batch_size(), 8);
    ASSERT_EQ(config.config().input_size(), 1);
    EXPECT_EQ(config.config().input(0).data_type(), inference::TYPE_FP32);
  }
  // Raw contents in, raw contents out: the echo of the row.
  const std::vector<float> row = {1.5f, -2.0f, 3.25f};
  {
    grpc::ClientContext context;
    Authorize(context, acme_);
    inference::ModelInferResponse response;
    const grpc::Status status = stub_->ModelInfer(&context, EchoRequest("g1", row), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.id(), "g1");
    EXPECT_EQ(response.model_name(), "echo");
    EXPECT_EQ(response.model_version(), "1");
    ASSERT_EQ(response.outputs_size(), 1);
    EXPECT_EQ(response.outputs(0).name(), "output");
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_EQ(response.raw_output_contents(0),
              std::string(reinterpret_cast<const char*>(row.data()), sizeof(float) * 3));
  }
  // Typed contents in.
  {
    inference::ModelInferRequest request;
    request.set_model_name("echo");
    auto* input = request.add_inputs();
    input->set_name("x");
    input->set_datatype("FP32");
    input->add_shape(1);
    input->add_shape(3);
    for (float v : row) input->mutable_contents()->add_fp32_contents(v);
    grpc::ClientContext context;
    Authorize(context, acme_);
    inference::ModelInferResponse response;
    ASSERT_TRUE(stub_->ModelInfer(&context, request, &response).ok());
    float back[3];
    ASSERT_EQ(response.raw_output_contents(0).size(), sizeof(back));
    std::memcpy(back, response.raw_output_contents(0).data(), sizeof(back));
    EXPECT_EQ(std::vector<float>(back, back + 3), row);
  }
  {
    grpc::ClientContext context;
    Authorize(context, acme_);
    inference::ModelStatisticsRequest request;
    request.set_name("echo");
    inference::ModelStatisticsResponse statistics;
    ASSERT_TRUE(stub_->ModelStatistics(&context, request, &statistics).ok());
    ASSERT_EQ(statistics.model_stats_size(), 1);
    EXPECT_EQ(statistics.model_stats(0).inference_stats().success().count(), 2u);
  }
}

// /metrics counts the inference answers by protocol and status, refusals before the body too.
TEST_F(GrpcServerTest, InferenceAnswersAreCountedByProtocol) {
  const std::string body =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]})";
  for (int i = 0; i < 2; ++i) {
    auto answer = http_->Send("POST", "/v2/models/echo/infer", acme_, body);
    ASSERT_TRUE(answer);
    ASSERT_EQ(answer->result_int(), 200) << answer->body();
  }
  HttpClientForTest other(server_->port());  // a refused request may end its connection
  auto keyless = other.Send("POST", "/v2/models/echo/infer", std::nullopt, body);
  ASSERT_TRUE(keyless);
  ASSERT_EQ(keyless->result_int(), 401);
  auto metadata = http_->Send("GET", "/v2/models/echo", acme_);  // not an inference
  ASSERT_TRUE(metadata);
  ASSERT_EQ(metadata->result_int(), 200);
  {
    grpc::ClientContext context;
    Authorize(context, acme_);
    inference::ModelInferResponse response;
    ASSERT_TRUE(stub_->ModelInfer(&context, EchoRequest("g", {1, 2, 3}), &response).ok());
  }
  {
    grpc::ClientContext context;
    Authorize(context, beta_);
    inference::ModelInferResponse response;
    EXPECT_EQ(stub_->ModelInfer(&context, EchoRequest("g", {1, 2, 3}), &response).error_code(),
              grpc::NOT_FOUND);
  }
  auto metrics = http_->Send("GET", "/metrics", kAdminKey);
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->result_int(), 200);
  std::map<std::string, std::string> counted;  // labels -> value
  std::istringstream lines(metrics->body());
  const std::string name = "gshare_inference_answers_total{";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0) continue;
    const std::size_t close = line.find('}');
    counted[line.substr(name.size(), close - name.size())] = line.substr(close + 2);
  }
  const std::map<std::string, std::string> expected = {{R"(protocol="http",code="200")", "2"},
                                                       {R"(protocol="http",code="401")", "1"},
                                                       {R"(protocol="grpc",code="200")", "1"},
                                                       {R"(protocol="grpc",code="404")", "1"}};
  EXPECT_EQ(counted, expected) << metrics->body();
}

TEST_F(GrpcServerTest, ErrorsMapToTheirStatusesAndTenantsStayApart) {
  const auto infer = [this](const std::string& key, inference::ModelInferRequest request) {
    grpc::ClientContext context;
    if (!key.empty()) Authorize(context, key);
    inference::ModelInferResponse response;
    return stub_->ModelInfer(&context, request, &response);
  };
  const grpc::Status keyless = infer("", EchoRequest("a", {1, 2, 3}));
  EXPECT_EQ(keyless.error_code(), grpc::UNAUTHENTICATED);
  EXPECT_EQ(infer("wrong-key", EchoRequest("a", {1, 2, 3})).error_code(), grpc::UNAUTHENTICATED);
  // Another tenant's model answers exactly as a name nobody has.
  const grpc::Status other = infer(beta_, EchoRequest("a", {1, 2, 3}));
  inference::ModelInferRequest unknown_request = EchoRequest("a", {1, 2, 3});
  unknown_request.set_model_name("nothing");
  const grpc::Status unknown = infer(beta_, unknown_request);
  EXPECT_EQ(other.error_code(), grpc::NOT_FOUND);
  EXPECT_EQ(unknown.error_code(), grpc::NOT_FOUND);
  EXPECT_EQ(other.error_message(), "model 'echo' not found");
  EXPECT_EQ(unknown.error_message(), "model 'nothing' not found");
  // A tensor the model does not take: refused before it is queued, naming it.
  const grpc::Status shape = infer(acme_, EchoRequest("a", {1, 2}));
  EXPECT_EQ(shape.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(shape.error_message(),
            "model 'echo': input 'x' has shape [1,2]; the model takes [-1,3]");
  inference::ModelInferRequest short_raw = EchoRequest("a", {1, 2, 3});
  short_raw.set_raw_input_contents(0, "abc");
  EXPECT_EQ(infer(acme_, short_raw).error_code(), grpc::INVALID_ARGUMENT);
  inference::ModelInferRequest version = EchoRequest("a", {1, 2, 3});
  version.set_model_version("2");
  const grpc::Status no_version = infer(acme_, version);
  EXPECT_EQ(no_version.error_code(), grpc::NOT_FOUND);
  EXPECT_EQ(no_version.error_message(), "model 'echo' has no version '2'");
  inference::ModelInferRequest slash = EchoRequest("a", {1, 2, 3});
  slash.set_model_name("../echo");
  EXPECT_EQ(infer(acme_, slash).error_code(), grpc::NOT_FOUND);
  // Metadata of another tenant's model: the same.
  grpc::ClientContext context;
  Authorize(context, beta_);
  inference::ModelMetadataRequest request;
  request.set_name("echo");
  inference::ModelMetadataResponse metadata;
  EXPECT_EQ(stub_->ModelMetadata(&context, request, &metadata).error_code(), grpc::NOT_FOUND);
}

TEST_F(GrpcServerTest, AStreamAnswersEveryRequest) {
  grpc::ClientContext context;
  Authorize(context, acme_);
  auto stream = stub_->ModelStreamInfer(&context);
  constexpr int kRequests = 20;
  for (int i = 0; i < kRequests; ++i) {
    auto request = EchoRequest("s" + std::to_string(i), {float(i), 0, 1});
    if (i == 7) request.mutable_inputs(0)->set_datatype("INT32");  // fails alone
    ASSERT_TRUE(stream->Write(request));
  }
  ASSERT_TRUE(stream->WritesDone());
  std::map<std::string, float> answers;
  int errors = 0;
  inference::ModelStreamInferResponse answer;
  while (stream->Read(&answer)) {
    if (!answer.error_message().empty()) {
      ++errors;
      EXPECT_EQ(answer.error_message(), "model 'echo': input 'x' is INT32; the model takes FP32");
      EXPECT_EQ(answer.infer_response().id(), "s7");  // which request failed
      continue;
    }
    float first = 0;
    ASSERT_EQ(answer.infer_response().raw_output_contents(0).size(), 3 * sizeof(float));
    std::memcpy(&first, answer.infer_response().raw_output_contents(0).data(), sizeof(float));
    answers[answer.infer_response().id()] = first;
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(errors, 1);
  ASSERT_EQ(answers.size(), static_cast<std::size_t>(kRequests - 1));
  for (int i = 0; i < kRequests; ++i) {
    if (i == 7) continue;
    EXPECT_EQ(answers.at("s" + std::to_string(i)), float(i));
  }
}

// A client that cancels its stream with requests in flight, three times: each stream ends, and
// the server serves the tenant on.
TEST_F(GrpcServerTest, ACancelledStreamEndsAndTheServerServesOn) {
  for (int round = 0; round < 3; ++round) {
    grpc::ClientContext context;
    Authorize(context, acme_);
    auto stream = stub_->ModelStreamInfer(&context);
    for (int i = 0; i < 30; ++i) {
      if (!stream->Write(EchoRequest("c" + std::to_string(i), {1, 2, 3}))) break;
    }
    context.TryCancel();
    inference::ModelStreamInferResponse answer;
    while (stream->Read(&answer)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::CANCELLED);
  }
  grpc::ClientContext context;
  Authorize(context, acme_);
  inference::ModelInferResponse response;
  const grpc::Status status =
      stub_->ModelInfer(&context, EchoRequest("after", {1, 2, 3}), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.id(), "after");
}

TEST_F(GrpcServerTest, RepositoryCallsManageTheTenantsOwnModels) {
  const auto ready = [this](const std::string& key) {
    grpc::ClientContext context;
    Authorize(context, key);
    inference::ModelReadyRequest request;
    request.set_name("echo");
    inference::ModelReadyResponse response;
    const grpc::Status status = stub_->ModelReady(&context, request, &response);
    return status.ok() ? std::optional<bool>(response.ready()) : std::nullopt;
  };
  EXPECT_EQ(ready(acme_), true);
  EXPECT_EQ(ready(beta_), std::nullopt);  // not beta's
  {
    grpc::ClientContext context;
    Authorize(context, acme_);
    inference::RepositoryIndexResponse index;
    ASSERT_TRUE(stub_->RepositoryIndex(&context, {}, &index).ok());
    ASSERT_EQ(index.models_size(), 1);
    EXPECT_EQ(index.models(0).name(), "echo");
    EXPECT_EQ(index.models(0).state(), "READY");
  }
  {
    grpc::ClientContext context;
    Authorize(context, acme_);
    inference::RepositoryModelUnloadRequest request;
    request.set_model_name("echo");
    (*request.mutable_parameters())["unload_dependents"].set_bool_param(false);
    inference::RepositoryModelUnloadResponse response;
    const grpc::Status status = stub_->RepositoryModelUnload(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(ready(acme_), false);
  {
    grpc::ClientContext context;
    Authorize(context, acme_);
    inference::RepositoryModelLoadRequest request;
    request.set_model_name("echo");
    inference::RepositoryModelLoadResponse response;
    const grpc::Status status = stub_->RepositoryModelLoad(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(ready(acme_), true);  // load answers once the model is ready
  {
    grpc::ClientContext context;
    Authorize(context, beta_);
    inference::RepositoryModelLoadRequest request;
    request.set_model_name("echo");
    inference::RepositoryModelLoadResponse response;
    EXPECT_EQ(stub_->RepositoryModelLoad(&context, request, &response).error_code(),
              grpc::NOT_FOUND);
  }
}

// Nothing behind a front: for a service that is not to serve.
class NoKeys final : public Authenticator {
 public:
  std::optional<std::string> Authenticate(std::string_view) const override { return std::nullopt; }
};
class NoModels final : public InferenceBackend {
 public:
  bool Ready() const override { return false; }
  std::optional<ModelInfo> FindModel(std::string_view, std::string_view) const override {
    return std::nullopt;
  }
  std::uint64_t Infer(std::string_view, std::string_view, InferRequest, TimePoint,
                      InferCallback done) override {
    done(Unavailable("none"));
    return 0;
  }
  void Cancel(std::uint64_t) override {}
};

TEST_F(GrpcServerTest, ATakenAddressIsNamed) {
  const std::string taken = "127.0.0.1:" + std::to_string(server_->grpc_port());
  NoKeys keys;
  NoModels models;
  ManualClock clock;
  Front front({}, keys, models, clock);
  GrpcServerOptions options;
  options.listen = taken;
  auto second = GrpcServer::Start(options, front, [](net::ServerRequest, net::Responder) {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(taken), std::string::npos);
}

}  // namespace
}  // namespace gshare::serve
