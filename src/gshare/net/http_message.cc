#include "gshare/net/http_message.h"

#include <fmt/format.h>

namespace gshare::net {

HttpResponse JsonErrorResponse(int status, std::string_view message) {
  std::string escaped;  // a JSON string: quotes, backslashes and control characters escaped
  for (const char c : message) {
    if (c == '"' || c == '\\') {
      escaped += '\\';
      escaped += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      escaped += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      escaped += c;
    }
  }
  return {status, "{\"error\": \"" + escaped + "\"}", "application/json"};
}

}  // namespace gshare::net
