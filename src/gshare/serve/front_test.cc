#include "gshare/serve/front.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <boost/beast/http.hpp>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "gshare/serve/api_keys.h"
#include "gshare/serve/http_client_for_test.h"
#include "gshare/serve/registry.h"
#include "gshare/serve/temp_dir_for_test.h"

namespace gshare::serve {
namespace {

namespace http = boost::beast::http;
using Client = HttpClientForTest;
using nlohmann::json;

constexpr std::string_view kAlphaKey = "alpha-key";
constexpr std::string_view kBetaKey = "beta-key";
const TimePoint kNow{std::chrono::seconds(1000)};

// The front's clock, standing at kNow.
struct FixedClock {
  FixedClock() { clock.AdvanceTo(kNow); }
  operator const Clock&() const { return clock; }
  ManualClock clock;
};

class MapAuthenticator final : public Authenticator {
 public:
  std::optional<std::string> Authenticate(std::string_view key) const override {
    if (key == kAlphaKey) return "alpha";
    if (key == kBetaKey) return "beta";
    return std::nullopt;
  }
};

// Models by tenant and name. Infer echoes the inputs as outputs; with a "code" parameter it fails
// with that StatusCode instead; with "nan" it answers an FP32 NaN (which JSON cannot carry); a
// model named "later" answers from a thread of its own, after Infer has returned.
class FakeBackend final : public InferenceBackend {
 public:
  ~FakeBackend() override { JoinThreads(); }

  void Add(std::string tenant, ModelInfo model) {
    std::lock_guard lock(mutex_);
    models_[{std::move(tenant), model.name}] = std::move(model);
  }
  void Remove(const std::string& tenant, const std::string& name) {
    std::lock_guard lock(mutex_);
    models_.erase({tenant, name});
  }
  void SetReady(bool ready) {
    std::lock_guard lock(mutex_);
    ready_ = ready;
  }
  void JoinThreads() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      threads.swap(threads_);
    }
    for (std::thread& thread : threads) thread.join();
  }

  struct Call {
    std::string tenant;
    std::string model;
    InferRequest request;
    TimePoint deadline;
  };
  std::vector<Call> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }

  bool Ready() const override {
    std::lock_guard lock(mutex_);
    return ready_;
  }
  std::optional<ModelInfo> FindModel(std::string_view tenant,
                                     std::string_view name) const override {
    std::lock_guard lock(mutex_);
    auto it = models_.find({std::string(tenant), std::string(name)});
    if (it == models_.end()) return std::nullopt;
    return it->second;
  }
  std::uint64_t Infer(std::string_view tenant, std::string_view model, InferRequest request,
                      TimePoint deadline, InferCallback done) override {
    Result<InferResponse> result = Run(request);
    std::lock_guard lock(mutex_);
    calls_.push_back({std::string(tenant), std::string(model), std::move(request), deadline});
    if (model == "held") {
      held_.push_back([done = std::move(done), result = std::move(result)]() mutable {
        done(AnswerOf(std::move(result)));
      });
      held_changed_.notify_all();
      return calls_.size();
    }
    if (model == "encoded" || model == "malformed") {
      // From a thread of its own, still encoded: the decoder notes the thread it runs on.
      threads_.emplace_back([this, done = std::move(done), result = std::move(result),
                             malformed = model == "malformed"]() mutable {
        {
          std::lock_guard noted(mutex_);
          answered_on_ = std::this_thread::get_id();
        }
        if (!result.ok()) return done(result.status());
        auto decoded = std::make_shared<InferResponse>(std::move(result).value());
        done(InferAnswer(64, [this, decoded, malformed]() -> Result<InferResponse> {
          {
            std::lock_guard noted(mutex_);
            decoded_on_ = std::this_thread::get_id();
          }
          if (malformed) return InvalidArgument("a length past its body");
          return *decoded;
        }));
      });
      return calls_.size();
    }
    if (model == "later") {
      threads_.emplace_back([done = std::move(done), result = std::move(result)]() mutable {
        done(AnswerOf(std::move(result)));
      });
      return calls_.size();
    }
    done(AnswerOf(std::move(result)));
    return calls_.size();
  }
  void Cancel(std::uint64_t ticket) override {
    std::lock_guard lock(mutex_);
    cancelled_.push_back(ticket);
    held_changed_.notify_all();
  }
  // Blocks until `count` requests were cancelled.
  void WaitUntilCancelled(std::size_t count) {
    std::unique_lock lock(mutex_);
    held_changed_.wait(lock, [&] { return cancelled_.size() >= count; });
  }
  // The threads that gave the last encoded answer and that decoded it.
  std::pair<std::thread::id, std::thread::id> EncodedThreads() const {
    std::lock_guard lock(mutex_);
    return {answered_on_, decoded_on_};
  }
  // Requests to a model named "held" wait, unanswered, until Answer.
  void WaitUntilHeld(std::size_t count) {
    std::unique_lock lock(mutex_);
    held_changed_.wait(lock, [&] { return held_.size() >= count; });
  }
  void AnswerHeld() {
    std::vector<std::function<void()>> held;
    {
      std::lock_guard lock(mutex_);
      held.swap(held_);
    }
    for (auto& answer : held) answer();
  }

 private:
  static Result<InferResponse> Run(const InferRequest& request) {
    if (request.parameters && request.parameters->contains("code")) {
      const auto code = static_cast<StatusCode>(request.parameters->at("code").get<int>());
      return Status(code, "the backend says no");
    }
    InferResponse response;
    response.model_name = "whatever the backend says";
    response.id = "not the request's";
    if (request.parameters && request.parameters->contains("nan")) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      auto tensor = Tensor::FromValues<float>("y", {1}, std::span<const float>(&nan, 1));
      if (!tensor.ok()) return tensor.status();
      response.outputs.push_back(std::move(tensor).value());
      return response;
    }
    response.outputs = request.inputs;
    return response;
  }

  mutable std::mutex mutex_;
  bool ready_ = true;
  std::map<std::pair<std::string, std::string>, ModelInfo> models_;
  std::vector<Call> calls_;
  std::vector<std::uint64_t> cancelled_;
  std::vector<std::thread> threads_;
  std::vector<std::function<void()>> held_;
  std::condition_variable held_changed_;
  std::thread::id answered_on_;
  std::thread::id decoded_on_;
};

