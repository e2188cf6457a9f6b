#include "gshare/net/http_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <exception>
#include <optional>
#include <thread>
#include <unordered_map>

#include "gshare/common/mutex.h"
#include "gshare/net/http_request_parser.h"

namespace gshare::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

// After an error answer (or a refused connection), what the client still sends is read and
// dropped for at most this long and this much, so that closing does not reset the connection
// before the client has read the answer.
constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr std::size_t kLingerBytes = 1 << 20;
// While a request is in flight the connection keeps reading, to learn when the client goes away;
// what arrives (a pipelined request) is kept, up to this much beyond the header limit.
constexpr std::size_t kWatchChunkBytes = 4096;
// The piece of a streamed body (ServerRequest::body_sink) read and handed on at a time.
constexpr std::size_t kStreamChunkBytes = 512 * 1024;

class Connection;

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  HeaderCheck header_check;
  // One io_context per io thread, each run by its thread alone: a connection is served by one
  // thread from its accept to its close, so that its steps hand nothing between io threads (on a
  // shared io_context, every handler wakes another thread). Connections are dealt round-robin.
  // The first context also runs the acceptor and the server's control.
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::atomic<std::size_t> next_context{0};
  asio::io_context& io;
  // The acceptor, its retry timer and the drain timer live on one strand.
  asio::strand<asio::io_context::executor_type> control = asio::make_strand(io);
  tcp::acceptor acceptor{control};
  asio::steady_timer accept_retry{control};
  asio::steady_timer drain_timer{control};
  std::vector<std::thread> threads;
  std::uint16_t port = 0;

  std::atomic<std::size_t> in_flight{0};
  std::atomic<std::size_t> served_connections{0};
  std::atomic<bool> draining{false};
  bool shutdown_begun = false;  // on `control`

  Mutex mutex;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> live GUARDED_BY(mutex);
  bool acceptor_closed GUARDED_BY(mutex) = false;
  bool stopped GUARDED_BY(mutex) = false;
  CondVar stopped_changed;
  Mutex join_mutex;
  bool joined GUARDED_BY(join_mutex) = false;

  // `threads` io contexts (at least one).
  explicit Impl(unsigned io_threads) : contexts(MakeContexts(io_threads)), io(*contexts.front()) {}
  static std::vector<std::unique_ptr<asio::io_context>> MakeContexts(unsigned count) {
    std::vector<std::unique_ptr<asio::io_context>> made;
    for (unsigned i = 0; i < std::max(1u, count); ++i) {
      made.push_back(std::make_unique<asio::io_context>(1));  // one thread runs it
    }
    return made;
  }
  // Whether the calling thread is one of the io threads.
  bool OnIoThread() const {
    return std::any_of(contexts.begin(), contexts.end(), [](const auto& context) {
      return context->get_executor().running_in_this_thread();
    });
  }

  void Accept();
  void OnAccept(const error_code& error, tcp::socket socket);
  void StartShutdown(std::chrono::milliseconds drain);
  // Runs `step` on every live connection's strand.
  void Broadcast(void (Connection::*step)());
  void Register(Connection* connection, std::weak_ptr<Connection> weak) EXCLUDES(mutex);
  void Forget(Connection* connection, bool served) EXCLUDES(mutex);
  void CheckStopped() REQUIRES(mutex);
  // Takes one of the max_in_flight places; false when none is left.
  bool AcquireInFlight();
  void ReleaseInFlight();
};

// What a Responder and its copies share with the connection that made it.
struct Responder::State {
  explicit State(std::weak_ptr<Connection> connection_in) : connection(std::move(connection_in)) {}
  explicit State(std::function<void(HttpResponse)> sink_in) : sink(std::move(sink_in)) {}
  ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Posts the answer onto the connection's strand, if it is still open.
  void Deliver(HttpResponse response);
  // The client went away: runs the cancellation callback unless the request was answered.
  void Cancel();

