#if GSHARE_WITH_GRPC
// gRPC first: Abseil's annotation macros, which it includes, give way to gshare's.
#include <grpcpp/grpcpp.h>
#endif

#include "gshare/measure/front_bench.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "gshare/common/clock.h"
#include "gshare/measure/stats.h"
#include "gshare/net/http_client.h"
#include "gshare/net/unix_http.h"
#include "gshare/serve/server.h"
#include "gshare/tensor/tensor.h"
#if GSHARE_WITH_GRPC
#include "gshare/protocol/grpc/inference.grpc.pb.h"
#endif

namespace gshare::measure {
namespace {

namespace http = boost::beast::http;

constexpr std::string_view kAdminKey = "bench-front-admin-key-0123456789";
constexpr std::string_view kEchoSpec = R"(name: echo
model_size: 1Mi
gpu_memory: 8Mi
exec_latency: 1ms
slo: 10s
max_batch: 8
runtime: echo
timeout: 10s
)";

// The nearest-rank median: a value that was measured.
double NearestRankMedian(std::vector<double> values) { return Percentile(std::move(values), 50); }

// Microseconds each of `n` sequential calls of `call` took; an error stops it.
Result<std::vector<double>> Time(int n, const std::function<Status()>& call) {
  const SteadyClock& clock = SteadyClock::Shared();
  std::vector<double> micros;
  micros.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const TimePoint start = clock.Now();
    GSHARE_RETURN_IF_ERROR(call());
    micros.push_back(ToSeconds(clock.Now() - start) * 1e6);
  }
  return micros;
}

// A kept-alive HTTP/1.1 connection to a Unix socket.
class UnixKeepAlive {
 public:
  explicit UnixKeepAlive(std::string path) : path_(std::move(path)), socket_(io_) {}
  Status Post(const std::string& target, const std::string& body) {
    boost::system::error_code error;
    if (!socket_.is_open()) {
      socket_.connect(path_, error);
      if (error) return Unavailable(fmt::format("connect {}: {}", path_, error.message()));
    }
    http::request<http::string_body> request{http::verb::post, target, 11};
    request.set(http::field::host, "function");
    request.set(http::field::content_type, "application/json");
    request.keep_alive(true);
    request.body() = body;
    request.prepare_payload();
    http::write(socket_, request, error);
    if (error) return Unavailable(fmt::format("write: {}", error.message()));
    http::response<http::string_body> response;
    http::read(socket_, buffer_, response, error);
    if (error) return Unavailable(fmt::format("read: {}", error.message()));
    if (response.result_int() != 200) {
      return Internal(
          fmt::format("the function answered {}: {}", response.result_int(), response.body()));
    }
    if (!response.keep_alive()) socket_.close(error);
    return Status::Ok();
  }

 private:
  std::string path_;
  boost::asio::io_context io_;
  boost::asio::local::stream_protocol::socket socket_;
  boost::beast::flat_buffer buffer_;
};

// One request over a new connection, as the node sends a batch.
Status PostOnce(boost::asio::io_context& loop, const std::string& path, const std::string& body) {
  std::optional<Result<net::HttpResponse>> answer;
  net::SendUnixHttpRequest(loop, path, {"POST", "/v2/models/echo/infer", body, "application/json"},
                           std::chrono::seconds(10), {},
                           [&](Result<net::HttpResponse> r) { answer = std::move(r); });
  loop.restart();
  while (!answer) loop.run_one();
  if (!answer->ok()) return answer->status();
  if ((*answer)->status != 200) {
    return Internal(
        fmt::format("the function answered {}: {}", (*answer)->status, (*answer)->body));
  }
  return Status::Ok();
}

// One input size of the protocol comparison: the request in each encoding, and the echo's data.
struct Payload {
  std::string size;
  std::vector<std::int64_t> shape;
  std::string raw;             // the input's little-endian bytes: what the echo must give back
  std::string json;            // KServe v2 JSON
  std::string binary;          // the binary extension's body
  std::size_t json_bytes = 0;  // its Inference-Header-Content-Length
};

