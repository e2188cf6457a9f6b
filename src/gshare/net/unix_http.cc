#include "gshare/net/unix_http.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <exception>
#include <thread>

namespace gshare::net {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using Local = asio::local::stream_protocol;

}  // namespace

struct UnixHttpServer::Impl {
  static constexpr int read_timeout_seconds = 30;
  std::string path;
  Handler handler;
  HttpLimits limits;
  asio::io_context io;
  Local::acceptor acceptor{io};
  std::thread thread;

  void Serve() {
    for (;;) {
      boost::system::error_code error;
      Local::socket socket(io);
      acceptor.accept(socket, error);
      if (error) return;  // closed: stopping
      // A peer that connects and sends nothing must not hold the function: reads time out.
      const timeval limit{static_cast<time_t>(read_timeout_seconds), 0};
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
      ServeConnection(socket);
    }
  }

  void ServeConnection(Local::socket& socket) {
    boost::beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(limits.header_bytes));
      parser.body_limit(limits.body_bytes);
      boost::system::error_code error;
      http::read(socket, buffer, parser, error);
      HttpResponse response;
      bool keep_alive = false;
      if (error == http::error::end_of_stream || error == asio::error::eof ||
          error == asio::error::would_block || error == asio::error::try_again ||
          error == asio::error::connection_reset || error == asio::error::operation_aborted ||
          error == asio::error::bad_descriptor) {
        return;
      }
      if (error == http::error::body_limit) {
        response = JsonErrorResponse(413, "the request body is too large");
      } else if (error == http::error::header_limit) {
        response = JsonErrorResponse(431, "the request header is too large");
      } else if (error) {
        response = JsonErrorResponse(400, "a malformed request: " + error.message());
      } else {
        const auto& message = parser.get();
        keep_alive = message.keep_alive();
        HttpRequest request;
        request.method = std::string(message.method_string());
        request.target = std::string(message.target());
        request.body = message.body();
        request.content_type = std::string(message[http::field::content_type]);
        for (const auto& field : message) {
          request.headers.emplace_back(std::string(field.name_string()),
                                       std::string(field.value()));
        }
        try {
          response = handler(request);
        } catch (const std::exception& e) {
          response = JsonErrorResponse(500, e.what());
        }
      }
      // One request per connection: the node opens a connection per request, and a connection
      // left open (by a peer that stopped sending) must not keep the next one waiting.
      keep_alive = false;
      http::response<http::string_body> out{static_cast<http::status>(response.status), 11};
      out.set(http::field::content_type, response.content_type);
      for (const auto& [name, value] : response.headers) out.set(name, value);
      out.keep_alive(keep_alive);
      out.body() = std::move(response.body);
      out.prepare_payload();
      http::write(socket, out, error);
      if (error || !keep_alive) return;
    }
  }
};

UnixHttpServer::UnixHttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<UnixHttpServer>> UnixHttpServer::Start(const std::string& socket_path,
                                                              Handler handler, HttpLimits limits) {
  auto impl = std::make_unique<Impl>();
  impl->path = socket_path;
  impl->handler = std::move(handler);
  impl->limits = limits;
  ::unlink(socket_path.c_str());
  boost::system::error_code error;
  impl->acceptor.open(Local(), error);
  // Only the node (the same uid, or root) may connect: the socket is the function's front door.
  const mode_t old_mask = ::umask(0177);
  if (!error) impl->acceptor.bind(Local::endpoint(socket_path), error);
  ::umask(old_mask);
  if (!error) impl->acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) {
    return Unavailable(fmt::format("cannot listen on {}: {}", socket_path, error.message()));
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Serve(); });
  return std::unique_ptr<UnixHttpServer>(new UnixHttpServer(std::move(impl)));
}

UnixHttpServer::~UnixHttpServer() {
  boost::system::error_code ignored;
  ::shutdown(impl_->acceptor.native_handle(), SHUT_RDWR);
  impl_->acceptor.close(ignored);
  if (impl_->thread.joinable()) impl_->thread.join();
  ::unlink(impl_->path.c_str());
}