  const std::weak_ptr<Connection> connection;
  const std::function<void(HttpResponse)> sink;  // set: a detached responder's (ToCallback)
  Mutex mutex;
  bool responded GUARDED_BY(mutex) = false;
  bool cancelled GUARDED_BY(mutex) = false;
  std::function<void()> on_cancel GUARDED_BY(mutex);
  std::function<void(int)> on_answer GUARDED_BY(mutex);
};

namespace {

// One TCP connection: reads requests one after another, hands each to the handler, writes the
// answers in order. Every member function runs on the connection's strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl& server, tcp::socket socket, bool served)
      : registration_(server, this, served),
        server_(server),
        limits_(server.options.limits),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()) {}

  // Serves the connection, or, for one beyond max_connections, answers 503 and closes it.
  void Start(bool refuse) {
    if (refuse) {
      keep_alive_ = false;
      return Send(JsonErrorResponse(503, "the server has too many connections"), 11);
    }
    ReadNext();
  }

  // Shutdown steps, posted by the server onto the strand.
  void CloseIfIdle() {
    if (phase_ == Phase::kIdle) Close();
  }
  void Close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    // A read may still be outstanding (its completion queued): the parser and the piece it reads
    // into stay until the connection goes; the sink and the hold go now.
    hold_.reset();
    streamed_.reset();
    Disarm();
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    CancelExchange();
    if (counted_) {
      counted_ = false;
      server_.ReleaseInFlight();
    }
  }

  // The handler's answer, posted onto the strand by the Responder.
  void OnResponse(HttpResponse response) {
    if (phase_ != Phase::kWaiting) return;  // closed meanwhile: nobody to answer
    pending_ = std::move(response);
    if (watching_) {
      error_code ignored;
      socket_.cancel(ignored);  // OnWatch writes the answer
    } else {
      SendPending();
    }
  }

  asio::any_io_executor executor() { return socket_.get_executor(); }

 private:
  // Removes the connection from the server's registry when it is destroyed: the first member,
  // so that it runs last, once the socket and the timer (which belong to the server's loop) are
  // gone.
  struct Registration {
    Registration(HttpServer::Impl& server_in, Connection* self_in, bool served_in)
        : server(server_in), self(self_in), served(served_in) {}
    ~Registration() { server.Forget(self, served); }
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    HttpServer::Impl& server;
    Connection* self;
    bool served;
  };

  enum class Phase { kIdle, kReading, kWaiting, kWriting, kLingering, kClosed };

  void Arm(std::chrono::milliseconds duration) {
    const std::uint64_t generation = ++timer_generation_;
    timer_.expires_after(duration);
    timer_.async_wait([self = shared_from_this(), generation](const error_code& error) {
      if (error || generation != self->timer_generation_) return;
      self->OnTimeout();
    });
  }
  void Disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  void OnTimeout() {
    error_code ignored;
    switch (phase_) {
      case Phase::kReading:
        timed_out_ = true;
        socket_.cancel(ignored);  // the read ends with operation_aborted; OnReadError answers
        return;
      case Phase::kIdle:
      case Phase::kWriting:
      case Phase::kLingering:
        return Close();
      case Phase::kWaiting:
      case Phase::kClosed:
        return;
    }
  }

  void ReadNext() {
    if (server_.draining.load() && server_.in_flight.load() == 0 && buffer_.size() == 0) {
      return Close();  // shutting down with nothing left in flight
    }
    DropStreamed();
    parser_.emplace();
    ConfigureRequestParser(*parser_, limits_);
    timed_out_ = false;
    if (buffer_.size() > 0) return ReadHeader();  // a pipelined request is already here
    phase_ = Phase::kIdle;
    Arm(limits_.idle_timeout);
    socket_.async_wait(tcp::socket::wait_read,
                       [self = shared_from_this()](const error_code& error) {
                         if (self->phase_ != Phase::kIdle) return;
                         if (error) return self->Close();
                         self->ReadHeader();
                       });
  }

  void ReadHeader() {
    phase_ = Phase::kReading;
    Arm(limits_.read_timeout);
    http::async_read_header(socket_, buffer_, *parser_,
                            [self = shared_from_this()](const error_code& error, std::size_t) {
                              self->OnHeader(error);
                            });
  }

  void OnHeader(const error_code& error) {
    if (phase_ != Phase::kReading) return;
    if (error) return OnReadError(error);
    std::string message;
    if (const auto status = CheckRequestHeader(*parser_, limits_, message)) {
      keep_alive_ = false;
      head_request_ = false;
      return Send(JsonErrorResponse(*status, message), 11);
    }
    if (server_.header_check) {
      // Refused by its route, method or key: answered before any of the body is read (and before
      // `100 Continue`), then the connection is closed, so the body is never buffered.
      std::optional<HttpResponse> refusal;
      try {
        ServerRequest head = ToServerRequestHead(*parser_);
        refusal = server_.header_check(head);
        hold_ = std::move(head.hold);
        // Kept whole: the handler gets this head, with its sink, once the body is in.
        if (head.body_sink) streamed_ = std::move(head);
      } catch (const std::exception& e) {
        refusal = JsonErrorResponse(500, fmt::format("the header check failed: {}", e.what()));
      } catch (...) {
        refusal = JsonErrorResponse(500, "the header check failed");
      }
      if (refusal) {
        hold_.reset();
        streamed_.reset();
        // Without a body nothing is left unread, and the connection may serve the next request.
        keep_alive_ = parser_->is_done() && parser_->get().keep_alive();
        head_request_ = parser_->get().method() == http::verb::head;
        const unsigned version = parser_->get().version();
        return Send(std::move(*refusal), version);
      }
    }
    // Where the body goes decides its limit: a sink's, or the one for bodies held in memory.
    const std::uint64_t limit =
        streamed_ ? std::min(streamed_->body_sink_limit, limits_.streamed_body_bytes)
                  : limits_.body_bytes;
    if (const auto status = ApplyBodyLimit(*parser_, limit, message)) {
      hold_.reset();
      streamed_.reset();
      keep_alive_ = false;
      head_request_ = false;
      return Send(JsonErrorResponse(*status, message), 11);
    }
    const auto expect = parser_->get()[http::field::expect];
    if (!parser_->is_done() && beast::iequals(expect, "100-continue")) {
      // The client waits for this before it sends the body (curl does, for large bodies).
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                        [self = shared_from_this()](const error_code& write_error, std::size_t) {
                          if (self->phase_ != Phase::kReading) return;
                          if (write_error) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    // The timer may have fired as the header arrived: the read timeout is spent all the same.
    if (timed_out_) return OnReadError(asio::error::operation_aborted);
    if (streamed_ && !parser_->is_done()) {
      // The header is in and none of the body: the parser moves to one that reads in pieces.
      stream_parser_.emplace(std::move(*parser_));
      parser_.reset();
      stream_chunk_ = std::make_unique_for_overwrite<char[]>(kStreamChunkBytes);
      return ReadStreamed();
    }
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](const error_code& error, std::size_t) {
                       if (self->phase_ != Phase::kReading) return;
                       if (error) return self->OnReadError(error);
                       self->Dispatch();
                     });
  }

  // Reads the next piece of a body that goes to a sink, and hands it on; each piece has the read
  // timeout to arrive.
  void ReadStreamed() {
    Arm(limits_.read_timeout);
    auto& body = stream_parser_->get().body();
    body.data = stream_chunk_.get();
    body.size = kStreamChunkBytes;
    body.more = true;
    http::async_read(socket_, buffer_, *stream_parser_,
                     [self = shared_from_this()](error_code error, std::size_t) {
                       if (self->phase_ != Phase::kReading) return;
                       if (error == http::error::need_buffer) error = {};  // the piece is full
                       if (error) return self->OnReadError(error);
                       self->OnStreamed();
                     });
  }

  void OnStreamed() {
    const std::size_t got = kStreamChunkBytes - stream_parser_->get().body().size;
    if (got > 0) {
      std::optional<HttpResponse> refusal;
      try {
        refusal = streamed_->body_sink->Append(std::string_view(stream_chunk_.get(), got));
      } catch (const std::exception& e) {
        refusal = JsonErrorResponse(500, fmt::format("storing the body failed: {}", e.what()));
      } catch (...) {
        refusal = JsonErrorResponse(500, "storing the body failed");
      }
      if (refusal) {
        DropStreamed();
        keep_alive_ = false;
        head_request_ = false;
        return Send(std::move(*refusal), 11);
      }
    }
    if (stream_parser_->is_done()) return Dispatch();
    if (timed_out_) return OnReadError(asio::error::operation_aborted);
    if (server_.draining.load()) {
      // Shutting down: the rest of the body would only be refused once it is in.
      DropStreamed();
      keep_alive_ = false;
      head_request_ = false;
      return Send(JsonErrorResponse(503, "the server is shutting down"), 11);
    }
    ReadStreamed();
  }

  // Forgets a streamed request: the sink's last reference may go with it. Only where no read is
  // outstanding (the parser and the piece are a read's).
  void DropStreamed() {
    hold_.reset();
    streamed_.reset();
    stream_parser_.reset();
    stream_chunk_.reset();
  }

  void OnReadError(const error_code& error) {
    const bool got_some = stream_parser_ || (parser_ && parser_->got_some());
    DropStreamed();
    keep_alive_ = false;
    head_request_ = false;
    if (timed_out_) {
      if (got_some || buffer_.size() > 0) {
        return Send(JsonErrorResponse(408, "the request did not arrive in time"), 11);
      }
      return Close();
    }
    const auto status = StatusForParseError(error);
    if (!status) return Close();  // the client went away
    std::string message = "a malformed request: " + error.message();
    if (*status == 431) message = "the request header is too large";
    if (*status == 413) message = "the request body is too large";
    Send(JsonErrorResponse(*status, message), 11);
  }

  void Dispatch() {
    Disarm();
    std::shared_ptr<void> hold = std::move(hold_);  // dropped when the request is refused here
    std::optional<ServerRequest> streamed = std::move(streamed_);
    streamed_.reset();
    const http::request_header<>& message =
        stream_parser_ ? static_cast<const http::request_header<>&>(stream_parser_->get())
                       : static_cast<const http::request_header<>&>(parser_->get());
    const http::basic_parser<true>& parsed =
        stream_parser_ ? static_cast<const http::basic_parser<true>&>(*stream_parser_)
                       : static_cast<const http::basic_parser<true>&>(*parser_);
    keep_alive_ = parsed.keep_alive();
    head_request_ = message.method() == http::verb::head;
    const unsigned version = message.version();
    if (server_.draining.load()) {
      keep_alive_ = false;
      DropStreamed();
      return Send(JsonErrorResponse(503, "the server is shutting down"), version);
    }
    if (!server_.AcquireInFlight()) {
      DropStreamed();
      return Send(JsonErrorResponse(503, "the server has too many requests in flight"), version);
    }
    counted_ = true;
    version_ = version;
    phase_ = Phase::kWaiting;
    auto state = std::make_shared<Responder::State>(weak_from_this());
    exchange_ = state;
    ServerRequest request = streamed ? std::move(*streamed) : ToServerRequest(*parser_);
    request.hold = std::move(hold);
    parser_.reset();
    DropStreamed();
    Watch();
    Responder responder(std::move(state));
    try {
      server_.handler(std::move(request), responder);
    } catch (const std::exception& e) {
      responder.Respond(JsonErrorResponse(500, fmt::format("the handler failed: {}", e.what())));
    } catch (...) {
      responder.Respond(JsonErrorResponse(500, "the handler failed"));
    }
  }

  // Reads while the handler works, to learn that the client went away.
  void Watch() {
    if (peer_gone_ || buffer_.size() >= limits_.header_bytes + kWatchChunkBytes) return;
    watching_ = true;
    socket_.async_read_some(buffer_.prepare(kWatchChunkBytes),
                            [self = shared_from_this()](const error_code& error, std::size_t n) {
                              self->OnWatch(error, n);
                            });
  }

  void OnWatch(const error_code& error, std::size_t bytes) {
    watching_ = false;
    if (phase_ != Phase::kWaiting) return;
    if (!error) {
      buffer_.commit(bytes);
    } else if (error != asio::error::operation_aborted) {
      peer_gone_ = true;  // end of stream or reset: nobody waits for the answer
      CancelExchange();
    }
    if (pending_) return SendPending();
    if (!peer_gone_) Watch();
  }

  void CancelExchange();

  void SendPending() {
    HttpResponse response = std::move(*pending_);
    pending_.reset();
    if (counted_) {
      counted_ = false;
      server_.ReleaseInFlight();
    }
    if (peer_gone_) return Close();
    if (server_.draining.load()) keep_alive_ = false;
    Send(std::move(response), version_);
  }

  void Send(HttpResponse response, unsigned version) {
    phase_ = Phase::kWriting;
    Arm(limits_.write_timeout);
    response_ =
        http::response<http::string_body>(static_cast<http::status>(response.status), version);
    response_.set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) response_.set(name, value);
    response_.keep_alive(keep_alive_);
    response_.body() = std::move(response.body);
    response_.prepare_payload();
    if (head_request_) response_.body().clear();  // the length of the body a GET would get
    http::async_write(socket_, response_,
                      [self = shared_from_this()](const error_code& error, std::size_t) {
                        if (self->phase_ != Phase::kWriting) return;
                        if (error) return self->Close();
                        if (!self->keep_alive_) return self->Linger();
                        self->ReadNext();
                      });
  }

  void Linger() {
    phase_ = Phase::kLingering;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    Arm(kLingerTime);
    Discard();
  }
  void Discard() {
    if (lingered_bytes_ >= kLingerBytes) return Close();
    socket_.async_read_some(asio::buffer(discard_),
                            [self = shared_from_this()](const error_code& error, std::size_t n) {
                              if (self->phase_ != Phase::kLingering) return;
                              if (error) return self->Close();
                              self->lingered_bytes_ += n;
                              self->Discard();
                            });
  }

  Registration registration_;  // first: destroyed last
  HttpServer::Impl& server_;
  const HttpServerLimits& limits_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::uint64_t timer_generation_ = 0;
  Phase phase_ = Phase::kIdle;
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  // A request whose body goes to a sink: its head as the header check left it (with the sink),
  // the parser that reads its body in pieces, and the piece being read.
  std::optional<ServerRequest> streamed_;
  std::optional<http::request_parser<http::buffer_body>> stream_parser_;
  std::unique_ptr<char[]> stream_chunk_;
  http::response<http::string_body> response_;
  bool timed_out_ = false;
  bool keep_alive_ = false;
  bool head_request_ = false;  // the answer carries no body
  unsigned version_ = 11;
  bool counted_ = false;        // holds one of the max_in_flight places
  std::shared_ptr<void> hold_;  // the header check's, until the request goes to the handler
  bool watching_ = false;       // a Watch read is outstanding
  bool peer_gone_ = false;      // the client closed or reset while a request was in flight
  std::optional<HttpResponse> pending_;
  std::weak_ptr<Responder::State> exchange_;
  std::size_t lingered_bytes_ = 0;
  std::array<char, 4096> discard_{};
};

}  // namespace

