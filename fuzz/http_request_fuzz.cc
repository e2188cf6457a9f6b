// Fuzz target: the front's request parsing (net/http_request_parser.h), as HttpServer reads a
// connection: requests one after another from the same bytes, with the server's parser
// configuration, its header checks and its conversion to the handler's request. The first byte
// sets how many bytes arrive at a time (1 to 63, or all at once), as reads from a socket would.
// A parse error must map to an error status, never to "nothing to answer" while bytes remain; a
// request that passes must have a printable target, a served version and a body within the limit
// (the streamed one for an upload's path, the held one otherwise).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gshare/net/http_request_parser.h"

namespace {

namespace http = boost::beast::http;
using gshare::net::HttpServerLimits;

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t step = data[0] % 64 == 0 ? size : data[0] % 64;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  HttpServerLimits limits;
  limits.header_bytes = 4096;
  limits.body_bytes = 64 * 1024;
  limits.streamed_body_bytes = 256 * 1024;  // what a header check may stream to a sink

  std::string pending;  // received and not yet parsed, as the connection's buffer
  std::size_t offset = 0;
  for (int requests = 0; requests < 64; ++requests) {
    gshare::net::RequestParser parser;
    gshare::net::ConfigureRequestParser(parser, limits);
    parser.eager(false);  // the header first, as async_read_header does
    bool header_checked = false;
    bool streamed = false;
    while (!parser.is_done()) {
      boost::system::error_code error;
      const std::size_t used =
          pending.empty() ? 0 : parser.put(boost::asio::buffer(pending), error);
      if (pending.empty()) error = http::error::need_more;
      pending.erase(0, used);
      if (error == http::error::need_more) {
        if (offset >= input.size()) return 0;  // the server would wait, then time out (408)
        const std::size_t take = std::min(step, input.size() - offset);
        pending.append(input.substr(offset, take));
        offset += take;
        continue;
      }
      if (error) {
        const auto status = gshare::net::StatusForParseError(error);
        Check(status.has_value() && (*status == 400 || *status == 413 || *status == 431));
        return 0;
      }
      if (parser.is_header_done() && !header_checked) {
        header_checked = true;
        std::string message;
        if (const auto status = gshare::net::CheckRequestHeader(parser, limits, message)) {
          Check((*status == 400 || *status == 413 || *status == 505) && !message.empty());
          return 0;
        }
        // The header check's choice, as the server applies it: uploads stream, the rest is held.
        streamed = parser.get().target().starts_with("/api/v1/files/");
        if (gshare::net::ApplyBodyLimit(
                parser, streamed ? limits.streamed_body_bytes : limits.body_bytes, message)) {
          Check(!message.empty());
          return 0;
        }
        parser.eager(true);  // then the body, as async_read does
      }
    }
    if (!header_checked) {  // complete in one put: the server checks the header all the same
      std::string message;
      if (gshare::net::CheckRequestHeader(parser, limits, message)) return 0;
      streamed = parser.get().target().starts_with("/api/v1/files/");
      const auto declared = parser.content_length();
      if (declared && *declared > (streamed ? limits.streamed_body_bytes : limits.body_bytes)) {
        return 0;  // refused with 413 before the body
      }
    }
    const bool keep_alive = parser.get().keep_alive();
    const gshare::net::ServerRequest request = gshare::net::ToServerRequest(parser);
    Check(request.version == 10 || request.version == 11);
    Check(!request.method.empty() && !request.target.empty());
    for (const char c : request.target) Check(c > 0x20 && c < 0x7f);
    Check(request.body.size() <= (streamed ? limits.streamed_body_bytes : limits.body_bytes));
    Check(request.Header("authorization") == request.authorization);
    if (!keep_alive) return 0;  // the server closes after this one
  }
  return 0;
}
