// gshare bench front: what the serving front adds to a request, measured in one run.
//
// A `gshare serve` server runs in this process (one emulated GPU, the keepalive policy so that
// the function stays resident and no request waits for a restore) with the bundled echo function
// deployed for one tenant. In rounds, interleaved, one client sends the same small inference
// request sequentially:
//   - direct: to the echo function's own Unix socket, as the best a caller can do there (the
//     faster of a kept-alive connection and a connection per request, which is the node's way);
//   - front: to the server over TCP on a kept-alive connection: key check, JSON parse and
//     validation, the scheduler, the live executor, the function protocol, the answer.
// It prints the median over rounds of each path's p50 and p99 and the difference of the p50s
// (the front's overhead), and writes them as JSON with --out.
#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/program_folder.h"
#include "gshare/net/http_client.h"
#include "gshare/net/unix_http.h"
#include "gshare/serve/server.h"

namespace gshare::cli {
namespace {

namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

struct BenchFrontFlags {
  int requests = 2000;
  int rounds = 7;
  std::string out;
};

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

int Fail(const std::string& message) {
  std::fprintf(stderr, "gshare bench front: %s\n", message.c_str());
  return 1;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank =
      static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double Median(std::vector<double> values) { return Percentile(std::move(values), 50); }

// Microseconds each of `n` sequential calls of `call` took; an error stops it.
Result<std::vector<double>> Time(int n, const std::function<Status()>& call) {
  std::vector<double> micros;
  micros.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto start = Clock::now();
    GSHARE_RETURN_IF_ERROR(call());
    micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
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

int RunBenchFront(const BenchFrontFlags& flags) {
  const Result<std::filesystem::path> folder = ProgramFolder();
  if (!folder.ok()) return Fail(folder.status().ToString());
  char pattern[] = "/tmp/gshare-bench-front-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) return Fail("mkdtemp failed");
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
  options.backend.function_program = *folder / "gshare-function";
  auto server = serve::Server::Start(std::move(options));
  if (!server.ok()) return Fail(server.status().ToString());

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
  if (!tenant.ok() || tenant->status != 201) return Fail("cannot add the tenant");
  const std::string key =
      nlohmann::json::parse(tenant->body, nullptr, false).value("key", std::string());
  auto deployed = call("POST", "/api/v1/functions", key, std::string(kEchoSpec));
  if (!deployed.ok() || deployed->status != 201) return Fail("cannot deploy the echo function");
  auto settled = (*server)->backend().WaitUntilSettled("bench", "echo", std::chrono::seconds(60));
  if (!settled.ok() || settled->state != serve::ModelState::kReady) {
    return Fail("the echo function did not become ready");
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
    if (Status s = front(); !s.ok()) return Fail(s.ToString());
  }
  std::string socket;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(dir / "data" / "run" / "instances", error)) {
    if (std::filesystem::exists(entry.path() / "socket")) socket = entry.path() / "socket";
  }
  if (socket.empty()) return Fail("cannot find the echo instance's socket");

  boost::asio::io_context loop;
  UnixKeepAlive kept(socket);
  PathFigures direct_kept, direct_new, through;
  for (int round = 0; round < flags.rounds; ++round) {
    auto a = Time(flags.requests, [&] { return kept.Post("/v2/models/echo/infer", body); });
    auto b = Time(flags.requests, [&] { return PostOnce(loop, socket, body); });
    auto c = Time(flags.requests, front);
    if (!a.ok()) return Fail("direct (kept alive): " + a.status().ToString());
    if (!b.ok()) return Fail("direct (new connection): " + b.status().ToString());
    if (!c.ok()) return Fail("front: " + c.status().ToString());
    direct_kept.p50.push_back(Percentile(*a, 50));
    direct_kept.p99.push_back(Percentile(*a, 99));
    direct_new.p50.push_back(Percentile(*b, 50));
    direct_new.p99.push_back(Percentile(*b, 99));
    through.p50.push_back(Percentile(*c, 50));
    through.p99.push_back(Percentile(*c, 99));
    std::fprintf(stderr, "  round %d: p50 direct %.1f / %.1f us, front %.1f us\n", round + 1,
                 direct_kept.p50.back(), direct_new.p50.back(), through.p50.back());
  }
  const double kept_p50 = Median(direct_kept.p50);
  const double new_p50 = Median(direct_new.p50);
  const double best_direct = std::min(kept_p50, new_p50);
  const double front_p50 = Median(through.p50);
  std::printf(
      "%d rounds of %d sequential requests each (echo, 16 FP32 values), medians of the "
      "rounds:\n",
      flags.rounds, flags.requests);
  std::printf("  direct to the function, kept-alive connection:  p50 %8.1f us  p99 %8.1f us\n",
              kept_p50, Median(direct_kept.p99));
  std::printf("  direct to the function, connection per request: p50 %8.1f us  p99 %8.1f us\n",
              new_p50, Median(direct_new.p99));
  std::printf("  through the front (TCP, kept alive):            p50 %8.1f us  p99 %8.1f us\n",
              front_p50, Median(through.p99));
  std::printf("  front overhead, p50 over the best direct path:  %.1f us (target: at most 50)\n",
              front_p50 - best_direct);
  if (!flags.out.empty()) {
    nlohmann::json doc = {{"rounds", flags.rounds},
                          {"requests_per_round", flags.requests},
                          {"direct_kept_alive_p50_us", kept_p50},
                          {"direct_new_connection_p50_us", new_p50},
                          {"front_p50_us", front_p50},
                          {"front_p99_us", Median(through.p99)},
                          {"overhead_p50_us", front_p50 - best_direct}};
    std::ofstream(flags.out) << doc.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

void AddBenchFrontCommand(CLI::App& bench, CommandContext& context) {
  auto flags = std::make_shared<BenchFrontFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "front", "What the serving front adds to a request over calling the function directly");
  cmd->add_option("--requests", flags->requests, "Sequential requests per path and round")
      ->check(WholeIn(10, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--rounds", flags->rounds, "Rounds (the paths interleaved)")
      ->check(WholeIn(1, 1000))
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "Write the figures as JSON here");
  cmd->callback([flags, &context] { context.exit_code = RunBenchFront(*flags); });
}

}  // namespace gshare::cli
