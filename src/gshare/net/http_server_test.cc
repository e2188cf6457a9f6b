#include "gshare/net/http_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace gshare::net {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Response = http::response<http::string_body>;

// Echoes what it got: "METHOD TARGET BODY", with the authorization and content type in headers
// the test can read back through the body.
void Echo(ServerRequest request, Responder responder) {
  responder.Respond({200,
                     request.method + " " + request.target + " " + request.body + " [" +
                         request.authorization + "] [" + request.content_type + "]",
                     "text/plain"});
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

// A plain synchronous client on one connection. Reads give up after 30 s (a safety net so that a
// broken server fails the test instead of hanging it; no assertion depends on it).
class Client {
 public:
  explicit Client(std::uint16_t port) : socket_(io_) {
    boost::system::error_code error;
    socket_.connect({asio::ip::make_address("127.0.0.1"), port}, error);
    connected_ = !error;
    const timeval limit{30, 0};
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  }
  bool connected() const { return connected_; }

  void Write(std::string_view raw) {
    boost::system::error_code ignored;  // the server may have closed already: reads tell
    asio::write(socket_, asio::buffer(raw.data(), raw.size()), ignored);
  }
  // The next response, or nullopt when the connection ended (or broke) instead.
  std::optional<Response> Read(bool to_head = false) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    parser.skip(to_head);  // an answer to HEAD has no body, whatever its Content-Length says
    boost::system::error_code error;
    http::read(socket_, buffer_, parser, error);
    if (error) return std::nullopt;
    return parser.release();
  }
  // True when the server closed the connection (no further response).
  bool Ended() { return !Read().has_value(); }
  void Close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }
  // Closes with a reset (SO_LINGER 0), as a client that crashed would.
  void Reset() {
    boost::system::error_code ignored;
    socket_.set_option(asio::socket_base::linger(true, 0), ignored);
    socket_.close(ignored);
  }

 private:
  asio::io_context io_;
  tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
  bool connected_ = false;
};

std::string Request(std::string_view method, std::string_view target, std::string_view body = "",
                    std::string_view extra_headers = "") {
  std::string raw = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n";
  raw += extra_headers;
  if (!body.empty() || method == "POST") {
    raw += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  raw += "\r\n";
  raw += body;
  return raw;
}

// Requests the handler holds until the test releases them.
class Held {
 public:
  Held() {
    for (std::size_t i = 0; i < arrived_.size(); ++i) seen_[i] = arrived_[i].get_future().share();
  }
  HttpServer::Handler Handler() {
    return [this](ServerRequest request, Responder responder) {
      if (request.target == "/quick") return responder.Respond({200, "quick"});
      std::lock_guard lock(mutex_);
      held_.push_back(responder);
      arrived_[held_.size() - 1].set_value();
    };
  }
  // Blocks until the `index`th held request (from 0) has reached the handler.
  Responder WaitFor(std::size_t index) {
    seen_[index].wait();
    std::lock_guard lock(mutex_);
    return held_[index];
  }

 private:
  std::mutex mutex_;
  std::vector<Responder> held_;
  std::array<std::promise<void>, 8> arrived_;
  std::array<std::shared_future<void>, 8> seen_;
};

TEST(HttpServerTest, KeepsAliveAndAnswersInOrder) {
  auto server = StartServer(Echo);
  ASSERT_NE(server, nullptr);
  ASSERT_NE(server->port(), 0);
  Client client(server->port());
  ASSERT_TRUE(client.connected());
  // Three requests at once (pipelined), answered in order on the one connection.
  client.Write(Request("GET", "/v2/health/live") +
               Request("POST", "/v2/models/m/infer", "{\"x\": 1}",
                       "Authorization: Bearer k1\r\nContent-Type: application/json\r\n") +
               Request("GET", "/v2"));
  auto first = client.Read();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->result_int(), 200);
  EXPECT_EQ(first->body(), "GET /v2/health/live  [] []");
  EXPECT_TRUE(first->keep_alive());
  auto second = client.Read();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->body(), "POST /v2/models/m/infer {\"x\": 1} [Bearer k1] [application/json]");
  EXPECT_EQ((*second)[http::field::content_type], "text/plain");
  auto third = client.Read();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->body(), "GET /v2  [] []");
  // One after another on the same connection.
  for (int i = 0; i < 5; ++i) {
    client.Write(Request("POST", "/n", std::to_string(i)));
    auto answer = client.Read();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->body(), "POST /n " + std::to_string(i) + " [] []");
  }
  // HEAD: the header a GET would get, no body, and the connection goes on.
  client.Write(Request("HEAD", "/h"));
  auto head = client.Read(/*to_head=*/true);
  ASSERT_TRUE(head);
  EXPECT_EQ((*head)[http::field::content_length], "14");  // "HEAD /h  [] []"
  EXPECT_TRUE(head->body().empty());
  client.Write(Request("GET", "/after-head"));
  auto after = client.Read();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->body(), "GET /after-head  [] []");
  EXPECT_EQ(server->connections(), 1u);
}

