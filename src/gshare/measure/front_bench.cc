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
#include <vector>

#include "gshare/common/clock.h"
#include "gshare/measure/stats.h"
#include "gshare/net/http_client.h"
#include "gshare/net/unix_http.h"
#include "gshare/serve/server.h"

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
  options.http.io_threads = 1;
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
  return result;
}

}  // namespace gshare::measure
