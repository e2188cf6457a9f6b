#include "gshare/net/http_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <exception>
#include <optional>

namespace gshare::net {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

bool IsHostNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

bool IsIpv6Char(char c) {
  return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' ||
         c == '.';
}

// Printable ASCII without blanks: a request target, a header name.
bool IsToken(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

// A header value: no line breaks (which would end the field early) and no other control
// character but tab.
bool IsFieldValue(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte == '\t' || (byte >= ' ' && byte != 0x7f);
  });
}

bool IsBeastHttpError(const boost::system::error_code& error) {
  return error.category() == http::make_error_code(http::error::end_of_stream).category();
}

}  // namespace

std::string HttpEndpoint::HostPort() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Result<HttpEndpoint> ParseHttpUrl(std::string_view url) {
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    return InvalidArgument(fmt::format("'{}' is not an http:// URL (give http://host:port)", url));
  }
  const std::string_view scheme = url.substr(0, scheme_end);
  if (EqualsIgnoringCase(scheme, "https")) {
    return InvalidArgument(fmt::format(
        "'{}': https is not supported, this client speaks plain HTTP; point it at the server "
        "itself (http://host:port) or at a plain-HTTP proxy in front of the TLS one",
        url));
  }
  if (!EqualsIgnoringCase(scheme, "http")) {
    return InvalidArgument(
        fmt::format("'{}': the scheme '{}' is not http (give http://host:port)", url, scheme));
  }
  std::string_view rest = url.substr(scheme_end + 3);
  const std::size_t authority_end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, authority_end);
  const std::string_view tail =
      authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (!tail.empty() && tail != "/") {
    return InvalidArgument(fmt::format(
        "'{}': a path, query or fragment ('{}') is not supported; give http://host:port", url,
        tail));
  }
  if (authority.find('@') != std::string_view::npos) {
    return InvalidArgument(fmt::format("'{}': user information in the URL is not supported", url));
  }
  HttpEndpoint endpoint;
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgument(fmt::format("'{}': an IPv6 address without its ']'", url));
    }
    const std::string_view address = authority.substr(1, close - 1);
    if (address.empty() || !std::all_of(address.begin(), address.end(), IsIpv6Char)) {
      return InvalidArgument(fmt::format("'{}': '{}' is not an IPv6 address", url, address));
    }
    endpoint.host = std::string(address);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return InvalidArgument(fmt::format("'{}': expected ':port' after the address", url));
      }
      port_text = after.substr(1);
      if (port_text.empty()) return InvalidArgument(fmt::format("'{}': an empty port", url));
    }
  } else {
    const std::size_t colon = authority.find(':');
    const std::string_view host = authority.substr(0, colon);
    if (host.empty() || !std::all_of(host.begin(), host.end(), IsHostNameChar)) {
      return InvalidArgument(fmt::format("'{}': '{}' is not a host name or address", url, host));
    }
    endpoint.host = std::string(host);
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return InvalidArgument(fmt::format("'{}': an empty port", url));
    }
  }
  if (!port_text.empty()) {
    unsigned port = 0;
    const auto [end, error] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (error != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      return InvalidArgument(
          fmt::format("'{}': the port '{}' is not a number from 1 to 65535", url, port_text));
    }
    endpoint.port = static_cast<std::uint16_t>(port);
  }
  return endpoint;
}

std::string_view ClientResponse::Header(std::string_view name) const {
  return FindHeader(headers, name);
}

struct HttpClient::Impl {
  HttpEndpoint endpoint;
  HttpClientOptions options;
  std::uint64_t connections_opened = 0;
  asio::io_context io;
  tcp::resolver resolver{io};
  tcp::socket socket{io};
  boost::beast::flat_buffer buffer;