TEST(HttpMessageTest, ErrorBodiesAreValidJsonWhateverTheMessageHolds) {
  EXPECT_EQ(JsonErrorResponse(400, "a \"b\" \\ \n").body,
            "{\"error\": \"a \\\"b\\\" \\\\ \\u000a\"}");
  // Well-formed UTF-8 passes; a stray continuation byte, a truncated sequence, an overlong form
  // and a surrogate each become U+FFFD.
  EXPECT_EQ(JsonErrorResponse(400, "caf\xc3\xa9 \xe2\x82\xac").body,
            "{\"error\": \"caf\xc3\xa9 \xe2\x82\xac\"}");
  EXPECT_EQ(JsonErrorResponse(400, "x\x80y\xe2\x82 \xc0\xaf \xed\xa0\x80").body,
            "{\"error\": \"x\\ufffdy\\ufffd\\ufffd \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd\"}");
}

TEST(HttpServerTest, WritesTheHandlersHeaderFields) {
  auto server = StartServer([](ServerRequest, Responder responder) {
    HttpResponse response = JsonErrorResponse(401, "no key");
    response.headers.emplace_back("WWW-Authenticate", "Bearer");
    response.headers.emplace_back("X-Extra", "1");
    responder.Respond(std::move(response));
  });
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  client.Write(Request("GET", "/v2"));
  auto answer = client.Read();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 401);
  EXPECT_EQ((*answer)[http::field::www_authenticate], "Bearer");
  EXPECT_EQ((*answer)["X-Extra"], "1");
  EXPECT_EQ((*answer)[http::field::content_type], "application/json");
}

TEST(HttpServerTest, HonoursConnectionCloseAndHttp10) {
  auto server = StartServer(Echo);
  ASSERT_NE(server, nullptr);
  {
    Client client(server->port());
    client.Write(Request("GET", "/a", "", "Connection: close\r\n"));
    auto answer = client.Read();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 200);
    EXPECT_FALSE(answer->keep_alive());
    EXPECT_TRUE(client.Ended());
  }
  {
    Client client(server->port());  // HTTP/1.0: closed after the answer unless asked otherwise
    client.Write("GET /b HTTP/1.0\r\n\r\n");
    auto answer = client.Read();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->version(), 10u);
    EXPECT_EQ(answer->body(), "GET /b  [] []");
    EXPECT_TRUE(client.Ended());
  }
  {
    Client client(server->port());  // HTTP/1.0 with keep-alive
    client.Write("GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    auto answer = client.Read();
    ASSERT_TRUE(answer);
    EXPECT_TRUE(answer->keep_alive());
    client.Write("GET /d HTTP/1.0\r\n\r\n");
    answer = client.Read();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->body(), "GET /d  [] []");
    EXPECT_TRUE(client.Ended());
  }
}