namespace {

void Connection::CancelExchange() {
  if (auto state = exchange_.lock()) state->Cancel();
  exchange_.reset();
}

}  // namespace

Responder::State::~State() {
  bool answered = false;
  bool gone = false;
  std::function<void(int)> observer;
  {
    MutexLock lock(mutex);
    answered = responded;
    gone = cancelled;
    observer = std::move(on_answer);
  }
  if (answered) return;
  if (observer) observer(gone ? 499 : 500);
  Deliver(JsonErrorResponse(500, "the handler gave no answer"));
}

namespace {

// The connection whose Responder::Run work this thread is running (on its strand), if any.
thread_local const Connection* running_for = nullptr;

}  // namespace

void Responder::State::Deliver(HttpResponse response) {
  if (sink) return sink(std::move(response));  // also after a cancel: the caller finishes its call
  // The connection alive means the server is alive: the server waits for every connection.
  if (auto alive = connection.lock()) {
    if (running_for == alive.get()) return alive->OnResponse(std::move(response));  // its strand
    asio::post(alive->executor(), [alive, response = std::move(response)]() mutable {
      alive->OnResponse(std::move(response));
    });
  }
}

void Responder::State::Cancel() {
  std::function<void()> callback;
  {
    MutexLock lock(mutex);
    if (responded || cancelled) return;
    cancelled = true;
    callback = std::move(on_cancel);
  }
  if (callback) callback();
}