  // Runs the io_context until its work is done, or until `deadline`: then cancels what is pending
  // (closing the socket), lets the cancelled handlers run and returns false.
  bool RunUntil(Clock::time_point deadline) {
    io.restart();
    io.run_until(deadline);
    if (io.stopped()) return true;
    resolver.cancel();
    CloseSocket();
    io.restart();
    io.run();
    return false;
  }

  void CloseSocket() {
    boost::system::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    buffer.consume(buffer.size());
  }

  // One attempt at `message` on the open connection, or on a new one when none is open.
  // `*stale`: the attempt failed on a reused connection that the server had closed.
  Result<ClientResponse> Exchange(const http::request<http::string_body>& message, bool head,
                                  Clock::time_point deadline, std::chrono::milliseconds timeout,
                                  bool* stale);
};

Result<ClientResponse> HttpClient::Impl::Exchange(const http::request<http::string_body>& message,
                                                  bool head, Clock::time_point deadline,
                                                  std::chrono::milliseconds timeout, bool* stale) {
  *stale = false;
  auto timed_out = [&] {
    CloseSocket();
    return DeadlineExceeded(
        fmt::format("no answer from {} within {} ms", endpoint.HostPort(), timeout.count()));
  };
  const bool reused = socket.is_open();
  boost::system::error_code error;
  if (!reused) {
    buffer.consume(buffer.size());
    tcp::resolver::results_type endpoints;
    resolver.async_resolve(
        endpoint.host, std::to_string(endpoint.port), tcp::resolver::numeric_service,
        [&](const boost::system::error_code& resolve_error, tcp::resolver::results_type found) {
          error = resolve_error;
          endpoints = std::move(found);
        });
    if (!RunUntil(deadline)) return timed_out();
    if (error) {
      return Unavailable(fmt::format("cannot resolve {}: {}", endpoint.host, error.message()));
    }
    asio::async_connect(socket, endpoints,
                        [&](const boost::system::error_code& connect_error, const tcp::endpoint&) {
                          error = connect_error;
                        });
    if (!RunUntil(deadline)) return timed_out();
    if (error) {
      CloseSocket();
      return Unavailable(
          fmt::format("cannot connect to {}: {}", endpoint.HostPort(), error.message()));
    }
    ++connections_opened;
  }

  http::async_write(
      socket, message,
      [&](const boost::system::error_code& write_error, std::size_t) { error = write_error; });
  if (!RunUntil(deadline)) return timed_out();
  if (error) {
    CloseSocket();
    *stale = reused;
    return Unavailable(fmt::format("sending to {}: {}", endpoint.HostPort(), error.message()));
  }

  http::response_parser<http::string_body> parser;
  parser.header_limit(
      static_cast<std::uint32_t>(std::min<std::uint64_t>(options.limits.header_bytes, UINT32_MAX)));
  parser.body_limit(options.limits.body_bytes);
  parser.skip(head);  // an answer to HEAD has no body, whatever its Content-Length says
  auto read_failed = [&](const boost::system::error_code& read_error) -> Status {
    CloseSocket();
    if (read_error == http::error::body_limit) {
      return InvalidArgument(
          fmt::format("the answer's body is larger than {} bytes", options.limits.body_bytes));
    }
    if (read_error == http::error::header_limit) {
      return InvalidArgument(
          fmt::format("the answer's header is larger than {} bytes", options.limits.header_bytes));
    }
    const bool closed =
        read_error == http::error::end_of_stream || read_error == asio::error::eof ||
        read_error == asio::error::connection_reset || read_error == asio::error::broken_pipe;
    // The server may have read the request before it closed: only a request that is safe to send
    // twice (not a POST) is sent again on a new connection.
    *stale = reused && closed && !parser.got_some() && message.method() != http::verb::post;
    if (closed) {
      return Unavailable(
          fmt::format("{} closed the connection before its answer ended", endpoint.HostPort()));
    }
    if (IsBeastHttpError(read_error)) {
      return InvalidArgument(
          fmt::format("a malformed answer from {}: {}", endpoint.HostPort(), read_error.message()));
    }
    return Unavailable(
        fmt::format("reading from {}: {}", endpoint.HostPort(), read_error.message()));
  };
  http::async_read_header(
      socket, buffer, parser,
      [&](const boost::system::error_code& read_error, std::size_t) { error = read_error; });
  if (!RunUntil(deadline)) return timed_out();
  if (error) return read_failed(error);
  // Beast's parser applies its body limit to a declared length only as the body arrives: the
  // declared length is checked here, before any of the body is read.
  if (const auto length = parser.content_length();
      !head && length && *length > options.limits.body_bytes) {
    CloseSocket();
    return InvalidArgument(fmt::format("an answer of {} bytes is larger than the limit of {}",
                                       *length, options.limits.body_bytes));
  }
  if (!parser.is_done()) {
    http::async_read(
        socket, buffer, parser,
        [&](const boost::system::error_code& read_error, std::size_t) { error = read_error; });
    if (!RunUntil(deadline)) return timed_out();
    if (error) return read_failed(error);
  }
  http::response<http::string_body> answer = parser.release();
  ClientResponse response;
  response.status = static_cast<int>(answer.result_int());
  for (const auto& field : answer) {
    response.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  response.body = std::move(answer.body());
  if (!answer.keep_alive()) CloseSocket();
  return response;
}

HttpClient::HttpClient(HttpEndpoint endpoint, HttpClientOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->endpoint = std::move(endpoint);
  impl_->options = options;
}

const HttpEndpoint& HttpClient::endpoint() const { return impl_->endpoint; }
std::uint64_t HttpClient::connections_opened() const { return impl_->connections_opened; }

HttpClient::~HttpClient() { Close(); }

void HttpClient::Close() { impl_->CloseSocket(); }

Result<ClientResponse> HttpClient::Send(const ClientRequest& request) {
  return Send(request, impl_->options.timeout);
}

Result<ClientResponse> HttpClient::Send(const ClientRequest& request,
                                        std::chrono::milliseconds timeout) {
  const auto verb = http::string_to_verb(request.method);
  if (verb == http::verb::unknown) {
    return InvalidArgument(fmt::format("unknown HTTP method '{}'", request.method));
  }
  if (!IsToken(request.target) || request.target.front() != '/') {
    return InvalidArgument(fmt::format(
        "'{}' is not a request target (a path from '/', printable ASCII)", request.target));
  }
  http::request<http::string_body> message{verb, request.target, 11};
  const HttpEndpoint& server = impl_->endpoint;
  message.set(http::field::host, server.HostPort());
  for (const auto& [name, value] : request.headers) {
    if (!IsToken(name) || !IsFieldValue(value)) {
      return InvalidArgument(fmt::format("the header field '{}' is malformed", name));
    }
    for (std::string_view own : {"host", "content-length", "connection", "transfer-encoding"}) {
      if (EqualsIgnoringCase(name, own)) {
        return InvalidArgument(fmt::format("the header field '{}' is the client's own", name));
      }
    }
    message.insert(name, value);
  }
  if (!request.content_type.empty()) {
    if (!IsFieldValue(request.content_type)) return InvalidArgument("a malformed content type");
    message.set(http::field::content_type, request.content_type);
  }
  message.body() = request.body;
  message.keep_alive(true);
  message.prepare_payload();

  const auto deadline = Clock::now() + timeout;
  const bool head = verb == http::verb::head;
  try {
    bool stale = false;
    auto response = impl_->Exchange(message, head, deadline, timeout, &stale);
    // A kept-alive connection the server had closed: once more, on a new connection.
    if (!response.ok() && stale) {
      response = impl_->Exchange(message, head, deadline, timeout, &stale);
    }
    return response;
  } catch (const std::exception& e) {
    impl_->CloseSocket();
    return Unavailable(fmt::format("{}: {}", server.HostPort(), e.what()));
  }
}

}  // namespace gshare::net