Payload MakePayload(std::string size, std::vector<std::int64_t> shape) {
  Payload p;
  p.size = std::move(size);
  p.shape = std::move(shape);
  std::int64_t count = 1;
  for (const std::int64_t d : p.shape) count *= d;
  std::vector<float> values(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 251) * 0.5f;
  p.raw.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  p.json =
      nlohmann::json{
          {"id", "b"},
          {"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", p.shape}, {"data", values}}}}}
          .dump();
  const std::string header =
      nlohmann::json{{"id", "b"},
                     {"inputs",
                      {{{"name", "x"},
                        {"datatype", "FP32"},
                        {"shape", p.shape},
                        {"parameters", {{"binary_data_size", p.raw.size()}}}}}},
                     {"parameters", {{"binary_data_output", true}}}}
          .dump();
  p.json_bytes = header.size();
  p.binary = header + p.raw;
  return p;
}

// A caller of one path, on its own connection; Call checks the echo.
class ProtocolCaller {
 public:
  virtual ~ProtocolCaller() = default;
  virtual Status Call(const Payload& payload) = 0;
};

class HttpCaller final : public ProtocolCaller {
 public:
  HttpCaller(std::uint16_t port, std::string key, bool binary)
      : client_({"127.0.0.1", port}), key_(std::move(key)), binary_(binary) {}
  Status Call(const Payload& payload) override {
    net::ClientRequest request;
    request.method = "POST";
    request.target = "/v2/models/echo/infer";
    request.headers.push_back({"Authorization", "Bearer " + key_});
    if (binary_) {
      request.body = payload.binary;
      request.content_type = "application/octet-stream";
      request.headers.push_back(
          {"Inference-Header-Content-Length", std::to_string(payload.json_bytes)});
    } else {
      request.body = payload.json;
      request.content_type = "application/json";
    }
    auto answer = client_.Send(request, std::chrono::seconds(60));
    if (!answer.ok()) return answer.status();
    if (answer->status != 200) {
      return Internal(
          fmt::format("the server answered {}: {}", answer->status, answer->body.substr(0, 200)));
    }
    if (binary_) {
      // The JSON, then the output's bytes: the input's.
      if (answer->body.size() < payload.raw.size() ||
          answer->body.compare(answer->body.size() - payload.raw.size(), payload.raw.size(),
                               payload.raw) != 0) {
        return Internal("the binary answer is not the echo of its input");
      }
      return Status::Ok();
    }
    // JSON: the data, parsed, as the input's floats.
    const nlohmann::json parsed = nlohmann::json::parse(answer->body, nullptr, false);
    if (parsed.is_discarded() || !parsed.contains("outputs")) {
      return Internal("the JSON answer has no outputs");
    }
    const auto values = parsed["outputs"][0]["data"].get<std::vector<float>>();
    if (values.size() * sizeof(float) != payload.raw.size() ||
        std::memcmp(values.data(), payload.raw.data(), payload.raw.size()) != 0) {
      return Internal("the JSON answer is not the echo of its input");
    }
    return Status::Ok();
  }

 private:
  net::HttpClient client_;
  const std::string key_;
  const bool binary_;
};

#if GSHARE_WITH_GRPC
class GrpcCaller final : public ProtocolCaller {
 public:
  GrpcCaller(int port, std::string key) : key_(std::move(key)) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(64 << 20);
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    stub_ = inference::GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), arguments));
  }
  Status Call(const Payload& payload) override {
    inference::ModelInferRequest request;
    request.set_model_name("echo");
    request.set_id("b");
    auto* input = request.add_inputs();
    input->set_name("x");
    input->set_datatype("FP32");
    for (const std::int64_t d : payload.shape) input->add_shape(d);
    request.add_raw_input_contents(payload.raw);
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + key_);
    inference::ModelInferResponse response;
    const grpc::Status status = stub_->ModelInfer(&context, request, &response);
    if (!status.ok()) return Internal("gRPC: " + status.error_message());
    if (response.raw_output_contents_size() != 1 ||
        response.raw_output_contents(0) != payload.raw) {
      return Internal("the gRPC answer is not the echo of its input");
    }
    return Status::Ok();
  }

 private:
  const std::string key_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};
#endif