TEST(HttpServerTest, AnswersLaterFromAnotherThread) {
  Held held;
  auto server = StartServer(held.Handler());
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  client.Write(Request("POST", "/slow", "payload"));
  Responder responder = held.WaitFor(0);
  EXPECT_EQ(server->in_flight(), 1u);
  EXPECT_FALSE(responder.Cancelled());
  // A second request sent while the first is in flight waits its turn.
  client.Write(Request("GET", "/quick"));
  std::thread worker([responder] {
    responder.Respond({201, "{\"done\": true}"});
    responder.Respond({500, "ignored: the first answer counts"});
  });
  auto answer = client.Read();
  worker.join();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 201);
  EXPECT_EQ(answer->body(), "{\"done\": true}");
  EXPECT_EQ((*answer)[http::field::content_type], "application/json");
  answer = client.Read();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->body(), "quick");
  // The connection is still usable.
  client.Write(Request("GET", "/quick"));
  answer = client.Read();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->body(), "quick");
}

// Work handed to Responder::Run runs on the connection's io thread, not the caller's, and an
// answer given from it is written; once the client has gone, work is dropped unrun, with what it
// holds.
TEST(HttpServerTest, RunHandsWorkToTheConnectionsThread) {
  Held held;
  auto server = StartServer(held.Handler());
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  client.Write(Request("POST", "/slow", "payload"));
  Responder responder = held.WaitFor(0);
  std::promise<std::thread::id> ran_on;
  std::thread::id caller;
  std::thread worker([&] {
    caller = std::this_thread::get_id();
    responder.Run([&ran_on, responder] {
      ran_on.set_value(std::this_thread::get_id());
      responder.Respond({200, "from the io thread", "text/plain"});
    });
  });
  worker.join();
  auto answer = client.Read();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 200);
  EXPECT_EQ(answer->body(), "from the io thread");
  EXPECT_NE(ran_on.get_future().get(), caller);

  client.Write(Request("POST", "/slow", "again"));
  Responder gone = held.WaitFor(1);
  std::promise<void> cancelled;
  gone.OnCancel([&cancelled] { cancelled.set_value(); });
  client.Close();
  cancelled.get_future().get();
  auto held_by_work = std::make_shared<int>(0);
  std::weak_ptr<int> watch = held_by_work;
  gone.Run([held_by_work] { ADD_FAILURE() << "ran for a closed connection"; });
  held_by_work.reset();
  EXPECT_TRUE(watch.expired());
}

TEST(HttpServerTest, AHandlerThatFailsOrForgetsAnswers500) {
  auto server = StartServer([](ServerRequest request, Responder responder) {
    if (request.target == "/throw") throw std::runtime_error("boom");
    (void)responder;  // dropped without an answer
  });
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  client.Write(Request("GET", "/throw"));
  auto answer = client.Read();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 500);
  EXPECT_NE(answer->body().find("boom"), std::string::npos);
  client.Write(Request("GET", "/forget"));
  answer = client.Read();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 500);
  EXPECT_EQ(answer->body(), "{\"error\": \"the handler gave no answer\"}");
}

TEST(HttpServerTest, HeaderPastTheLimitIs431) {
  auto server = StartServer(Echo, {.header_bytes = 1024});
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  client.Write(Request("GET", "/", "", "X-Big: " + std::string(4096, 'a') + "\r\n"));
  auto answer = client.Read();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 431);
  EXPECT_EQ(answer->body(), "{\"error\": \"the request header is too large\"}");
  EXPECT_TRUE(client.Ended());
}

TEST(HttpServerTest, BodyPastTheLimitIs413BeforeItIsRead) {
  auto server = StartServer(Echo, {.body_bytes = 1000});
  ASSERT_NE(server, nullptr);
  {
    // Only the header is sent: the answer comes without the server waiting for the body.
    Client client(server->port());
    client.Write("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000\r\n\r\n");
    auto answer = client.Read();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 413);
    EXPECT_TRUE(client.Ended());
  }
  {
    // A chunked body is refused once it grows past the limit.
    Client client(server->port());
    std::string chunks = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 3; ++i) chunks += "258\r\n" + std::string(600, 'x') + "\r\n";
    client.Write(chunks);
    auto answer = client.Read();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 413);
  }
  {
    // A body within the limit passes.
    Client client(server->port());
    client.Write(Request("POST", "/", std::string(1000, 'y')));
    auto answer = client.Read();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 200);
  }
}

