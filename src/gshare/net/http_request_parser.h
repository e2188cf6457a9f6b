// How the TCP front (http_server.h) reads a request: the Beast parser with the server's limits,
// the status a parse error maps to, the checks made once the header is in, and the conversion to
// the handler's request. The server and the fuzz target (fuzz/http_request_fuzz.cc) both use
// these functions, so what is fuzzed is what is served.
//
// Every function here is pure (no I/O, no shared state) and thread-compatible.
#pragma once

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gshare/net/http_server.h"

namespace gshare::net {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Applies `limits` to a fresh parser: its header limit and its body limit, the larger of
// body_bytes and streamed_body_bytes until the header check has chosen (ApplyBodyLimit).
void ConfigureRequestParser(RequestParser& parser, const HttpServerLimits& limits);

// The body limit of one request, once the header check has chosen where its body goes
// (`limit`: body_bytes, or the sink's): 413 for a declared Content-Length past it, with the
// message in `message`; otherwise the parser refuses a chunked body once it grows past it.
std::optional<int> ApplyBodyLimit(RequestParser& parser, std::uint64_t limit, std::string& message);

// The status a read error of the parser answers: 431 past the header limit, 413 past the body
// limit, 400 for anything malformed; nullopt where the peer just ended the connection (before a
// request began, or in the middle of one) and nothing is to be answered.
std::optional<int> StatusForParseError(const boost::system::error_code& error);

// Checks made once the header is in, before the body is read: 505 for a version other than 1.0
// and 1.1, 400 for an HTTP/1.1 request without exactly one Host (any request with two), for two
// Authorization fields, for a target that is not printable ASCII (RFC 9112: bytes outside it must
// be percent-encoded) and for a Transfer-Encoding that does not end in chunked, 413 for a declared
// body past the parser's limit (ConfigureRequestParser). nullopt when it may go on.
// The error message goes to `message`.
std::optional<int> CheckRequestHeader(const RequestParser& parser, const HttpServerLimits& limits,
                                      std::string& message);

// The header check's view of a request whose header is in: every field, the body empty.
ServerRequest ToServerRequestHead(const RequestParser& parser);
// The handler's view of a complete request; the body is moved out of the parser.
ServerRequest ToServerRequest(RequestParser& parser);

}  // namespace gshare::net