// Requests per second of `clients` callers sending `total` requests at once.
Result<double> Throughput(const std::function<std::unique_ptr<ProtocolCaller>()>& make,
                          const Payload& payload, int clients, int total) {
  std::vector<std::unique_ptr<ProtocolCaller>> callers;
  for (int c = 0; c < clients; ++c) {
    callers.push_back(make());
    GSHARE_RETURN_IF_ERROR(callers.back()->Call(payload));  // connected and warm
  }
  std::vector<Status> errors(static_cast<std::size_t>(clients));
  const SteadyClock& clock = SteadyClock::Shared();
  const TimePoint start = clock.Now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      const int mine = total / clients + (c < total % clients ? 1 : 0);
      for (int i = 0; i < mine; ++i) {
        Status status = callers[static_cast<std::size_t>(c)]->Call(payload);
        if (!status.ok()) {
          errors[static_cast<std::size_t>(c)] = std::move(status);
          return;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const double seconds = ToSeconds(clock.Now() - start);
  for (const Status& error : errors) GSHARE_RETURN_IF_ERROR(error);
  return seconds > 0 ? total / seconds : 0.0;
}

struct PathFigures {
  std::vector<double> p50, p99;  // per round, microseconds
};

}  // namespace

Result<FrontBenchResult> RunFrontBench(const FrontBenchOptions& bench) {
  char pattern[] = "/tmp/gshare-bench-front-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    return IoError(fmt::format("cannot make a scratch folder: {}", std::strerror(errno)));
  }
  const std::filesystem::path dir = pattern;
  ::chmod(dir.c_str(), 0711);
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{dir};

  serve::ServerOptions options;
  options.data_dir = dir / "data";
  options.admin_key = std::string(kAdminKey);
  options.http.port = 0;
  options.http.io_threads = 2;
  if (serve::GrpcBuilt()) options.grpc_listen = "127.0.0.1:0";
  LiveNodeOptions& node = options.backend.node;
  node.devices.backend = DeviceBackend::kEmulated;
  node.devices.emulated = {
      EmulatedGpuConfig{.name = "", .memory_bytes = kGiB, .link_bytes_per_second = 12e9}};
  node.snapshot_pool_bytes = 256 * kMiB;
  node.staging_bytes = 4 * kGiB;
  node.prepared_bytes_per_gpu = 64 * kMiB;
  node.policy = "keepalive";
  options.backend.function_program = bench.function_program;
  auto server = serve::Server::Start(std::move(options));
  if (!server.ok()) return server.status();

  net::HttpClient client({"127.0.0.1", (*server)->port()});
  auto call = [&](std::string method, std::string target, std::string_view key,
                  std::string body) -> Result<net::ClientResponse> {
    net::ClientRequest request;
    request.method = std::move(method);
    request.target = std::move(target);
    request.body = std::move(body);
    request.content_type = "application/json";
    request.headers.push_back({"Authorization", fmt::format("Bearer {}", key)});
    return client.Send(request);
  };
  auto tenant = call("POST", "/api/v1/tenants", kAdminKey, R"({"name":"bench"})");
  if (!tenant.ok() || tenant->status != 201) return Internal("cannot add the tenant");
  const std::string key =
      nlohmann::json::parse(tenant->body, nullptr, false).value("key", std::string());
  auto deployed = call("POST", "/api/v1/functions", key, std::string(kEchoSpec));
  if (!deployed.ok() || deployed->status != 201) return Internal("cannot deploy the echo function");
  auto settled = (*server)->backend().WaitUntilSettled("bench", "echo", std::chrono::seconds(60));
  if (!settled.ok() || settled->state != serve::ModelState::kReady) {
    return Internal("the echo function did not become ready");
  }

  const std::string body =
      R"({"id":"b","inputs":[{"name":"x","datatype":"FP32","shape":[1,16],"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}]})";
  const auto front = [&]() -> Status {
    auto answer = call("POST", "/v2/models/echo/infer", key, body);
    if (!answer.ok()) return answer.status();
    if (answer->status != 200) {
      return Internal(fmt::format("the server answered {}: {}", answer->status, answer->body));
    }
    return Status::Ok();
  };
  // Warm: the first request restores the function onto the GPU, where keepalive keeps it.
  for (int i = 0; i < 50; ++i) {
    GSHARE_RETURN_IF_ERROR(front().WithContext("warming up"));
  }
  std::string socket;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(dir / "data" / "run" / "instances", error)) {
    if (std::filesystem::exists(entry.path() / "socket")) socket = entry.path() / "socket";
  }
  if (socket.empty()) return Internal("cannot find the echo instance's socket");

  boost::asio::io_context loop;
  UnixKeepAlive kept(socket);
  PathFigures direct_kept, direct_new, through;
  for (int round = 0; round < bench.rounds; ++round) {
    auto a = Time(bench.requests, [&] { return kept.Post("/v2/models/echo/infer", body); });
    auto b = Time(bench.requests, [&] { return PostOnce(loop, socket, body); });
    auto c = Time(bench.requests, front);
    if (!a.ok()) return a.status().WithContext("direct (kept alive)");
    if (!b.ok()) return b.status().WithContext("direct (new connection)");
    if (!c.ok()) return c.status().WithContext("front");
    direct_kept.p50.push_back(Percentile(*a, 50));
    direct_kept.p99.push_back(Percentile(*a, 99));
    direct_new.p50.push_back(Percentile(*b, 50));
    direct_new.p99.push_back(Percentile(*b, 99));
    through.p50.push_back(Percentile(*c, 50));
    through.p99.push_back(Percentile(*c, 99));
    if (bench.progress) {
      bench.progress(fmt::format("  round {}: p50 direct {:.1f} / {:.1f} us, front {:.1f} us",
                                 round + 1, direct_kept.p50.back(), direct_new.p50.back(),
                                 through.p50.back()));
    }
  }
  FrontBenchResult result;
  result.direct_kept_alive_p50_us = NearestRankMedian(direct_kept.p50);
  result.direct_kept_alive_p99_us = NearestRankMedian(direct_kept.p99);
  result.direct_new_connection_p50_us = NearestRankMedian(direct_new.p50);
  result.direct_new_connection_p99_us = NearestRankMedian(direct_new.p99);
  result.front_p50_us = NearestRankMedian(through.p50);
  result.front_p99_us = NearestRankMedian(through.p99);
  result.overhead_p50_us = result.front_p50_us - std::min(result.direct_kept_alive_p50_us,
                                                          result.direct_new_connection_p50_us);

  // The protocols, in the same run.
  const std::uint16_t http_port = (*server)->port();
  std::vector<std::pair<std::string, std::function<std::unique_ptr<ProtocolCaller>()>>> paths = {
      {"http_json", [&] { return std::make_unique<HttpCaller>(http_port, key, false); }},
      {"http_binary", [&] { return std::make_unique<HttpCaller>(http_port, key, true); }}};