TEST(HttpServerTest, MalformedRequestLineAndChunkingAre400) {
  auto server = StartServer(Echo);
  ASSERT_NE(server, nullptr);
  for (const std::string& raw :
       {std::string("GET /a b HTTP/1.1\r\nHost: t\r\n\r\n"),
        std::string("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n"
                    "0\r\n\r\n")}) {
    Client client(server->port());
    client.Write(raw);
    auto answer = client.Read();
    ASSERT_TRUE(answer) << raw;
    EXPECT_EQ(answer->result_int(), 400) << raw;
    EXPECT_NE(answer->body().find("\"error\""), std::string::npos);
    EXPECT_TRUE(client.Ended());
  }
}

TEST(HttpServerTest, SlowClientIsClosed) {
  // A long idle timeout: however late the client's first bytes come, they start a request.
  auto server = StartServer(Echo, {.read_timeout = std::chrono::milliseconds(50),
                                   .idle_timeout = std::chrono::seconds(60)});
  ASSERT_NE(server, nullptr);
  {
    // Part of a header, then nothing: 408, then the connection is closed.
    Client client(server->port());
    client.Write("GET / HTTP/1.1\r\nHost: t\r\n");
    auto answer = client.Read();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 408);
    EXPECT_TRUE(client.Ended());
  }
  {
    // A body that stops short of its Content-Length.
    Client client(server->port());
    client.Write("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc");
    auto answer = client.Read();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->result_int(), 408);
    EXPECT_TRUE(client.Ended());
  }
  {
    // A connection that sends nothing at all is closed without an answer.
    auto idle = StartServer(Echo, {.idle_timeout = std::chrono::milliseconds(50)});
    ASSERT_NE(idle, nullptr);
    Client client(idle->port());
    EXPECT_TRUE(client.Ended());
  }
}

TEST(HttpServerTest, HandlerLearnsThatTheClientWentAway) {
  Held held;
  auto server = StartServer(held.Handler());
  ASSERT_NE(server, nullptr);
  for (const bool reset : {false, true}) {
    Client client(server->port());
    client.Write(Request("POST", "/slow", "x"));
    Responder responder = held.WaitFor(reset ? 1 : 0);
    std::promise<void> cancelled;
    responder.OnCancel([&cancelled] { cancelled.set_value(); });
    if (reset) {
      client.Reset();
    } else {
      client.Close();
    }
    cancelled.get_future().get();
    EXPECT_TRUE(responder.Cancelled());
    if (!reset) responder.Respond({200, "too late"});  // dropped, harmlessly
  }
  // Registering after the client went away (and before any answer) runs the callback at once.
  Responder late = held.WaitFor(1);
  bool ran = false;
  late.OnCancel([&ran] { ran = true; });
  EXPECT_TRUE(ran);
  Client client(server->port());
  client.Write(Request("GET", "/quick"));
  auto answer = client.Read();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 200);
}

TEST(HttpServerTest, TooManyInFlightIs503) {
  Held held;
  auto server = StartServer(held.Handler(), {.max_in_flight = 1});
  ASSERT_NE(server, nullptr);
  Client first(server->port());
  first.Write(Request("GET", "/slow"));
  Responder responder = held.WaitFor(0);
  Client second(server->port());
  second.Write(Request("GET", "/quick"));
  auto refused = second.Read();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result_int(), 503);
  EXPECT_TRUE(refused->keep_alive());  // the connection stays open for a retry
  responder.Respond({200, "slow"});
  auto answer = first.Read();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->body(), "slow");
  second.Write(Request("GET", "/quick"));
  auto retried = second.Read();
  ASSERT_TRUE(retried);
  EXPECT_EQ(retried->result_int(), 200);
}

TEST(HttpServerTest, TooManyConnectionsAre503AndClosed) {
  auto server = StartServer(Echo, {.max_connections = 1});
  ASSERT_NE(server, nullptr);
  Client first(server->port());
  first.Write(Request("GET", "/one"));
  ASSERT_TRUE(first.Read());  // served: it holds the one place
  Client second(server->port());
  second.Write(Request("GET", "/two"));
  auto refused = second.Read();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result_int(), 503);
  EXPECT_FALSE(refused->keep_alive());
  EXPECT_TRUE(second.Ended());
  first.Write(Request("GET", "/three"));
  auto answer = first.Read();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->result_int(), 200);
}

