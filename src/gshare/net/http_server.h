// HttpServer: the TCP front of `gshare serve`, asynchronous HTTP/1.1 on Boost.Beast and Asio
// (docs/front.md). Requests go to one asynchronous handler; the answer may come later, from any
// thread, which is how the scheduler answers inference requests.
//
// Connections: keep-alive (several requests on a connection, answered in order, one at a time;
// a pipelined request is read once the previous one is answered), `Connection: close` honoured,
// HTTP/1.0 served (kept alive only when it asks to be).
//
// Limits (HttpServerLimits; every rejection is a `{"error": "..."}` JSON body):
// - header past `header_bytes`: 431, then close.
// - body past `body_bytes`: 413, then close; a declared Content-Length is refused before any of
//   the body is read. A body the header check streams to a sink (body_sink.h) has the check's
//   limit instead (at most `streamed_body_bytes`), and `read_timeout` for each piece of it to
//   arrive rather than for the whole.
// - a request whose header and body take longer than `read_timeout` to arrive: 408 and close
//   when some of it came, a silent close otherwise; a keep-alive connection with no new request
//   for `idle_timeout` is closed; a response the client does not read within `write_timeout`
//   closes the connection.
// - a malformed request (request line, header, chunked encoding, a transfer coding other than
//   chunked, a target that is not printable ASCII): 400, then close; a version other than HTTP/1.0
//   and 1.1: 505, then close.
// - `max_connections` open connections: a connection beyond them is accepted, answered 503 and
//   closed (the client learns why instead of waiting in the kernel's backlog).
// - `max_in_flight` requests handed to the handler and not yet answered: a request beyond them
//   gets 503 (the connection stays open).
// - the header check (HttpServer::HeaderCheck), given the complete header before any body byte
//   is read or `100 Continue` is sent: its answer refuses the request, whose body is then not
//   read (the connection is answered and closed; one without a body stays open).
// After an error answer the server stops writing, reads and discards what the client still sends
// for a short while (at most a second or a MiB), then closes, so the client reads the answer
// instead of a reset.
//
// Threading: the server runs `io_threads` threads (0: the hardware's concurrency), each with an
// io_context of its own; each connection is served by one of them (dealt round-robin at accept),
// on a strand, so its own steps never run concurrently and never move between threads (nor can a
// busy connection use another thread's idle time).
// The handler runs on an io thread and must return quickly (hand the work elsewhere); it may
// answer before it returns or any time later from any thread. Everything in HttpServer is
// thread-safe; Wait, Shutdown and the destructor block and must not be called from an io thread.
//
// Shutdown: BeginShutdown (non-blocking, any thread, a signal_set's handler on io_context()
// included) stops accepting (new connections are refused by the kernel), lets the requests in
// flight finish and be answered, answers 503 to any request that arrives meanwhile on an open
// connection, closes each connection once it has nothing in flight, and, at the drain deadline,
// closes what is left (their handlers are told the client went away). Wait returns once every
// connection is closed and the io threads have stopped.
//
// Errors: Start returns a Status (the address is taken or invalid); at run time nothing throws
// out of the server; a handler that throws answers 500.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/net/body_sink.h"
#include "gshare/net/http_message.h"

