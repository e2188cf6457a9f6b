// Authenticator: who a presented API key belongs to. The front asks it for every request but the
// health checks; TenantKeys (api_keys.h) is the server's, tests give their own.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gshare::serve {

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // The tenant whose key `key` is, or nothing. Called from the server's io threads at once:
  // implementations are thread-safe and do not block on I/O.
  virtual std::optional<std::string> Authenticate(std::string_view key) const = 0;
};

}  // namespace gshare::serve