constexpr std::string_view kEchoRequest = R"({
  "id": "request-42",
  "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 2], "data": [1, 2, 3, 4]}]
})";

class FrontTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelInfo mlp{.name = "mlp",
                  .ready = true,
                  .slo = std::chrono::milliseconds(250),
                  .platform = "gshare_echo",
                  .inputs = {{"x", DataType::kFp32, {-1, 2}}},
                  .outputs = {{"y", DataType::kFp32, {-1, 2}}}};
    backend_.Add("alpha", mlp);
    backend_.Add("alpha", {.name = "later", .ready = true, .slo = std::chrono::seconds(1)});
    backend_.Add("alpha", {.name = "encoded", .ready = true, .slo = std::chrono::seconds(1)});
    backend_.Add("alpha", {.name = "malformed", .ready = true, .slo = std::chrono::seconds(1)});
    backend_.Add("alpha", {.name = "cold", .ready = false, .slo = std::chrono::seconds(1)});
    backend_.Add("alpha", {.name = "private", .ready = true, .slo = std::chrono::seconds(1)});
    Start({}, {});
  }
  void TearDown() override {
    backend_.JoinThreads();
    server_.reset();
  }

  void Start(net::HttpServerLimits limits, FrontOptions options) {
    server_.reset();
    front_ = std::make_unique<Front>(std::move(options), authenticator_, backend_, clock_);
    net::HttpServerOptions server_options;
    server_options.host = "127.0.0.1";
    server_options.port = 0;
    server_options.io_threads = 2;
    server_options.limits = limits;
    auto server = net::HttpServer::Start(std::move(server_options), front_->Handler());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }

  Client Connect() { return Client(server_->port()); }

  FixedClock clock_;
  MapAuthenticator authenticator_;
  FakeBackend backend_;
  std::unique_ptr<Front> front_;
  std::unique_ptr<net::HttpServer> server_;
};

TEST_F(FrontTest, HealthNeedsNoKey) {
  Client client = Connect();
  auto live = client.Send("GET", "/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->result_int(), 200u);
  EXPECT_EQ(json::parse(live->body()), json({{"live", true}}));
  auto ready = client.Send("GET", "/v2/health/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->result_int(), 200u);
  EXPECT_EQ(json::parse(ready->body()), json({{"ready", true}}));
  auto head = client.Send("HEAD", "/v2/health/live");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->result_int(), 200u);

  backend_.SetReady(false);
  auto not_ready = client.Send("GET", "/v2/health/ready");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->result_int(), 503u);
  EXPECT_EQ(ErrorOf(*not_ready), "the server is not ready");
  auto still_live = client.Send("GET", "/v2/health/live");
  ASSERT_TRUE(still_live);
  EXPECT_EQ(still_live->result_int(), 200u);
}

TEST_F(FrontTest, ServerMetadata) {
  Client client = Connect();
  auto answer = client.Send("GET", "/v2", kAlphaKey);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 200u);
  EXPECT_EQ((*answer)[http::field::content_type], "application/json");
  const json body = json::parse(answer->body());
  EXPECT_EQ(body["name"], "gshare");
  ASSERT_TRUE(body["version"].is_string());
  EXPECT_FALSE(body["version"].get<std::string>().empty());
  EXPECT_EQ(body["extensions"], json::array({"binary_tensor_data"}));

  Start({}, {.server_name = "edge", .server_version = "9.9"});
  Client other = Connect();
  auto named = other.Send("GET", "/v2?verbose=1", kBetaKey);
  ASSERT_TRUE(named);
  EXPECT_EQ(json::parse(named->body())["name"], "edge");
  EXPECT_EQ(json::parse(named->body())["version"], "9.9");
}

TEST_F(FrontTest, EverythingButHealthNeedsAKey) {
  Client client = Connect();
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v2"},
           {"GET", "/v2/models/mlp"},
           {"GET", "/v2/models/mlp/versions/1"},
           {"GET", "/v2/models/mlp/ready"},
           {"GET", "/v2/models/nosuch/ready"},
           {"POST", "/v2/models/mlp/infer"},
           {"POST", "/v2/models/mlp/versions/1/infer"}}) {
    SCOPED_TRACE(method + " " + target);
    const std::string body = method == "POST" ? std::string(kEchoRequest) : "";
    auto missing = client.Send(method, target, std::nullopt, body);
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->result_int(), 401u);
    EXPECT_EQ((*missing)[http::field::www_authenticate], "Bearer");
    EXPECT_NE(ErrorOf(*missing).find("API key"), std::string::npos);

    auto wrong = client.Send(method, target, "not-a-key", body);
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->result_int(), 401u);
    EXPECT_TRUE((*wrong)[http::field::www_authenticate].starts_with("Bearer"));
    EXPECT_EQ(ErrorOf(*wrong), "the API key is not valid");
  }
  // Another scheme, or Bearer with no token, is no key.
  for (const std::string_view authorization :
       {"Basic YWxwaGEta2V5", "Bearer", "Bearer   ", "alpha-key", "BearerAlpha-key"}) {
    SCOPED_TRACE(authorization);
    auto answer = client.SendRaw("GET /v2 HTTP/1.1\r\nHost: test\r\nAuthorization: " +
                                 std::string(authorization) + "\r\n\r\n");
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 401u);
  }
  // The scheme's case does not matter; spaces before the token do not either.
  auto lower =
      client.SendRaw("GET /v2 HTTP/1.1\r\nHost: test\r\nAuthorization: bearer  alpha-key\r\n\r\n");
  ASSERT_TRUE(lower);
  EXPECT_EQ(lower->result_int(), 200u);
  EXPECT_TRUE(backend_.calls().empty());
}

TEST_F(FrontTest, ModelMetadata) {
  Client client = Connect();
  auto plain = client.Send("GET", "/v2/models/mlp", kAlphaKey);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->result_int(), 200u);
  const json expected = {{"name", "mlp"},
                         {"versions", {"1"}},
                         {"platform", "gshare_echo"},
                         {"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {-1, 2}}}}},
                         {"outputs", {{{"name", "y"}, {"datatype", "FP32"}, {"shape", {-1, 2}}}}}};
  EXPECT_EQ(json::parse(plain->body()), expected);
  auto versioned = client.Send("GET", "/v2/models/mlp/versions/1", kAlphaKey);
  ASSERT_TRUE(versioned);
  EXPECT_EQ(versioned->result_int(), 200u);
  EXPECT_EQ(versioned->body(), plain->body());
  // A model that is not ready still has metadata.
  auto cold = client.Send("GET", "/v2/models/cold", kAlphaKey);
  ASSERT_TRUE(cold);
  EXPECT_EQ(cold->result_int(), 200u);
  EXPECT_EQ(json::parse(cold->body())["inputs"], json::array());
}