void Responder::Respond(HttpResponse response) const {
  std::function<void(int)> observer;
  bool gone = false;
  {
    MutexLock lock(state_->mutex);
    if (state_->responded) return;
    state_->responded = true;
    state_->on_cancel = nullptr;
    gone = state_->cancelled;
    observer = std::move(state_->on_answer);
  }
  if (observer) observer(gone ? 499 : response.status);
  state_->Deliver(std::move(response));
}

void Responder::OnAnswer(std::function<void(int status)> observer) const {
  MutexLock lock(state_->mutex);
  if (!state_->responded) state_->on_answer = std::move(observer);
}

Responder::Detached Responder::ToCallback(std::function<void(HttpResponse)> deliver) {
  auto state = std::make_shared<State>(std::move(deliver));
  std::weak_ptr<State> weak = state;
  return {Responder(std::move(state)), [weak] {
            if (auto alive = weak.lock()) alive->Cancel();
          }};
}

void Responder::Run(std::function<void()> work) const {
  if (state_->sink) return work();
  if (Cancelled()) return;  // the client has gone: nobody to answer
  auto alive = state_->connection.lock();
  if (!alive) return;
  asio::post(alive->executor(), [alive, state = state_, work = std::move(work)] {
    {
      MutexLock lock(state->mutex);
      if (state->cancelled) return;  // gone meanwhile
    }
    struct Running {
      const Connection* outer;
      ~Running() { running_for = outer; }
    } running{std::exchange(running_for, alive.get())};
    work();
  });
}

