// Requests per second through the front's HTTP server (net/http_server.h) with a trivial handler
// that answers at once, over loopback: N client connections, each on its own thread, sending
// keep-alive requests one after another for a fixed time. Prints the figure and the server's
// share of the machine (its io threads); the clients run on the same machine, so the figure is a
// floor for the server alone.
//
//   ./build/bench/gshare_http_server_bench [--connections N] [--seconds S] [--io-threads T]
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gshare/net/http_server.h"

namespace gshare {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// Sends requests on one connection until `stop`; returns how many were answered 200.
long Drive(std::uint16_t port, const std::atomic<bool>& stop) {
  asio::io_context io;
  tcp::socket socket(io);
  boost::system::error_code error;
  socket.connect({asio::ip::make_address("127.0.0.1"), port}, error);
  if (error) return 0;
  socket.set_option(tcp::no_delay(true), error);
  const std::string request =
      "POST /v2/models/echo/infer HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
      "Content-Length: 2\r\n\r\n{}";
  boost::beast::flat_buffer buffer;
  long answered = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    asio::write(socket, asio::buffer(request), error);
    if (error) break;
    http::response<http::string_body> response;
    http::read(socket, buffer, response, error);
    if (error) break;
    if (response.result_int() == 200) ++answered;
  }
  return answered;
}

int Main(int argc, char** argv) {
  int connections = 16;
  double seconds = 5;
  unsigned io_threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--connections") == 0) {
      connections = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--seconds") == 0) {
      seconds = std::atof(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--io-threads") == 0) {
      io_threads = static_cast<unsigned>(std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "usage: %s [--connections N] [--seconds S] [--io-threads T]\n", argv[0]);
      return 2;
    }
  }
  net::HttpServerOptions options;
  options.port = 0;
  options.io_threads = io_threads;
  auto server = net::HttpServer::Start(options, [](net::ServerRequest, net::Responder responder) {
    responder.Respond({200, "{\"outputs\": []}"});
  });
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  std::atomic<bool> stop{false};
  std::vector<long> answered(static_cast<std::size_t>(connections), 0);
  std::vector<std::thread> clients;
  const auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < connections; ++c) {
    clients.emplace_back(
        [&, c] { answered[static_cast<std::size_t>(c)] = Drive((*server)->port(), stop); });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto& client : clients) client.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  long total = 0;
  for (const long n : answered) total += n;
  (*server)->Shutdown(std::chrono::seconds(1));
  std::printf(
      "http_server: %d connections, %u io threads (0 = all cores), %.1f s: %ld requests, "
      "%.0f requests/s\n",
      connections, io_threads, elapsed, total, static_cast<double>(total) / elapsed);
  return 0;
}

}  // namespace
}  // namespace gshare

int main(int argc, char** argv) { return gshare::Main(argc, argv); }