TEST_F(FrontTest, ModelConfigInTritonsTerms) {
  backend_.Add("alpha", {.name = "batcher",
                         .ready = true,
                         .slo = std::chrono::seconds(1),
                         .platform = "mlp",
                         .max_batch = 8,
                         .inputs = {{"x", DataType::kFp32, {-1, 16}}},
                         .outputs = {{"logits", DataType::kFp32, {-1, 4}},
                                     {"label", DataType::kBytes, {-1}}}});
  Client client = Connect();
  auto config = client.Send("GET", "/v2/models/batcher/config", kAlphaKey);
  ASSERT_TRUE(config);
  ASSERT_EQ(config->result_int(), 200u) << config->body();
  EXPECT_EQ(json::parse(config->body()),
            json({{"name", "batcher"},
                  {"platform", "mlp"},
                  {"backend", "mlp"},
                  {"max_batch_size", 8},
                  {"input", {{{"name", "x"}, {"data_type", "TYPE_FP32"}, {"dims", {16}}}}},
                  {"output",
                   {{{"name", "logits"}, {"data_type", "TYPE_FP32"}, {"dims", {4}}},
                    {{"name", "label"}, {"data_type", "TYPE_STRING"}, {"dims", json::array()}}}}}));
  // Another tenant's model, or none, looks the same: not found.
  auto other = client.Send("GET", "/v2/models/batcher/config", kBetaKey);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->result_int(), 404u);
}

TEST_F(FrontTest, ModelReady) {
  Client client = Connect();
  for (const std::string target : {"/v2/models/mlp/ready", "/v2/models/mlp/versions/1/ready"}) {
    auto ready = client.Send("GET", target, kAlphaKey);
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->result_int(), 200u);
    EXPECT_EQ(json::parse(ready->body()), json({{"name", "mlp"}, {"ready", true}}));
  }
  auto cold = client.Send("GET", "/v2/models/cold/ready", kAlphaKey);
  ASSERT_TRUE(cold);
  EXPECT_EQ(cold->result_int(), 503u);
  EXPECT_EQ(ErrorOf(*cold), "model 'cold' is not ready");
}

TEST_F(FrontTest, OnlyVersionOneExists) {
  Client client = Connect();
  for (const std::string target :
       {"/v2/models/mlp/versions/2", "/v2/models/mlp/versions/2/ready",
        "/v2/models/mlp/versions/01", "/v2/models/mlp/versions/latest/ready"}) {
    SCOPED_TRACE(target);
    auto answer = client.Send("GET", target, kAlphaKey);
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 404u);
  }
  auto infer = client.Send("POST", "/v2/models/mlp/versions/2/infer", kAlphaKey, kEchoRequest);
  ASSERT_TRUE(infer);
  EXPECT_EQ(infer->result_int(), 404u);
  EXPECT_EQ(ErrorOf(*infer), "model 'mlp' has no version '2'");
  EXPECT_TRUE(backend_.calls().empty());
}

TEST_F(FrontTest, InferEchoesTheRequestId) {
  Client client = Connect();
  for (const std::string target : {"/v2/models/mlp/infer", "/v2/models/mlp/versions/1/infer"}) {
    SCOPED_TRACE(target);
    auto answer = client.Send("POST", target, kAlphaKey, kEchoRequest);
    ASSERT_TRUE(answer);
    ASSERT_EQ(answer->result_int(), 200u) << answer->body();
    EXPECT_EQ((*answer)[http::field::content_type], "application/json");
    auto response = ParseInferResponse(answer->body());
    ASSERT_TRUE(response.ok()) << response.status().ToString();
    EXPECT_EQ(response->id, "request-42");
    EXPECT_EQ(response->model_name, "mlp");
    EXPECT_EQ(response->model_version, "1");
    auto request = ParseInferRequest(kEchoRequest);
    ASSERT_TRUE(request.ok());
    EXPECT_EQ(response->outputs, request->inputs);
  }
  const auto calls = backend_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].tenant, "alpha");
  EXPECT_EQ(calls[0].model, "mlp");
  EXPECT_EQ(calls[0].request.id, "request-42");
  // The deadline is the arrival plus the model's SLO.
  EXPECT_EQ(calls[0].deadline, kNow + std::chrono::milliseconds(250));

  // Without an id, the answer has none (the backend's is not passed on).
  auto no_id = client.Send(
      "POST", "/v2/models/mlp/infer", kAlphaKey,
      R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 2], "data": [7, 8]}]})");
  ASSERT_TRUE(no_id);
  ASSERT_EQ(no_id->result_int(), 200u);
  EXPECT_FALSE(json::parse(no_id->body()).contains("id"));
}

// The binary tensor data extension: tensors after the JSON (Inference-Header-Content-Length), the
// raw form for a model with one input, and answers with binary outputs.
std::string BinaryRequest(std::string_view target, std::string_view key, const std::string& text,
                          const std::string& binary, std::string_view length_field) {
  std::string raw = "POST " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n";
  raw += "Authorization: Bearer " + std::string(key) + "\r\n";
  raw += "Content-Type: application/octet-stream\r\n";
  raw += "Inference-Header-Content-Length: " + std::string(length_field) + "\r\n";
  raw += "Content-Length: " + std::to_string(text.size() + binary.size()) + "\r\n\r\n";
  return raw + text + binary;
}