#if GSHARE_WITH_GRPC
  const int grpc_port = (*server)->grpc_port();
  if (grpc_port != 0) {
    paths.push_back({"grpc", [&] { return std::make_unique<GrpcCaller>(grpc_port, key); }});
  }
#endif
  for (const Payload& payload :
       {MakePayload("1x16", {1, 16}), MakePayload("1x3x224x224", {1, 3, 224, 224})}) {
    const bool large = payload.shape.size() > 2;
    const int sequential = std::max(10, bench.protocol_requests / (large ? 10 : 1));
    const int concurrent = std::max(bench.clients, bench.throughput_requests / (large ? 10 : 1));
    std::vector<std::unique_ptr<ProtocolCaller>> callers;
    for (const auto& [name, make] : paths) callers.push_back(make());
    std::vector<std::vector<double>> p50s(paths.size());
    for (int round = 0; round < bench.rounds; ++round) {
      for (std::size_t i = 0; i < paths.size(); ++i) {
        auto micros = Time(sequential, [&] { return callers[i]->Call(payload); });
        if (!micros.ok()) {
          return micros.status().WithContext(paths[i].first + " " + payload.size);
        }
        p50s[i].push_back(Percentile(*micros, 50));
      }
    }
    for (std::size_t i = 0; i < paths.size(); ++i) {
      auto rps = Throughput(paths[i].second, payload, bench.clients, concurrent);
      if (!rps.ok()) return rps.status().WithContext(paths[i].first + " " + payload.size);
      result.protocols.push_back({paths[i].first, payload.size, NearestRankMedian(p50s[i]), *rps});
      if (bench.progress) {
        bench.progress(fmt::format("  {} {}: p50 {:.1f} us, {:.0f} requests/s", paths[i].first,
                                   payload.size, result.protocols.back().p50_us, *rps));
      }
    }
  }
  return result;
}

}  // namespace gshare::measure
