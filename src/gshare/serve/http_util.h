// Pieces of HTTP handling shared by the server's endpoints (front.h, management_api.h): JSON
// answers, path splitting, bearer keys and the mapping of Status codes to HTTP statuses.
// Stateless and thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/net/http_message.h"

namespace gshare::serve {

// `body` as JSON, with any byte that is not valid UTF-8 replaced, so that a name from a client or
// the backend cannot make serialization throw.
net::HttpResponse JsonResponse(int status, const nlohmann::json& body);

// The path of `target` split at '/', without its query; nothing when the path does not start with
// '/' or has an empty segment ("//", a trailing '/'), which no route has.
std::optional<std::vector<std::string_view>> PathSegments(std::string_view target);

bool EqualsIgnoringCase(std::string_view a, std::string_view b);

// The token of an `Authorization: Bearer <token>` value (the scheme's case does not matter), or
// nothing for another scheme or an empty token.
std::optional<std::string_view> BearerToken(std::string_view value);

// 401 with a WWW-Authenticate challenge.
net::HttpResponse Unauthorized(std::string_view message, std::string challenge);
// 405 with an Allow field listing `allowed`.
net::HttpResponse MethodNotAllowed(std::string allowed);
// The one answer for a model the caller cannot see, whether or not another tenant has it.
net::HttpResponse ModelNotFound(std::string_view name);

// The message of an error answer ({"error": "..."}), for a caller that is not HTTP (the gRPC
// service); the body as it is when it is not one.
std::string ErrorMessageOf(const net::HttpResponse& response);

// 400 InvalidArgument and OutOfRange, 403 PermissionDenied, 404 NotFound, 409 AlreadyExists,
// 429 ResourceExhausted, 503 Unavailable, 504 DeadlineExceeded, 500 anything else.
int HttpStatusFor(StatusCode code);

}  // namespace gshare::serve
