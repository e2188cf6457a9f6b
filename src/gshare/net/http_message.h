// The HTTP messages both servers of this folder speak (unix_http.h: function processes over Unix
// sockets; http_server.h: the TCP front), and the one shape of an error body they answer with.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gshare::net {

using HeaderFields = std::vector<std::pair<std::string, std::string>>;

// The first field named `name` (case-insensitive) of `fields`, or "" when there is none.
std::string_view FindHeader(const HeaderFields& fields, std::string_view name);

struct HttpRequest {
  std::string method;  // "GET", "POST"
  std::string target;  // "/v2/models/mlp/infer"
  std::string body;
  std::string content_type;
  // Further fields (`Inference-Header-Content-Length`): the client sends them; the Unix server
  // hands every field it read to its handler here. Never the framing fields.
  HeaderFields headers{};  // {}: may be left out of {...}
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  // Further header fields (`WWW-Authenticate`, `Allow`), written after Content-Type. The server
  // sets the framing fields (Content-Length, Connection) itself; the handler must not name them.
  // The Unix client fills it with every field of the answer it read.
  std::vector<std::pair<std::string, std::string>> headers{};  // {}: may be left out of {...}
};

struct HttpLimits {
  std::uint64_t header_bytes = 16 * 1024;
  std::uint64_t body_bytes = 64ULL << 20;
};

// `{"error": "<message>"}` with `status`, the message escaped as a JSON string (quotes,
// backslashes and control characters; other bytes pass through as they are).
HttpResponse JsonErrorResponse(int status, std::string_view message);

}  // namespace gshare::net