TEST(HttpServerTest, GracefulShutdownAnswersInFlightAndRefusesNew) {
  Held held;
  auto server = StartServer(held.Handler());
  ASSERT_NE(server, nullptr);
  const std::uint16_t port = server->port();
  Client busy(port);
  busy.Write(Request("POST", "/slow", "work"));
  Responder responder = held.WaitFor(0);
  Client idle(port);
  idle.Write(Request("GET", "/quick"));
  ASSERT_TRUE(idle.Read());

  server->BeginShutdown(std::chrono::minutes(5));
  // A new request on an open connection: 503, and the connection closes.
  idle.Write(Request("GET", "/quick"));
  auto refused = idle.Read();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result_int(), 503);
  EXPECT_TRUE(idle.Ended());
  // The request in flight is answered, then its connection closes.
  std::thread worker([responder] { responder.Respond({200, "finished"}); });
  auto answer = busy.Read();
  worker.join();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->body(), "finished");
  EXPECT_FALSE(answer->keep_alive());
  EXPECT_TRUE(busy.Ended());
  server->Wait();
  EXPECT_EQ(server->connections(), 0u);
  // No longer listening: a new connection is refused.
  Client after(port);
  EXPECT_FALSE(after.connected() && after.Read().has_value());
}

TEST(HttpServerTest, DrainDeadlineClosesWhatIsLeft) {
  Held held;
  auto server = StartServer(held.Handler());
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  client.Write(Request("POST", "/slow", "never answered"));
  Responder responder = held.WaitFor(0);
  server->Shutdown(std::chrono::milliseconds(0));
  EXPECT_TRUE(responder.Cancelled());
  EXPECT_TRUE(client.Ended());
  server.reset();
  responder.Respond({200, "after the server is gone"});  // harmless
}

TEST(HttpServerTest, ShutdownFromASignalHandlerPath) {
  auto server = StartServer(Echo);
  ASSERT_NE(server, nullptr);
  HttpServer* raw = server.get();
  // What a boost::asio::signal_set handler does: runs on the server's loop and begins shutdown.
  boost::asio::post(server->io_context(), [raw] { raw->BeginShutdown(std::chrono::seconds(1)); });
  server->Wait();
  Client after(raw->port());
  EXPECT_FALSE(after.connected() && after.Read().has_value());
}

TEST(HttpServerTest, AnswersExpectContinue) {
  auto server = StartServer(Echo);
  ASSERT_NE(server, nullptr);
  Client client(server->port());
  client.Write("POST /e HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  auto go_on = client.Read();
  ASSERT_TRUE(go_on);
  EXPECT_EQ(go_on->result_int(), 100);
  client.Write("body");
  auto answer = client.Read();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->body(), "POST /e body [] []");
}