namespace {

// One request's state while it is in flight on the loop.
struct Exchange : std::enable_shared_from_this<Exchange> {
  Exchange(asio::io_context& loop, HttpLimits limits)
      : socket(loop), timer(loop), body_limit(limits.body_bytes) {
    parser.header_limit(static_cast<std::uint32_t>(limits.header_bytes));
    parser.body_limit(limits.body_bytes);
  }
  Local::socket socket;
  asio::steady_timer timer;
  http::request<http::string_body> request;
  http::response_parser<http::string_body> parser;
  boost::beast::flat_buffer buffer;
  const std::uint64_t body_limit;
  std::function<void(Result<HttpResponse>)> done;
  bool finished = false;
  bool timed_out = false;

  void Finish(Result<HttpResponse> result) {
    if (finished) return;
    finished = true;
    timer.cancel();
    boost::system::error_code ignored;
    socket.close(ignored);
    done(std::move(result));
  }
  void Fail(const char* step, const boost::system::error_code& error) {
    if (timed_out) return Finish(DeadlineExceeded(fmt::format("no answer before the deadline")));
    if (error == http::error::body_limit) {
      return Finish(InvalidArgument("the answer's body is too large"));
    }
    Finish(Unavailable(fmt::format("{}: {}", step, error.message())));
  }
};

}  // namespace

void SendUnixHttpRequest(asio::io_context& loop, const std::string& socket_path,
                         HttpRequest request, std::chrono::milliseconds deadline, HttpLimits limits,
                         std::function<void(Result<HttpResponse>)> done) {
  auto exchange = std::make_shared<Exchange>(loop, limits);
  exchange->done = std::move(done);
  const auto verb = http::string_to_verb(request.method);
  exchange->request = http::request<http::string_body>{verb, request.target, 11};
  exchange->request.set(http::field::host, "localhost");
  if (!request.content_type.empty()) {
    exchange->request.set(http::field::content_type, request.content_type);
  }
  for (const auto& [name, value] : request.headers) exchange->request.set(name, value);
  exchange->request.body() = std::move(request.body);
  exchange->request.prepare_payload();
  exchange->timer.expires_after(deadline);
  exchange->timer.async_wait([exchange](const boost::system::error_code& error) {
    if (error || exchange->finished) return;
    exchange->timed_out = true;
    boost::system::error_code ignored;
    exchange->socket.cancel(ignored);
    exchange->socket.close(ignored);
  });
  exchange->socket.async_connect(
      Local::endpoint(socket_path), [exchange](const boost::system::error_code& error) {
        if (error) return exchange->Fail("connect", error);
        http::async_write(
            exchange->socket, exchange->request,
            [exchange](const boost::system::error_code& write_error, std::size_t) {
              if (write_error) return exchange->Fail("write", write_error);
              // The header first: Beast's response parser does not apply its body limit to a
              // declared length, so the length is checked here before the body is read.
              http::async_read_header(
                  exchange->socket, exchange->buffer, exchange->parser,
                  [exchange](const boost::system::error_code& header_error, std::size_t) {
                    if (header_error) return exchange->Fail("read", header_error);
                    const auto length = exchange->parser.content_length();
                    if (length && *length > exchange->body_limit) {
                      return exchange->Finish(InvalidArgument(
                          fmt::format("an answer of {} bytes is larger than the limit of {}",
                                      *length, exchange->body_limit)));
                    }
                    http::async_read(
                        exchange->socket, exchange->buffer, exchange->parser,
                        [exchange](const boost::system::error_code& read_error, std::size_t) {
                          if (read_error) return exchange->Fail("read", read_error);
                          if (exchange->parser.get().body().size() > exchange->body_limit) {
                            return exchange->Finish(
                                InvalidArgument("the answer's body is too large"));
                          }
                          // The body is moved out, not copied (an answer may be large, and this
                          // runs on the caller's loop).
                          auto message = exchange->parser.release();
                          HttpResponse response{static_cast<int>(message.result_int()),
                                                std::move(message.body()),
                                                std::string(message[http::field::content_type])};
                          for (const auto& field : message) {
                            response.headers.emplace_back(std::string(field.name_string()),
                                                          std::string(field.value()));
                          }
                          exchange->Finish(std::move(response));
                        });
                  });
            });
      });
}

}  // namespace gshare::net