bool Responder::Cancelled() const {
  MutexLock lock(state_->mutex);
  return state_->cancelled;
}

void Responder::OnCancel(std::function<void()> callback) const {
  {
    MutexLock lock(state_->mutex);
    if (state_->responded) return;
    if (!state_->cancelled) {
      state_->on_cancel = std::move(callback);
      return;
    }
  }
  if (callback) callback();
}

void HttpServer::Impl::Accept() {
  asio::io_context& next = *contexts[next_context.fetch_add(1) % contexts.size()];
  acceptor.async_accept(asio::make_strand(next), [this](const error_code& error, tcp::socket s) {
    OnAccept(error, std::move(s));
  });
}

void HttpServer::Impl::OnAccept(const error_code& error, tcp::socket socket) {
  if (shutdown_begun || error == asio::error::operation_aborted) return;
  if (error) {
    // Out of descriptors, say: try again shortly rather than spin.
    accept_retry.expires_after(std::chrono::milliseconds(50));
    accept_retry.async_wait([this](const error_code& wait_error) {
      if (!wait_error && !shutdown_begun) Accept();
    });
    return;
  }
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  const bool refuse = served_connections.load() >= options.limits.max_connections;
  if (!refuse) served_connections.fetch_add(1);
  auto connection = std::make_shared<Connection>(*this, std::move(socket), !refuse);
  Register(connection.get(), connection);
  asio::post(connection->executor(), [connection, refuse] { connection->Start(refuse); });
  Accept();
}

