#include "gshare/net/http_client.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <mutex>
#include <thread>
#include <vector>

#include "gshare/net/http_server.h"

namespace gshare::net {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

TEST(ParseHttpUrlTest, ReadsHostAndPort) {
  auto url = ParseHttpUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->host, "127.0.0.1");
  EXPECT_EQ(url->port, 8080);
  EXPECT_EQ(url->HostPort(), "127.0.0.1:8080");

  url = ParseHttpUrl("HTTP://gshare.example/");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->host, "gshare.example");
  EXPECT_EQ(url->port, 80);

  url = ParseHttpUrl("http://[::1]:9000");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 9000);
  EXPECT_EQ(url->HostPort(), "[::1]:9000");
}

TEST(ParseHttpUrlTest, RefusesWhatItCannotSpeak) {
  auto https = ParseHttpUrl("https://gshare.example:443");
  ASSERT_FALSE(https.ok());
  EXPECT_EQ(https.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(https.status().message().find("plain-HTTP proxy"), std::string::npos);
  EXPECT_NE(https.status().message().find("the server itself"), std::string::npos);
  for (const char* bad :
       {"127.0.0.1:8080", "ftp://host", "http://", "http://host:", "http://host:0",
        "http://host:65536", "http://host:80x", "http://user@host", "http://host/api",
        "http://host?x=1", "http://[::1", "http://[zz]:1", "http://host name"}) {
    auto url = ParseHttpUrl(bad);
    EXPECT_FALSE(url.ok()) << bad;
    if (!url.ok()) {
      EXPECT_EQ(url.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

std::unique_ptr<HttpServer> StartServer(HttpServer::Handler handler, HttpServerLimits limits = {}) {
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.io_threads = 2;
  options.limits = limits;
  auto server = HttpServer::Start(std::move(options), std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(*server) : nullptr;
}

HttpEndpoint Local(std::uint16_t port) { return {"127.0.0.1", port}; }

// Answers "METHOD TARGET BODY [AUTHORIZATION] [CONTENT-TYPE]", with a header of its own.
void Echo(ServerRequest request, Responder responder) {
  HttpResponse response{200,
                        request.method + " " + request.target + " " + request.body + " [" +
                            request.authorization + "] [" + request.content_type + "]",
                        "text/plain"};
  response.headers.emplace_back("X-Echo", std::string(request.Header("X-Trace")));
  responder.Respond(std::move(response));
}

TEST(HttpClientTest, SendsRequestsOnOneKeptAliveConnection) {
  auto server = StartServer(Echo);
  ASSERT_NE(server, nullptr);
  HttpClient client(Local(server->port()));

  ClientRequest post;
  post.method = "POST";
  post.target = "/v2/models/echo/infer";
  post.body = "{\"inputs\": []}";
  post.content_type = "application/json";
  post.headers = {{"Authorization", "Bearer k1"}, {"X-Trace", "t-1"}};
  auto answer = client.Send(post);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body,
            "POST /v2/models/echo/infer {\"inputs\": []} [Bearer k1] [application/json]");
  EXPECT_EQ(answer->Header("x-echo"), "t-1");
  EXPECT_EQ(answer->Header("Content-Type"), "text/plain");
  EXPECT_EQ(answer->Header("X-Missing"), "");

  for (int i = 0; i < 3; ++i) {
    answer = client.Send({.method = "GET", .target = "/metrics?i=" + std::to_string(i)});
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    EXPECT_EQ(answer->body, "GET /metrics?i=" + std::to_string(i) + "  [] []");
  }
  answer = client.Send({.method = "HEAD", .target = "/head"});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, "");
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST(HttpClientTest, ReconnectsAfterTheServerClosed) {
  // 413 closes the connection (with Connection: close); the next request opens another.
  HttpServerLimits limits;
  limits.body_bytes = 16;
  auto server = StartServer(Echo, limits);
  ASSERT_NE(server, nullptr);
  HttpClient client(Local(server->port()));
  auto answer = client.Send({.method = "POST", .target = "/big", .body = std::string(100, 'x')});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->status, 413);
  answer = client.Send({.method = "GET", .target = "/after"});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(client.connections_opened(), 2u);

  // A closed connection on the client's side is reopened the same way.
  client.Close();
  answer = client.Send({.method = "GET", .target = "/again"});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(client.connections_opened(), 3u);
}

// A server that answers one request per connection as if it kept it alive, then closes it: the
// server that ends an idle kept-alive connection, met at the worst moment.
class OneShotServer {
 public:
  OneShotServer() : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] { Serve(); });
  }
  ~OneShotServer() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::vector<std::string> targets() {
    std::lock_guard lock(mutex_);
    return targets_;
  }

 private:
  void Serve() {
    for (int connection = 0; connection < 2; ++connection) {
      boost::system::error_code error;
      tcp::socket socket(io_);
      acceptor_.accept(socket, error);
      if (error) return;
      boost::beast::flat_buffer buffer;
      http::request<http::string_body> request;
      http::read(socket, buffer, request, error);
      if (error) return;
      {
        std::lock_guard lock(mutex_);
        targets_.emplace_back(request.target());
      }
      http::response<http::string_body> response{http::status::ok, 11};
      response.keep_alive(true);
      response.body() = "answered";
      response.prepare_payload();
      http::write(socket, response, error);
      socket.close(error);
    }
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::string> targets_;
};

TEST(HttpClientTest, SendsAgainWhenAKeptAliveConnectionWasClosed) {
  OneShotServer server;
  HttpClient client(Local(server.port()));
  auto answer = client.Send({.method = "GET", .target = "/first"});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  answer = client.Send({.method = "GET", .target = "/second"});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->body, "answered");
  EXPECT_EQ(client.connections_opened(), 2u);
  EXPECT_EQ(server.targets(), (std::vector<std::string>{"/first", "/second"}));
}

TEST(HttpClientTest, GivesUpAtTheDeadlineAndRecovers) {
  std::mutex mutex;
  std::vector<Responder> held;  // answered (500) when the test ends
  auto server = StartServer([&](ServerRequest request, Responder responder) {
    if (request.target == "/quick") return responder.Respond({200, "quick"});
    std::lock_guard lock(mutex);
    held.push_back(responder);
  });
  ASSERT_NE(server, nullptr);
  HttpClient client(Local(server->port()));
  auto answer = client.Send({.method = "GET", .target = "/never"}, std::chrono::milliseconds(50));
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), StatusCode::kDeadlineExceeded);
  answer = client.Send({.method = "GET", .target = "/quick"});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->body, "quick");
  EXPECT_EQ(client.connections_opened(), 2u);
  server->Shutdown(std::chrono::milliseconds(0));
}