TEST_F(FrontTest, BinaryTensorsInAndOut) {
  backend_.Add("alpha", {.name = "echo", .ready = true, .slo = std::chrono::seconds(1)});
  Client client = Connect();
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f};
  const std::string binary(reinterpret_cast<const char*>(values.data()), sizeof(float) * 4);
  const std::string header =
      R"({"id":"b1","inputs":[{"name":"x","datatype":"FP32","shape":[2,2],)"
      R"("parameters":{"binary_data_size":16}},)"
      R"({"name":"s","datatype":"BYTES","shape":[1],"data":["hi"]}],)"
      R"("outputs":[{"name":"x","parameters":{"binary_data":true}},{"name":"s"}]})";
  auto answer = client.SendRaw(BinaryRequest("/v2/models/echo/infer", kAlphaKey, header, binary,
                                             std::to_string(header.size())));
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->result_int(), 200u) << answer->body();
  EXPECT_EQ((*answer)[http::field::content_type], "application/octet-stream");
  const std::string length((*answer)["Inference-Header-Content-Length"]);
  ASSERT_FALSE(length.empty());
  const std::size_t json_bytes = std::stoul(length);
  const json body = json::parse(answer->body().substr(0, json_bytes));
  EXPECT_EQ(body["id"], "b1");
  ASSERT_EQ(body["outputs"].size(), 2u);
  EXPECT_EQ(body["outputs"][0]["name"], "x");
  EXPECT_EQ(body["outputs"][0]["parameters"]["binary_data_size"], 16);
  EXPECT_FALSE(body["outputs"][0].contains("data"));
  EXPECT_EQ(body["outputs"][1]["data"], json::array({"hi"}));
  EXPECT_EQ(answer->body().substr(json_bytes), binary);
  // The backend got the tensor itself, and nothing of the answer's format.
  const auto calls = backend_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].request.inputs[0].Values<float>().value()[2], 3.25f);
  EXPECT_TRUE(calls[0].request.output_binary_data.empty());

  // binary_data_output makes every output binary, unless its own parameter says otherwise.
  const std::string every =
      R"({"parameters":{"binary_data_output":true},"inputs":[{"name":"x","datatype":"FP32",)"
      R"("shape":[4],"parameters":{"binary_data_size":16}}]})";
  auto all = client.SendRaw(BinaryRequest("/v2/models/echo/infer", kAlphaKey, every, binary,
                                          std::to_string(every.size())));
  ASSERT_TRUE(all);
  ASSERT_EQ(all->result_int(), 200u) << all->body();
  const std::size_t all_json = std::stoul(std::string((*all)["Inference-Header-Content-Length"]));
  EXPECT_EQ(all->body().substr(all_json), binary);
  // ... and the function is not told (requests batched together must have equal parameters).
  EXPECT_FALSE(backend_.calls().back().request.parameters.has_value());
  const std::string overridden =
      R"({"parameters":{"binary_data_output":true},"inputs":[{"name":"x","datatype":"BYTES",)"
      R"("shape":[2],"parameters":{"binary_data_size":11}}],)"
      R"("outputs":[{"name":"x","parameters":{"binary_data":false}}]})";
  const std::string strings("\x02\0\0\0hi\x01\0\0\0!", 11);
  auto json_out = client.SendRaw(BinaryRequest("/v2/models/echo/infer", kAlphaKey, overridden,
                                               strings, std::to_string(overridden.size())));
  ASSERT_TRUE(json_out);
  ASSERT_EQ(json_out->result_int(), 200u) << json_out->body();
  EXPECT_EQ((*json_out)[http::field::content_type], "application/json");
  EXPECT_EQ(json::parse(json_out->body())["outputs"][0]["data"], json::array({"hi", "!"}));

  // A string JSON cannot carry to the function is refused here, before it could join a batch.
  const std::string not_utf8 =
      R"({"inputs":[{"name":"x","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]})";
  const std::size_t calls_before = backend_.calls().size();
  auto refused = client.SendRaw(BinaryRequest("/v2/models/echo/infer", kAlphaKey, not_utf8,
                                              std::string("\x02\0\0\0\xff\xfe", 6),
                                              std::to_string(not_utf8.size())));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result_int(), 400u);
  EXPECT_EQ(ErrorOf(*refused),
            "input 'x': element 0 is not valid UTF-8, which this function cannot be sent (it "
            "takes tensors as JSON text only)");
  EXPECT_EQ(backend_.calls().size(), calls_before);
  // A function sent tensors in the binary form takes any bytes.
  backend_.Add(
      "alpha",
      {.name = "raw-echo", .ready = true, .slo = std::chrono::seconds(1), .binary_tensors = true});
  const std::string binary_out =
      R"({"parameters":{"binary_data_output":true},"inputs":[{"name":"x","datatype":"BYTES",)"
      R"("shape":[1],"parameters":{"binary_data_size":6}}]})";
  auto taken = client.SendRaw(BinaryRequest("/v2/models/raw-echo/infer", kAlphaKey, binary_out,
                                            std::string("\x02\0\0\0\xff\xfe", 6),
                                            std::to_string(binary_out.size())));
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->result_int(), 200u) << taken->body();
  ASSERT_EQ(backend_.calls().size(), calls_before + 1);
  EXPECT_EQ(backend_.calls().back().request.inputs[0].strings()[0], "\xff\xfe");

  // A JSON request answers JSON, as before.
  auto plain = client.Send("POST", "/v2/models/echo/infer", kAlphaKey,
                           R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[7]}]})");
  ASSERT_TRUE(plain);
  EXPECT_EQ((*plain)[http::field::content_type], "application/json");
  EXPECT_TRUE((*plain)["Inference-Header-Content-Length"].empty());
}