void HttpServer::Impl::Register(Connection* connection, std::weak_ptr<Connection> weak) {
  MutexLock lock(mutex);
  live.emplace(connection, std::move(weak));
}

void HttpServer::Impl::Forget(Connection* connection, bool served) {
  if (served) served_connections.fetch_sub(1);
  MutexLock lock(mutex);
  live.erase(connection);
  CheckStopped();
}

void HttpServer::Impl::CheckStopped() {
  if (acceptor_closed && live.empty() && !stopped) {
    stopped = true;
    stopped_changed.NotifyAll();
  }
}

bool HttpServer::Impl::AcquireInFlight() {
  std::size_t current = in_flight.load();
  do {
    if (current >= options.limits.max_in_flight) return false;
  } while (!in_flight.compare_exchange_weak(current, current + 1));
  return true;
}

void HttpServer::Impl::ReleaseInFlight() {
  if (in_flight.fetch_sub(1) == 1 && draining.load()) {
    asio::post(control, [this] { Broadcast(&Connection::CloseIfIdle); });
  }
}

void HttpServer::Impl::Broadcast(void (Connection::*step)()) {
  std::vector<std::shared_ptr<Connection>> connections;
  {
    MutexLock lock(mutex);
    for (const auto& [raw, weak] : live) {
      if (auto connection = weak.lock()) connections.push_back(std::move(connection));
    }
  }
  for (auto& connection : connections) {
    asio::post(connection->executor(), [connection, step] { ((*connection).*step)(); });
  }
}

