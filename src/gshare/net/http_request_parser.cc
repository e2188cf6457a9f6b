#include "gshare/net/http_request_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <limits>

namespace gshare::net {

namespace http = boost::beast::http;

void ConfigureRequestParser(RequestParser& parser, const HttpServerLimits& limits) {
  const std::uint64_t header_bytes =
      std::min<std::uint64_t>(limits.header_bytes, std::numeric_limits<std::uint32_t>::max());
  parser.header_limit(static_cast<std::uint32_t>(header_bytes));
  parser.body_limit(std::max(limits.body_bytes, limits.streamed_body_bytes));
}

std::optional<int> ApplyBodyLimit(RequestParser& parser, std::uint64_t limit,
                                  std::string& message) {
  const auto length = parser.content_length();
  if (length && *length > limit) {
    message = fmt::format("a body of {} bytes is larger than the limit of {}", *length, limit);
    return 413;
  }
  parser.body_limit(limit);
  return std::nullopt;
}

std::optional<int> StatusForParseError(const boost::system::error_code& error) {
  if (error.category() != http::make_error_code(http::error::end_of_stream).category()) {
    return std::nullopt;  // the socket's error (reset, aborted): nobody to answer
  }
  switch (static_cast<http::error>(error.value())) {
    case http::error::end_of_stream:    // closed between requests
    case http::error::partial_message:  // closed in the middle of one
      return std::nullopt;
    case http::error::header_limit:
      return 431;
    case http::error::body_limit:
      return 413;
    default:
      return 400;
  }
}

std::optional<int> CheckRequestHeader(const RequestParser& parser, const HttpServerLimits& limits,
                                      std::string& message) {
  const auto& header = parser.get();
  if (header.version() != 10 && header.version() != 11) {
    message = "only HTTP/1.0 and HTTP/1.1 are served";
    return 505;
  }
  // RFC 9112 3.2: an HTTP/1.1 request has exactly one Host; no request has two.
  const auto hosts = header.count(http::field::host);
  if (hosts > 1 || (hosts == 0 && header.version() == 11)) {
    message = "an HTTP/1.1 request needs exactly one Host field";
    return 400;
  }
  // Two keys would leave which one counts to the reader: the request is refused instead.
  if (header.count(http::field::authorization) > 1) {
    message = "more than one Authorization field";
    return 400;
  }
  for (const char c : header.target()) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f) {
      message = "the request target has a byte that is not printable ASCII (percent-encode it)";
      return 400;
    }
  }
  // RFC 9112 6.3: a request whose transfer coding does not end in chunked has no knowable length
  // (answering it would let the rest be read as another request).
  if (header.count(http::field::transfer_encoding) > 0 && !parser.chunked()) {
    message = "a transfer coding other than chunked";
    return 400;
  }
  const std::uint64_t limit = std::max(limits.body_bytes, limits.streamed_body_bytes);
  const auto length = parser.content_length();
  if (length && *length > limit) {
    message = fmt::format("a body of {} bytes is larger than the limit of {}", *length, limit);
    return 413;
  }
  return std::nullopt;
}

ServerRequest ToServerRequestHead(const RequestParser& parser) {
  const auto& message = parser.get();
  ServerRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request.version = message.version();
  request.headers.reserve(8);
  for (const auto& field : message) {
    request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  request.authorization = std::string(message[http::field::authorization]);
  request.content_type = std::string(message[http::field::content_type]);
  if (parser.chunked()) {
    request.declared_length = std::nullopt;
  } else {
    request.declared_length = parser.content_length().value_or(0);
  }
  return request;
}

ServerRequest ToServerRequest(RequestParser& parser) {
  ServerRequest request = ToServerRequestHead(parser);
  request.body = std::move(parser.get().body());
  return request;
}

std::string_view ServerRequest::Header(std::string_view name) const {
  return FindHeader(headers, name);
}

}  // namespace gshare::net