TEST_F(FrontTest, TheRawBinaryFormTakesTheModelsOneInput) {
  backend_.Add("alpha", {.name = "raw",
                         .ready = true,
                         .slo = std::chrono::seconds(1),
                         .inputs = {{"pixels", DataType::kFp32, {-1, 2}}},
                         .outputs = {{"pixels", DataType::kFp32, {-1, 2}}}});
  Client client = Connect();
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  const std::string binary(reinterpret_cast<const char*>(values.data()), sizeof(float) * 6);
  auto answer = client.SendRaw(BinaryRequest("/v2/models/raw/infer", kAlphaKey, "", binary, "0"));
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->result_int(), 200u) << answer->body();
  // Answered in binary, as the raw form's answers are.
  const std::string length((*answer)["Inference-Header-Content-Length"]);
  ASSERT_FALSE(length.empty());
  EXPECT_EQ(answer->body().substr(std::stoul(length)), binary);
  const auto calls = backend_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].request.inputs[0].name(), "pixels");
  EXPECT_EQ(calls[0].request.inputs[0].shape(), (std::vector<std::int64_t>{3, 2}));
  // A batched model's leading -1 is one request when another dimension is free; a BYTES input is
  // the whole body as one element.
  backend_.Add("alpha", {.name = "batched",
                         .ready = true,
                         .slo = std::chrono::seconds(1),
                         .inputs = {{"v", DataType::kFp32, {-1, -1}}}});
  backend_.Add("alpha", {.name = "text",
                         .ready = true,
                         .slo = std::chrono::seconds(1),
                         .inputs = {{"t", DataType::kBytes, {-1}}}});
  auto batched =
      client.SendRaw(BinaryRequest("/v2/models/batched/infer", kAlphaKey, "", binary, "0"));
  ASSERT_TRUE(batched);
  ASSERT_EQ(batched->result_int(), 200u) << batched->body();
  EXPECT_EQ(backend_.calls().back().request.inputs[0].shape(), (std::vector<std::int64_t>{1, 6}));
  auto text = client.SendRaw(BinaryRequest("/v2/models/text/infer", kAlphaKey, "", "427", "0"));
  ASSERT_TRUE(text);
  ASSERT_EQ(text->result_int(), 200u) << text->body();
  EXPECT_EQ(backend_.calls().back().request.inputs[0].strings(), (std::vector<std::string>{"427"}));

  // Bytes that fit no shape, a model without its inputs described, a header that is no number
  // or says more than the body holds.
  auto odd = client.SendRaw(
      BinaryRequest("/v2/models/raw/infer", kAlphaKey, "", binary.substr(0, 12), "0"));
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->result_int(), 400u);
  EXPECT_EQ(ErrorOf(*odd), "input 'pixels': 3 elements do not fit its shape [-1,2]");
  auto undescribed =
      client.SendRaw(BinaryRequest("/v2/models/later/infer", kAlphaKey, "", binary, "0"));
  ASSERT_TRUE(undescribed);
  EXPECT_EQ(undescribed->result_int(), 400u);
  EXPECT_NE(ErrorOf(*undescribed).find("does not describe its inputs"), std::string::npos);
  auto garbled =
      client.SendRaw(BinaryRequest("/v2/models/raw/infer", kAlphaKey, "", binary, "12x"));
  ASSERT_TRUE(garbled);
  EXPECT_EQ(garbled->result_int(), 400u);
  EXPECT_EQ(ErrorOf(*garbled), "Inference-Header-Content-Length is not a byte count: '12x'");
  auto beyond = client.SendRaw(BinaryRequest("/v2/models/raw/infer", kAlphaKey, "", binary, "999"));
  ASSERT_TRUE(beyond);
  EXPECT_EQ(beyond->result_int(), 400u);
  EXPECT_EQ(ErrorOf(*beyond),
            "Inference-Header-Content-Length is 999, but the body has only 24 "
            "bytes");
  EXPECT_EQ(backend_.calls().size(), 3u);  // none of them ran
}

TEST_F(FrontTest, ARequestedOutputTheModelLacksIs400) {
  Client client = Connect();
  // mlp describes its outputs (y): another name is refused before it runs.
  auto unknown =
      client.Send("POST", "/v2/models/mlp/infer", kAlphaKey,
                  R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,2]}],)"
                  R"("outputs":[{"name":"z"}]})");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->result_int(), 400u);
  EXPECT_EQ(ErrorOf(*unknown), "model 'mlp' has no output 'z'");
  EXPECT_TRUE(backend_.calls().empty());
  // A model that describes none: its answer is checked instead.
  auto missing = client.Send("POST", "/v2/models/later/infer", kAlphaKey,
                             R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[1]}],)"
                             R"("outputs":[{"name":"x"},{"name":"w"}]})");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->result_int(), 400u);
  EXPECT_EQ(ErrorOf(*missing), "model 'later' has no output 'w'");
}

TEST_F(FrontTest, InputsThatDoNotFitTheModelsTensorsAre400BeforeTheyRun) {
  Client client = Connect();
  // mlp takes x FP32 [-1, 2]: each way of missing it is named, and nothing reaches the backend.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1,2],"data":[1,2]}]})",
       "model 'mlp': input 'x' is INT32; the model takes FP32"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]})",
       "model 'mlp': input 'x' has shape [1,3]; the model takes [-1,2]"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1,2]}]})",
       "model 'mlp': input 'x' has shape [2]; the model takes [-1,2]"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,2]},)"
       R"({"name":"w","datatype":"FP32","shape":[1,2],"data":[1,2]}]})",
       "model 'mlp': the model has no input 'w' (its inputs: x)"},
      {R"({"inputs":[]})", "model 'mlp': input 'x' is missing"},
  };
  for (const auto& [body, message] : cases) {
    auto answer = client.Send("POST", "/v2/models/mlp/infer", kAlphaKey, body);
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 400u) << body;
    EXPECT_EQ(ErrorOf(*answer), message) << body;
  }
  // The binary form is checked the same way.
  const std::string header =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}]})";
  const std::string binary(16, '\0');
  auto answer = client.SendRaw(BinaryRequest("/v2/models/mlp/infer", kAlphaKey, header, binary,
                                             std::to_string(header.size())));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 400u);
  EXPECT_EQ(ErrorOf(*answer), "model 'mlp': input 'x' has shape [1,4]; the model takes [-1,2]");
  EXPECT_TRUE(backend_.calls().empty());
  // Any batch fits the batch dimension; a model that lists no tensors takes anything.
  auto batch = client.Send("POST", "/v2/models/mlp/infer", kAlphaKey,
                           R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3,2],)"
                           R"("data":[1,2,3,4,5,6]}]})");
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->result_int(), 200u) << batch->body();
  auto any =
      client.Send("POST", "/v2/models/private/infer", kAlphaKey,
                  R"({"inputs":[{"name":"q","datatype":"INT8","shape":[5],"data":[1,2,3,4,5]}]})");
  ASSERT_TRUE(any);
  EXPECT_EQ(any->result_int(), 200u) << any->body();
  EXPECT_EQ(backend_.calls().size(), 2u);
}

TEST_F(FrontTest, InferAnsweredFromAnotherThread) {
  Client client = Connect();
  auto answer = client.Send("POST", "/v2/models/later/infer", kAlphaKey, kEchoRequest);
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->result_int(), 200u) << answer->body();
  EXPECT_EQ(json::parse(answer->body())["id"], "request-42");
  EXPECT_EQ(json::parse(answer->body())["model_name"], "later");
}