void HttpServer::Impl::StartShutdown(std::chrono::milliseconds drain) {
  if (shutdown_begun) return;
  shutdown_begun = true;
  draining.store(true);
  error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  drain_timer.expires_after(drain);
  drain_timer.async_wait([this](const error_code& error) {
    if (!error) Broadcast(&Connection::Close);
  });
  if (in_flight.load() == 0) Broadcast(&Connection::CloseIfIdle);
  MutexLock lock(mutex);
  acceptor_closed = true;
  CheckStopped();
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options, Handler handler,
                                                      HeaderCheck check) {
  if (!handler) return InvalidArgument("the HTTP server needs a handler");
  if (options.limits.max_connections == 0 || options.limits.max_in_flight == 0) {
    return InvalidArgument("max_connections and max_in_flight must be at least 1");
  }
  error_code error;
  const auto address = asio::ip::make_address(options.host, error);
  if (error) return InvalidArgument(fmt::format("'{}' is not an IP address", options.host));
  unsigned threads = options.io_threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  auto impl = std::make_unique<Impl>(threads);
  impl->handler = std::move(handler);
  impl->header_check = std::move(check);
  const tcp::endpoint endpoint(address, options.port);
  impl->acceptor.open(endpoint.protocol(), error);
  if (!error) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), error);
  if (!error) impl->acceptor.bind(endpoint, error);
  if (!error) impl->acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) {
    return Unavailable(
        fmt::format("cannot listen on {}:{}: {}", options.host, options.port, error.message()));
  }
  impl->port = impl->acceptor.local_endpoint(error).port();
  impl->options = std::move(options);
  Impl* raw = impl.get();
  asio::post(raw->control, [raw] { raw->Accept(); });
  for (auto& context : impl->contexts) {
    impl->work.push_back(asio::make_work_guard(*context));
    impl->threads.emplace_back([context = context.get()] { context->run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::~HttpServer() { Shutdown(std::chrono::milliseconds(0)); }

std::uint16_t HttpServer::port() const { return impl_->port; }
boost::asio::io_context& HttpServer::io_context() { return impl_->io; }
std::size_t HttpServer::connections() const { return impl_->served_connections.load(); }
std::size_t HttpServer::in_flight() const { return impl_->in_flight.load(); }

void HttpServer::BeginShutdown(std::chrono::milliseconds drain) {
  Impl* raw = impl_.get();
  // Set here rather than on the loop, so that a request read after this call returns gets 503.
  raw->draining.store(true);
  asio::post(raw->control, [raw, drain] { raw->StartShutdown(drain); });
}

void HttpServer::Wait() {
  if (impl_->OnIoThread()) return;  // would wait for itself
  {
    MutexLock lock(impl_->mutex);
    impl_->stopped_changed.Wait(impl_->mutex,
                                [this]() REQUIRES(impl_->mutex) { return impl_->stopped; });
  }
  MutexLock lock(impl_->join_mutex);
  if (impl_->joined) return;
  impl_->joined = true;
  for (auto& guard : impl_->work) guard.reset();
  for (auto& context : impl_->contexts) context->stop();
  for (auto& thread : impl_->threads) thread.join();
}

}  // namespace gshare::net