// Malformed inputs, each on a fresh connection: every one ends in a 4xx (or 505) or a close, and
// the server serves a good request afterwards.
// The header check sees the header before any of the body is read: its refusal is the answer (no
// `100 Continue` before it), the handler never runs, and a refused request with a body ends its
// connection unread; one without a body keeps the connection, and what the check lets through is
// read and handled as before.
TEST(HttpServerTest, TheHeaderCheckRefusesBeforeTheBodyIsRead) {
  std::atomic<int> handled{0};
  std::mutex seen_mutex;
  std::vector<std::string> seen;  // what the check saw: target, body, declared length
  HttpServerOptions options;
  options.port = 0;
  options.io_threads = 2;
  auto started = HttpServer::Start(
      options,
      [&](ServerRequest request, Responder responder) {
        ++handled;
        Echo(std::move(request), std::move(responder));
      },
      [&](const ServerRequest& head) -> std::optional<HttpResponse> {
        {
          std::lock_guard lock(seen_mutex);
          seen.push_back(
              head.target + "|" + head.body + "|" +
              (head.declared_length ? std::to_string(*head.declared_length) : "chunked"));
        }
        if (head.authorization == "Bearer good") return std::nullopt;
        return JsonErrorResponse(401, "no key");
      });
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  auto& server = **started;
  {
    // Expect: 100-continue, refused: the first answer is the refusal, not 100 Continue.
    Client client(server.port());
    client.Write(
        "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 62914560\r\nExpect: 100-continue\r\n\r\n");
    auto response = client.Read();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result_int(), 401);
    EXPECT_EQ((*response)[http::field::connection], "close");
    EXPECT_TRUE(client.Ended());
  }
  {
    // Without Expect: answered at the header, before the 60 MiB the client announced arrive.
    Client client(server.port());
    client.Write("POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 62914560\r\n\r\n0123");
    auto response = client.Read();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result_int(), 401);
    EXPECT_EQ((*response)[http::field::connection], "close");
  }
  {
    // A chunked body, refused: its length is unknown to the check.
    Client client(server.port());
    client.Write("POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    auto response = client.Read();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result_int(), 401);
  }
  {
    // No body: refused, and the connection serves the next request, which the check lets through.
    Client client(server.port());
    client.Write("GET /d HTTP/1.1\r\nHost: t\r\n\r\n");
    auto refused = client.Read();
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->result_int(), 401);
    EXPECT_NE((*refused)[http::field::connection], "close");
    client.Write(
        "POST /e HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer good\r\nContent-Length: 2\r\n"
        "Expect: 100-continue\r\n\r\n");
    auto go_on = client.Read();
    ASSERT_TRUE(go_on);
    EXPECT_EQ(go_on->result_int(), 100);  // let through: the body is asked for
    client.Write("hi");
    auto handled_response = client.Read();
    ASSERT_TRUE(handled_response);
    EXPECT_EQ(handled_response->result_int(), 200);
    EXPECT_EQ(handled_response->body(), "POST /e hi [Bearer good] []");
  }
  EXPECT_EQ(handled.load(), 1);
  std::lock_guard lock(seen_mutex);
  EXPECT_EQ(seen, (std::vector<std::string>{"/a||62914560", "/b||62914560", "/c||chunked", "/d||0",
                                            "/e||2"}));
}

// A sink that keeps what it is given, in pieces, and refuses once it holds more than `refuse_past`.
class RecordingSink final : public BodySink {
 public:
  explicit RecordingSink(std::size_t refuse_past) : refuse_past_(refuse_past) {}
  std::optional<HttpResponse> Append(std::string_view bytes) override {
    std::lock_guard lock(mutex_);
    ++pieces_;
    held_.append(bytes);
    if (held_.size() > refuse_past_) return JsonErrorResponse(429, "full");
    return std::nullopt;
  }
  std::string held() const {
    std::lock_guard lock(mutex_);
    return held_;
  }
  std::size_t pieces() const {
    std::lock_guard lock(mutex_);
    return pieces_;
  }

 private:
  const std::size_t refuse_past_;
  mutable std::mutex mutex_;
  std::string held_;
  std::size_t pieces_ = 0;
};