// An answer the backend leaves encoded is decoded by the front off the backend's thread (on the
// connection's io thread), then named and written as any other; one that does not decode is a
// 500 that says so.
TEST_F(FrontTest, AnEncodedAnswerIsDecodedOffTheBackendsThread) {
  Client client = Connect();
  auto answer = client.Send("POST", "/v2/models/encoded/infer", kAlphaKey, kEchoRequest);
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->result_int(), 200u) << answer->body();
  const json body = json::parse(answer->body());
  EXPECT_EQ(body["id"], "request-42");
  EXPECT_EQ(body["model_name"], "encoded");
  EXPECT_EQ(body["outputs"][0]["data"], json({1, 2, 3, 4}));
  const auto [answered_on, decoded_on] = backend_.EncodedThreads();
  EXPECT_NE(answered_on, std::thread::id());
  EXPECT_NE(decoded_on, std::thread::id());
  EXPECT_NE(decoded_on, answered_on);

  auto malformed = client.Send("POST", "/v2/models/malformed/infer", kAlphaKey, kEchoRequest);
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->result_int(), 500u);
  EXPECT_EQ(ErrorOf(*malformed), "the function's answer is malformed: a length past its body");
}

// Every inference answer is told with its protocol and status, refusals included; other
// endpoints are not.
TEST_F(FrontTest, InferenceAnswersAreToldByStatus) {
  // Shared with the callback, which may run on an io thread after this test's body (the last
  // copy of a gone client's Responder may be dropped there).
  struct Told {
    std::mutex mutex;
    std::condition_variable changed;
    std::map<int, int> by_status;
  };
  auto told = std::make_shared<Told>();
  FrontOptions options;
  options.on_inference_answer = [told](std::string_view protocol, int status) {
    std::lock_guard lock(told->mutex);
    EXPECT_EQ(protocol, "http");
    ++told->by_status[status];
    told->changed.notify_all();
  };
  Start({}, std::move(options));
  Client client = Connect();
  for (int i = 0; i < 2; ++i) {
    auto ok = client.Send("POST", "/v2/models/mlp/infer", kAlphaKey, kEchoRequest);
    ASSERT_TRUE(ok);
    ASSERT_EQ(ok->result_int(), 200u) << ok->body();
  }
  auto unknown = client.Send("POST", "/v2/models/nothing/infer", kAlphaKey, kEchoRequest);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->result_int(), 404u);
  auto metadata = client.Send("GET", "/v2/models/mlp", kAlphaKey);
  ASSERT_TRUE(metadata);
  EXPECT_EQ(metadata->result_int(), 200u);
  Client keyless = Connect();
  auto refused = keyless.Send("POST", "/v2/models/mlp/infer", std::nullopt, kEchoRequest);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result_int(), 401u);
  {
    std::lock_guard lock(told->mutex);
    EXPECT_EQ(told->by_status, (std::map<int, int>{{200, 2}, {401, 1}, {404, 1}}));
  }
  // A client that goes away before its answer: 499, whatever the answer it left behind, told
  // when the last reference to its request goes.
  backend_.Add("alpha", {.name = "held", .ready = true, .slo = std::chrono::seconds(1)});
  {
    Client leaving = Connect();
    leaving.Write(Client::Request("POST", "/v2/models/held/infer", kAlphaKey, kEchoRequest));
    backend_.WaitUntilHeld(1);
    leaving.Close();
  }
  backend_.WaitUntilCancelled(1);
  backend_.AnswerHeld();  // its answer comes, for nobody
  std::unique_lock lock(told->mutex);
  told->changed.wait(lock, [&] { return told->by_status.contains(499); });
  EXPECT_EQ(told->by_status, (std::map<int, int>{{200, 2}, {401, 1}, {404, 1}, {499, 1}}));
}

TEST_F(FrontTest, InferOnAModelThatIsNotReadyIs503) {
  Client client = Connect();
  auto answer = client.Send("POST", "/v2/models/cold/infer", kAlphaKey, kEchoRequest);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 503u);
  EXPECT_TRUE(backend_.calls().empty());
}

TEST_F(FrontTest, AnotherTenantsModelLooksExactlyLikeAnUnknownOne) {
  const std::vector<std::pair<std::string, std::string>> requests = {
      {"GET", "/v2/models/private"},           {"GET", "/v2/models/private/versions/1"},
      {"GET", "/v2/models/private/ready"},     {"GET", "/v2/models/private/versions/1/ready"},
      {"POST", "/v2/models/private/infer"},    {"POST", "/v2/models/private/versions/1/infer"},
      {"GET", "/v2/models/private/versions/7"}};
  auto ask_as_beta = [&] {
    Client client = Connect();
    std::vector<std::string> wires;
    for (const auto& [method, target] : requests) {
      auto answer = client.Send(method, target, kBetaKey, method == "POST" ? kEchoRequest : "");
      wires.push_back(answer ? Wire(*answer) : "<no answer>");
    }
    return wires;
  };
  // Alpha sees its model; beta, asking for the same names, gets 404s.
  Client alpha = Connect();
  auto own = alpha.Send("GET", "/v2/models/private", kAlphaKey);
  ASSERT_TRUE(own);
  EXPECT_EQ(own->result_int(), 200u);
  const std::vector<std::string> while_alpha_has_it = ask_as_beta();
  for (const std::string& wire : while_alpha_has_it) {
    EXPECT_TRUE(wire.starts_with("HTTP/1.1 404")) << wire;
  }
  // The same questions once nobody has the name: the same bytes.
  backend_.Remove("alpha", "private");
  const std::vector<std::string> once_nobody_has_it = ask_as_beta();
  EXPECT_EQ(while_alpha_has_it, once_nobody_has_it);
  EXPECT_TRUE(backend_.calls().empty());
}

TEST_F(FrontTest, WrongMethodIs405) {
  Client client = Connect();
  for (const auto& [method, target, allowed] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"POST", "/v2/health/live", "GET, HEAD"},
           {"DELETE", "/v2/health/ready", "GET, HEAD"},
           {"POST", "/v2", "GET, HEAD"},
           {"PUT", "/v2/models/mlp", "GET, HEAD"},
           {"POST", "/v2/models/mlp/ready", "GET, HEAD"},
           {"GET", "/v2/models/mlp/infer", "POST"},
           {"GET", "/v2/models/mlp/versions/1/infer", "POST"}}) {
    SCOPED_TRACE(method + " " + target);
    auto answer = client.Send(method, target, kAlphaKey);
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 405u);
    EXPECT_EQ((*answer)[http::field::allow], allowed);
    EXPECT_FALSE(ErrorOf(*answer).empty());
  }
}