namespace gshare::net {

struct HttpServerLimits {
  std::uint64_t header_bytes = 16 * 1024;  // request line and header fields
  std::uint64_t body_bytes = 64ULL << 20;  // after chunked decoding
  // The largest body a header check may stream to a sink (ServerRequest::body_sink); 0: none.
  std::uint64_t streamed_body_bytes = 0;
  std::chrono::milliseconds read_timeout{30'000};   // one request's header and body
  std::chrono::milliseconds idle_timeout{60'000};   // between requests on a kept-alive connection
  std::chrono::milliseconds write_timeout{30'000};  // one response
  std::size_t max_connections = 10'000;
  std::size_t max_in_flight = 1'024;
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // an IPv4 or IPv6 address
  std::uint16_t port = 8080;       // 0: a free port, readable from HttpServer::port()
  unsigned io_threads = 0;         // 0: std::thread::hardware_concurrency()
  HttpServerLimits limits;
};

// A complete request as the handler sees it.
struct ServerRequest {
  std::string method;     // "GET", "POST"
  std::string target;     // "/v2/models/mlp/infer?x=1", printable ASCII
  unsigned version = 11;  // 10 or 11
  std::string authorization;
  std::string content_type;
  // The body's declared length (Content-Length, 0 without one); nullopt for a chunked body, whose
  // length is known only once it is read.
  std::optional<std::uint64_t> declared_length = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // every field, in arrival order
  std::string body;                                          // chunked encoding removed
  // Set by the header check: the body goes to this sink as it arrives (body_sink.h) and `body`
  // stays empty; the handler gets the request with the same sink once all of it was appended.
  // A body past `body_sink_limit` (at most the limits' streamed_body_bytes) is refused with 413.
  std::shared_ptr<BodySink> body_sink;
  std::uint64_t body_sink_limit = 0;
  // What the header check kept for this request (a share of a bounded resource, say): handed to
  // the handler with the request, released when the last reference goes.
  std::shared_ptr<void> hold;

  // The first field named `name` (case-insensitive), or "" when there is none.
  std::string_view Header(std::string_view name) const;
};

// The handler's side of one request: copyable, every copy refers to the same request, and every
// method is thread-safe.
class Responder {
 public:
  struct State;
  explicit Responder(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // Answers the request. The first call counts; later ones are ignored. When the last copy of a
  // Responder goes away without an answer, the request is answered 500.
  void Respond(HttpResponse response) const;
  // True once the client has gone away (closed or reset the connection, or the drain deadline
  // closed it) before the answer was given. An answer given after that is dropped.
  bool Cancelled() const;
  // Registers what to run when the client goes away before the answer: run at most once, on an
  // io thread, or at once on the calling thread when it already has. Never run once Respond has
  // returned; it may run concurrently with a Respond call (both are safe). A later call replaces
  // the callback.
  void OnCancel(std::function<void()> callback) const;
  // Runs `work` on the io thread of the request's connection, in order with the connection's own
  // work (its strand): where an answer is made off that thread, this is its one hand-off, and an
  // answer given from `work` is written at once. Where the client has gone (Cancelled), `work` is
  // dropped unrun, with what it holds (at once where it had gone before the call). A detached
  // Responder runs it on the calling thread.
  void Run(std::function<void()> work) const;
  // Registers what to run with the status of the answer, once, on the thread that gives it: the
  // first Respond's, or the 500 of a Responder whose last copy went unanswered; 499 for either
  // where the client had gone first (Cancelled). A later call replaces it.
  void OnAnswer(std::function<void(int status)> observer) const;

  // A Responder for a request that came some other way than an HttpServer's connection (a gRPC
  // call the server answers through its HTTP handlers): its answer goes to `deliver`, called at
  // most once on the thread that responds (or with 500 when the last copy goes unanswered).
  // `cancel` says that the caller went away: OnCancel's callback runs, Cancelled() is true, and
  // the answer still reaches `deliver` (whose caller ends its call with it); any thread, any
  // number of times.
  struct Detached;
  static Detached ToCallback(std::function<void(HttpResponse)> deliver);

 private:
  std::shared_ptr<State> state_;
};

struct Responder::Detached {
  Responder responder;
  std::function<void()> cancel;
};

class HttpServer {
 public:
  using Handler = std::function<void(ServerRequest request, Responder responder)>;
  // Looks at a request whose header is complete and whose body is not read yet (`head.body` is
  // empty): an answer refuses it (its route, method, key or the share it would take), nothing
  // lets the server read the body and call the handler. It may set `head.hold`, which the server
  // keeps while the body is read and hands to the handler in the request (or drops when the
  // request fails first). Runs on an io thread, must not block; a check that throws refuses with
  // 500.
  using HeaderCheck = std::function<std::optional<HttpResponse>(ServerRequest& head)>;

  // Listens on options.host:options.port and starts the io threads. Without `check`, every
  // request whose header passes the limits is read whole and handed to `handler`.
  static Result<std::unique_ptr<HttpServer>> Start(HttpServerOptions options, Handler handler,
                                                   HeaderCheck check = {});
  // Shuts down with no drain time (BeginShutdown(0)) if it has not begun, then waits.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port (the chosen one when options.port was 0).
  std::uint16_t port() const;
  // The server's event loop, for a boost::asio::signal_set whose handler calls BeginShutdown.
  boost::asio::io_context& io_context();
  // Open connections being served, and requests handed to the handler not yet answered.
  std::size_t connections() const;
  std::size_t in_flight() const;

  // Begins the graceful shutdown described above, with `drain` as the time requests in flight
  // have before their connections are closed. Non-blocking; the first call counts.
  void BeginShutdown(std::chrono::milliseconds drain);
  // Blocks until the shutdown has ended and the io threads are joined.
  void Wait();
  void Shutdown(std::chrono::milliseconds drain) {
    BeginShutdown(drain);
    Wait();
  }

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gshare::net