TEST(HttpServerTest, AStreamedBodyGoesToItsSinkPieceByPiecePastTheHeldBodyLimit) {
  std::mutex mutex;
  std::shared_ptr<RecordingSink> last;  // the sink of the last streamed request
  std::string handled;                  // what the handler saw of it
  HttpServerOptions options;
  options.port = 0;
  options.io_threads = 2;
  options.limits.body_bytes = 1024;                 // held in memory
  options.limits.streamed_body_bytes = 8ULL << 20;  // the largest a check may stream
  auto started = HttpServer::Start(
      options,
      [&](ServerRequest request, Responder responder) {
        std::lock_guard lock(mutex);
        const bool same = request.body_sink == last;
        handled = request.target + " body=" + std::to_string(request.body.size()) +
                  (same ? " same sink" : " no sink");
        responder.Respond({200, "stored"});
      },
      [&](ServerRequest& head) -> std::optional<HttpResponse> {
        if (head.target.starts_with("/held")) return std::nullopt;
        const std::size_t refuse_past = head.target == "/refuse" ? 100'000 : SIZE_MAX;
        auto sink = std::make_shared<RecordingSink>(refuse_past);
        {
          std::lock_guard lock(mutex);
          last = sink;
        }
        head.body_sink = sink;
        head.body_sink_limit = head.target == "/small" ? 10 : 4ULL << 20;
        return std::nullopt;
      });
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  auto& server = **started;
  std::string body(3 * 1024 * 1024 + 7, 'x');
  for (std::size_t i = 0; i < body.size(); i += 4099) body[i] = static_cast<char>('a' + i % 26);
  {
    // 3 MiB past the 1 KiB held limit, with Content-Length, then a held request on the same
    // connection.
    Client client(server.port());
    client.Write(Request("PUT", "/stream", body));
    auto response = client.Read();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result_int(), 200);
    {
      std::lock_guard lock(mutex);
      EXPECT_EQ(handled, "/stream body=0 same sink");
      EXPECT_EQ(last->held(), body);
      EXPECT_GT(last->pieces(), 1u);  // in pieces, not whole
    }
    client.Write(Request("POST", "/held", "small"));
    auto held = client.Read();
    ASSERT_TRUE(held);
    EXPECT_EQ(held->result_int(), 200);
    std::lock_guard lock(mutex);
    EXPECT_EQ(handled, "/held body=5 no sink");
  }
  {
    // Chunked, with Expect: 100-continue.
    Client client(server.port());
    client.Write(
        "PUT /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
        "Expect: 100-continue\r\n\r\n");
    auto go_on = client.Read();
    ASSERT_TRUE(go_on);
    EXPECT_EQ(go_on->result_int(), 100);
    client.Write("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    auto response = client.Read();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result_int(), 200);
    std::lock_guard lock(mutex);
    EXPECT_EQ(last->held(), "hello world");
  }
  {
    // Past the check's own limit: declared, refused before the body; chunked, as it grows.
    Client client(server.port());
    client.Write(Request("PUT", "/small", "01234567890"));
    auto response = client.Read();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result_int(), 413);
    EXPECT_TRUE(client.Ended());
    Client chunked(server.port());
    chunked.Write(
        "PUT /small HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        "b\r\n01234567890\r\n0\r\n\r\n");
    auto grown = chunked.Read();
    ASSERT_TRUE(grown);
    EXPECT_EQ(grown->result_int(), 413);
  }
  {
    // Past the server's streamed limit, whatever the check allows.
    Client client(server.port());
    client.Write("PUT /stream HTTP/1.1\r\nHost: t\r\nContent-Length: 9000000\r\n\r\n");
    auto response = client.Read();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result_int(), 413);
  }
  {
    // The sink refuses part-way: its answer, the connection closed, the handler never called, and
    // the sink let go.
    {
      std::lock_guard lock(mutex);
      handled.clear();
    }
    Client client(server.port());
    client.Write(Request("PUT", "/refuse", body));
    auto response = client.Read();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result_int(), 429);
    EXPECT_EQ((*response)[http::field::connection], "close");
    std::lock_guard lock(mutex);
    EXPECT_EQ(handled, "");
    EXPECT_LE(last->held().size(), 100'000u + 512 * 1024);
    const std::weak_ptr<RecordingSink> sink = last;
    last.reset();
    EXPECT_TRUE(sink.expired());
  }
  {
    // A body held in memory keeps its own limit.
    Client client(server.port());
    client.Write(Request("POST", "/held", std::string(1025, 'x')));
    auto response = client.Read();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result_int(), 413);
  }
}