TEST_F(FrontTest, UnknownPathsAre404) {
  Client client = Connect();
  for (const std::string target :
       {"/", "/v1/models/mlp", "/v2/", "/v2/models", "/v2/models/", "/v2/models//infer",
        "/v2/models/mlp/", "/v2/models/mlp/predict", "/v2/models/mlp/versions",
        "/v2/models/mlp/versions/1/infer/more", "/v2/health", "/v2/health/dead",
        "/v2/repository/index"}) {
    SCOPED_TRACE(target);
    auto answer = client.Send("GET", target, kAlphaKey);
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 404u);
    EXPECT_FALSE(ErrorOf(*answer).empty());
  }
  auto unknown = client.Send("GET", "/v2/models/nosuch/ready", kAlphaKey);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->result_int(), 404u);
  EXPECT_EQ(ErrorOf(*unknown), "model 'nosuch' not found");
}

TEST_F(FrontTest, MalformedRequestsAre400AndTheServerServesOn) {
  Client client = Connect();
  for (const std::string body : {
           "{not json",
           "",
           "[]",
           R"({"inputs": "x"})",
           R"({"id": 7, "inputs": []})",
           R"({"inputs": [{"name": "x", "datatype": "FP31", "shape": [1], "data": [1]}]})",
           R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "data": ["a", "b"]}]})",
           R"({"inputs": [{"name": "x", "datatype": "INT8", "shape": [1], "data": [300]}]})",
           R"({"inputs": [{"name": "x", "datatype": "BOOL", "shape": [1], "data": [1]}]})",
           R"({"inputs": [{"name": "x", "datatype": "BYTES", "shape": [1], "data": [1]}]})",
           R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [3], "data": [1, 2]}]})",
           R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1], "data": []}]})",
       }) {
    SCOPED_TRACE(body);
    auto answer = client.Send("POST", "/v2/models/mlp/infer", kAlphaKey, body);
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 400u);
    EXPECT_FALSE(ErrorOf(*answer).empty());
  }
  EXPECT_TRUE(backend_.calls().empty());
  // The same connection, and a new one, are served.
  auto after = client.Send("POST", "/v2/models/mlp/infer", kAlphaKey, kEchoRequest);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->result_int(), 200u);
  Client fresh = Connect();
  auto health = fresh.Send("GET", "/v2/health/ready");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->result_int(), 200u);
}

TEST_F(FrontTest, BackendErrorsMapToStatuses) {
  Client client = Connect();
  const std::vector<std::pair<StatusCode, unsigned>> cases = {
      {StatusCode::kInvalidArgument, 400u},
      {StatusCode::kOutOfRange, 400u},
      {StatusCode::kResourceExhausted, 429u},
      {StatusCode::kUnavailable, 503u},
      {StatusCode::kDeadlineExceeded, 504u},
      {StatusCode::kInternal, 500u},
      {StatusCode::kIo, 500u},
      {StatusCode::kFailedPrecondition, 500u}};
  for (const auto& [code, status] : cases) {
    SCOPED_TRACE(std::string(StatusCodeName(code)));
    const std::string body = R"({"id": "a", "parameters": {"code": )" +
                             std::to_string(static_cast<int>(code)) + R"(}, "inputs": []})";
    auto answer = client.Send("POST", "/v2/models/private/infer", kAlphaKey, body);
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), status);
    EXPECT_EQ(ErrorOf(*answer), "the backend says no");
  }
  // NotFound from the backend (the model went away meanwhile) is the front's own 404.
  const std::string gone = R"({"parameters": {"code": )" +
                           std::to_string(static_cast<int>(StatusCode::kNotFound)) +
                           R"(}, "inputs": []})";
  auto answer = client.Send("POST", "/v2/models/private/infer", kAlphaKey, gone);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 404u);
  EXPECT_EQ(ErrorOf(*answer), "model 'private' not found");
  // An answer JSON cannot carry (a NaN) is a 500.
  auto nan = client.Send("POST", "/v2/models/private/infer", kAlphaKey,
                         R"({"parameters": {"nan": true}, "inputs": []})");
  ASSERT_TRUE(nan);
  EXPECT_EQ(nan->result_int(), 500u);
}

TEST_F(FrontTest, TooLargeIs413) {
  // Past the server's body limit: the server answers before the front sees it.
  Start({.body_bytes = 1024}, {});
  Client client = Connect();
  const std::string big = R"({"inputs": [], "padding": ")" + std::string(2048, 'x') + R"("})";
  auto server_limit = client.Send("POST", "/v2/models/mlp/infer", kAlphaKey, big);
  ASSERT_TRUE(server_limit);
  EXPECT_EQ(server_limit->result_int(), 413u);
  EXPECT_FALSE(ErrorOf(*server_limit).empty());

  // Past the front's JSON limit, under the server's.
  FrontOptions small;
  small.parse_limits.max_text_bytes = 512;
  Start({}, small);
  Client other = Connect();
  auto front_limit = other.Send("POST", "/v2/models/mlp/infer", kAlphaKey, big);
  ASSERT_TRUE(front_limit);
  EXPECT_EQ(front_limit->result_int(), 413u);
  auto fits = other.Send("POST", "/v2/models/mlp/infer", kAlphaKey, kEchoRequest);
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->result_int(), 200u);
  EXPECT_EQ(backend_.calls().size(), 1u);
}

TEST_F(FrontTest, TheRegistrysKeysAuthenticate) {
  TempDirForTest dir;
  ASSERT_FALSE(dir.path().empty());
  auto registry = Registry::Open(dir.path());
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  auto keys = TenantKeys::Open(**registry, ServerSecret::FromBytes(std::string(32, 's')));
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  auto alpha_key = (*keys)->AddTenant("alpha");
  ASSERT_TRUE(alpha_key.ok()) << alpha_key.status().ToString();

  server_.reset();
  Front front({}, **keys, backend_, clock_);
  net::HttpServerOptions options;
  options.port = 0;
  options.io_threads = 1;
  auto server = net::HttpServer::Start(std::move(options), front.Handler());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Client client((*server)->port());
  auto own = client.Send("GET", "/v2/models/mlp", *alpha_key);
  ASSERT_TRUE(own);
  EXPECT_EQ(own->result_int(), 200u);
  auto wrong = client.Send("GET", "/v2/models/mlp", kAlphaKey);
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->result_int(), 401u);
}

}  // namespace
}  // namespace gshare::serve