TEST(HttpClientTest, BoundsTheAnswer) {
  auto server = StartServer([](ServerRequest, Responder responder) {
    responder.Respond({200, std::string(4096, 'a'), "text/plain"});
  });
  ASSERT_NE(server, nullptr);
  HttpClientOptions options;
  options.limits.body_bytes = 1024;
  HttpClient client(Local(server->port()), options);
  auto answer = client.Send({.method = "GET", .target = "/large"});
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(answer.status().message().find("larger than"), std::string::npos)
      << answer.status().message();
}

TEST(HttpClientTest, SaysWhenNothingListens) {
  std::uint16_t port = 0;
  {
    asio::io_context io;
    tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = acceptor.local_endpoint().port();
  }  // closed: the port refuses connections
  HttpClient client(Local(port));
  auto answer = client.Send({.method = "GET", .target = "/"});
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(answer.status().message().find("cannot connect"), std::string::npos);
  EXPECT_EQ(client.connections_opened(), 0u);
}

TEST(HttpClientTest, RefusesMalformedRequests) {
  HttpClient client(Local(1));  // nothing is sent
  const std::vector<ClientRequest> bad = {
      {.method = "FETCH", .target = "/"},
      {.method = "GET", .target = "no-slash"},
      {.method = "GET", .target = "/a b"},
      {.method = "GET", .target = "/", .headers = {{"X-Injected", "a\r\nEvil: 1"}}},
      {.method = "GET", .target = "/", .headers = {{"Bad Name", "1"}}},
      {.method = "GET", .target = "/", .headers = {{"host", "elsewhere"}}},
      {.method = "GET", .target = "/", .headers = {{"Content-Length", "5"}}},
  };
  for (const ClientRequest& request : bad) {
    auto answer = client.Send(request);
    ASSERT_FALSE(answer.ok()) << request.target;
    EXPECT_EQ(answer.status().code(), StatusCode::kInvalidArgument) << answer.status().ToString();
  }
  EXPECT_EQ(client.connections_opened(), 0u);
}

}  // namespace
}  // namespace gshare::net