TEST(HttpServerTest, AStreamedBodyThatStallsOrOutlivesTheServerLetsGoOfItsSink) {
  std::mutex mutex;
  std::vector<std::weak_ptr<RecordingSink>> sinks;
  HttpServerOptions options;
  options.port = 0;
  options.io_threads = 1;
  options.limits.read_timeout = std::chrono::milliseconds(300);
  options.limits.streamed_body_bytes = 1 << 20;
  auto started = HttpServer::Start(
      options,
      [](ServerRequest, Responder responder) {
        responder.Respond({200, "stored"});
      },
      [&](ServerRequest& head) -> std::optional<HttpResponse> {
        auto sink = std::make_shared<RecordingSink>(SIZE_MAX);
        std::lock_guard lock(mutex);
        sinks.push_back(sink);
        head.body_sink = sink;
        head.body_sink_limit = 1 << 20;
        return std::nullopt;
      });
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  auto& server = **started;
  {
    // Part of the body, then nothing: 408 once a piece is overdue, and the sink is let go.
    Client client(server.port());
    client.Write("PUT /f HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nsome of it");
    auto response = client.Read();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->result_int(), 408);
    std::lock_guard lock(mutex);
    ASSERT_EQ(sinks.size(), 1u);
    EXPECT_TRUE(sinks[0].expired());
  }
  // A body still arriving when the server shuts down without drain time.
  Client client(server.port());
  client.Write("PUT /g HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n" +
               std::string(1000, 'x'));
  server.Shutdown(std::chrono::milliseconds(0));
  EXPECT_TRUE(client.Ended());
  std::lock_guard lock(mutex);
  for (const auto& sink : sinks) EXPECT_TRUE(sink.expired());
}

TEST(HttpServerTest, MalformedCorpusGets4xxOrCloseAndTheServerStaysUp) {
  auto server = StartServer(Echo, {.header_bytes = 8 * 1024,
                                   .body_bytes = 1 << 20,
                                   .read_timeout = std::chrono::milliseconds(200),
                                   .idle_timeout = std::chrono::milliseconds(200)});
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> corpus = {
      "GARBAGE\r\n\r\n",
      "GET\r\n\r\n",
      "GET / HTTP/1.1 extra\r\nHost: t\r\n\r\n",
      "GET / HTTP/9.9\r\nHost: t\r\n\r\n",
      "GET / HTTP/1.2\r\nHost: t\r\n\r\n",
      "GET / HTTX/1.1\r\nHost: t\r\n\r\n",
      " / HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.1\nHost: t\n\n",
      "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
      "GET / HTTP/1.1\r\nBad Name: v\r\n\r\n",
      std::string("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 26),
      "GET /\xff\xfe HTTP/1.1\r\nHost: t\r\n\r\n",
      "GET /caf\xc3 HTTP/1.1\r\nHost: t\r\n\r\n",
      "GET /\x7f HTTP/1.1\r\nHost: t\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(64 * 1024, 'h') + "\r\n\r\n",
      std::string(1 << 20, 'A'),
      "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999999999999999\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
      "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc",  // stops short
      "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nabc",   // the rest is garbage
      "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
      "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
      "0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\nabc",
      "\r\n\r\n\r\n",
      "GET / HTTP/1.1\r\nX: no host\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n",
      std::string("\0\0\0\0", 4),
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  // a TLS ClientHello
  };
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    Client client(server->port());
    ASSERT_TRUE(client.connected());
    client.Write(corpus[i]);
    // Every answer until the connection ends; the last must be an error (a leading well-formed
    // request, as in "Content-Length: 1" followed by more bytes, is answered first).
    std::vector<unsigned> statuses;
    while (auto answer = client.Read()) statuses.push_back(answer->result_int());
    if (!statuses.empty()) {
      const unsigned last = statuses.back();
      EXPECT_TRUE((last >= 400 && last < 500) || last == 505) << "case " << i << ": " << last;
      for (std::size_t j = 0; j + 1 < statuses.size(); ++j) EXPECT_EQ(statuses[j], 200u);
    }
    Client good(server->port());
    good.Write(Request("GET", "/still-up"));
    auto answer = good.Read();
    ASSERT_TRUE(answer) << "case " << i;
    EXPECT_EQ(answer->result_int(), 200) << "case " << i;
  }
}

TEST(HttpServerTest, StartFailsOnABadAddress) {
  HttpServerOptions options;
  options.host = "not-an-address";
  options.port = 0;
  auto server = HttpServer::Start(options, Echo);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  auto first = StartServer(Echo);
  ASSERT_NE(first, nullptr);
  options.host = "127.0.0.1";
  options.port = first->port();
  auto taken = HttpServer::Start(options, Echo);
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gshare::net