namespace gshare::serve {
namespace {

// One tenant holds every in-flight place the front has (4): the next of its requests gets 429,
// while another tenant still gets its share (2) at once; once the first one's requests are
// answered, everything it held is given back.
TEST_F(FrontTest, ATenantHoldingEveryPlaceCannotKeepAnotherFromItsShare) {
  backend_.Add("alpha", {.name = "held", .ready = true, .slo = std::chrono::seconds(100)});
  backend_.Add("beta", {.name = "held", .ready = true, .slo = std::chrono::seconds(100)});
  backend_.Add("beta", {.name = "mlp", .ready = true, .slo = std::chrono::seconds(1)});
  FrontOptions options;
  options.max_in_flight = 4;
  Start({}, options);
  std::vector<std::thread> alpha;
  std::vector<unsigned> alpha_status(4, 0);
  for (int i = 0; i < 4; ++i) {
    alpha.emplace_back([&, i] {
      Client client = Connect();
      auto answer = client.Send("POST", "/v2/models/held/infer", kAlphaKey, kEchoRequest);
      alpha_status[i] = answer ? answer->result_int() : 0;
    });
  }
  backend_.WaitUntilHeld(4);
  EXPECT_EQ(front_->InFlightHeldBy("alpha"), 4u);
  EXPECT_GT(front_->BufferedBytesHeldBy("alpha"), 4 * (kEchoRequest.size() - 1));

  Client client = Connect();
  auto over = client.Send("POST", "/v2/models/mlp/infer", kAlphaKey, kEchoRequest);
  ASSERT_TRUE(over);
  EXPECT_EQ(over->result_int(), 429u);
  EXPECT_NE(ErrorOf(*over).find("its share"), std::string::npos) << ErrorOf(*over);

  // Beta's share is 2 of the 4 while alpha is active: two held requests, then 429.
  std::vector<std::thread> beta;
  std::vector<unsigned> beta_status(2, 0);
  for (int i = 0; i < 2; ++i) {
    beta.emplace_back([&, i] {
      Client beta_client = Connect();
      auto answer = beta_client.Send("POST", "/v2/models/held/infer", kBetaKey, kEchoRequest);
      beta_status[i] = answer ? answer->result_int() : 0;
    });
  }
  backend_.WaitUntilHeld(6);
  auto beta_over = client.Send("POST", "/v2/models/mlp/infer", kBetaKey, kEchoRequest);
  ASSERT_TRUE(beta_over);
  EXPECT_EQ(beta_over->result_int(), 429u);

  backend_.AnswerHeld();
  for (std::thread& t : alpha) t.join();
  for (std::thread& t : beta) t.join();
  EXPECT_EQ(alpha_status, (std::vector<unsigned>(4, 200)));
  EXPECT_EQ(beta_status, (std::vector<unsigned>(2, 200)));
  EXPECT_EQ(front_->InFlightHeldBy("alpha"), 0u);
  EXPECT_EQ(front_->BufferedBytesHeldBy("beta"), 0u);
  auto again = client.Send("POST", "/v2/models/mlp/infer", kBetaKey, kEchoRequest);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->result_int(), 200u);
}

// Bodies held count against the tenant's share of the buffered bytes, by their declared size at
// the header check: a body beyond what the tenant may take is refused before it is read.
TEST_F(FrontTest, BodiesBeyondATenantsShareOfTheBufferAre429) {
  backend_.Add("alpha", {.name = "held", .ready = true, .slo = std::chrono::seconds(100)});
  FrontOptions options;
  options.max_buffered_bytes = 3 * kEchoRequest.size();
  server_.reset();
  front_ = std::make_unique<Front>(options, authenticator_, backend_, clock_);
  net::HttpServerOptions server_options;
  server_options.port = 0;
  server_options.io_threads = 2;
  auto server = net::HttpServer::Start(
      server_options, front_->Handler(),
      [front = front_.get()](net::ServerRequest& head) { return front->CheckHead(head); });
  ASSERT_TRUE(server.ok());
  server_ = std::move(server).value();

  std::vector<std::thread> alpha;
  for (int i = 0; i < 3; ++i) {
    alpha.emplace_back([&] {
      Client client = Connect();
      auto answer = client.Send("POST", "/v2/models/held/infer", kAlphaKey, kEchoRequest);
      EXPECT_TRUE(answer && answer->result_int() == 200u);
    });
  }
  backend_.WaitUntilHeld(3);
  EXPECT_EQ(front_->BufferedBytesHeldBy("alpha"), 3 * kEchoRequest.size());
  Client client = Connect();
  auto over = client.Send("POST", "/v2/models/mlp/infer", kAlphaKey, kEchoRequest);
  ASSERT_TRUE(over);
  EXPECT_EQ(over->result_int(), 429u);
  EXPECT_NE(ErrorOf(*over).find("bytes of inference bodies"), std::string::npos);
  backend_.AnswerHeld();
  for (std::thread& t : alpha) t.join();
  EXPECT_EQ(front_->BufferedBytesHeldBy("alpha"), 0u);
  // A chunked body, whose length is known only once read, takes at most the whole buffer (not the
  // JSON limit, which is larger here): it is served.
  const std::string body(kEchoRequest);
  Client fresh = Connect();  // the 429 closed the other connection: its body was not read
  auto chunked = fresh.SendRaw(
      fmt::format("POST /v2/models/mlp/infer HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {}\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
                  kAlphaKey, body.size(), body));
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->result_int(), 200u) << chunked->body();
  // A declared body larger than the whole buffer is refused for what it declares.
  Client large = Connect();
  auto too_large =
      large.Send("POST", "/v2/models/mlp/infer", kAlphaKey,
                 std::string(kEchoRequest) + std::string(3 * kEchoRequest.size(), ' '));
  ASSERT_TRUE(too_large);
  EXPECT_EQ(too_large->result_int(), 429u) << too_large->body();
}

}  // namespace
}  // namespace gshare::serve
