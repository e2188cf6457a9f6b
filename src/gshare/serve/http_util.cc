#include "gshare/serve/http_util.h"

#include <cctype>

namespace gshare::serve {

using net::HttpResponse;
using net::JsonErrorResponse;

// Writes `body` with any byte that is not valid UTF-8 replaced, so that a name from the backend
// cannot make serialization throw.
HttpResponse JsonResponse(int status, const nlohmann::json& body) {
  return {status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

// The path of `target` split at '/', without its query; nothing when the path does not start with
// '/' or has an empty segment ("//", a trailing '/'), which no route has.
std::optional<std::vector<std::string_view>> PathSegments(std::string_view target) {
  target = target.substr(0, target.find('?'));
  if (target.empty() || target.front() != '/') return std::nullopt;
  std::vector<std::string_view> segments;
  std::size_t begin = 1;
  while (true) {
    const std::size_t end = target.find('/', begin);
    const std::string_view segment = target.substr(begin, end - begin);
    if (segment.empty()) return std::nullopt;
    segments.push_back(segment);
    if (end == std::string_view::npos) return segments;
    begin = end + 1;
  }
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// The token of an `Authorization: Bearer <token>` value (the scheme's case does not matter), or
// nothing for another scheme or an empty token.
std::optional<std::string_view> BearerToken(std::string_view value) {
  constexpr std::string_view kScheme = "Bearer";
  if (value.size() <= kScheme.size() ||
      !EqualsIgnoringCase(value.substr(0, kScheme.size()), kScheme) ||
      value[kScheme.size()] != ' ') {
    return std::nullopt;
  }
  value.remove_prefix(kScheme.size());
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  return value;
}

HttpResponse Unauthorized(std::string_view message, std::string challenge) {
  HttpResponse response = JsonErrorResponse(401, message);
  response.headers.emplace_back("WWW-Authenticate", std::move(challenge));
  return response;
}

HttpResponse MethodNotAllowed(std::string allowed) {
  HttpResponse response =
      JsonErrorResponse(405, "method not allowed; this endpoint takes " + allowed);
  response.headers.emplace_back("Allow", std::move(allowed));
  return response;
}

// The one answer for a model the caller cannot see, whether or not another tenant has it.
std::string ErrorMessageOf(const HttpResponse& response) {
  const nlohmann::json body = nlohmann::json::parse(response.body, nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_string()) {
    return body["error"].get<std::string>();
  }
  return response.body;
}

HttpResponse ModelNotFound(std::string_view name) {
  return JsonErrorResponse(404, "model '" + std::string(name) + "' not found");
}

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return 400;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

}  // namespace gshare::serve
