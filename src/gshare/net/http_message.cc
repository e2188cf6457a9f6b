#include "gshare/net/http_message.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace gshare::net {

std::string_view FindHeader(const HeaderFields& fields, std::string_view name) {
  for (const auto& [field, value] : fields) {
    if (field.size() == name.size() &&
        std::equal(field.begin(), field.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return value;
    }
  }
  return {};
}

namespace {

// The length of the well-formed UTF-8 sequence at the start of `text` (RFC 3629: no overlong
// forms, no surrogates, nothing past U+10FFFF), or 0 when it is not one.
std::size_t Utf8SequenceLength(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;  // the second byte's range
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return length;
}

}  // namespace

HttpResponse JsonErrorResponse(int status, std::string_view message) {
  // A JSON string: quotes, backslashes and control characters escaped, bytes that are not UTF-8
  // replaced by U+FFFD, so the body is valid JSON whatever the message holds.
  std::string escaped;
  for (std::size_t i = 0; i < message.size();) {
    const char c = message[i];
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      escaped += '\\';
      escaped += c;
    } else if (byte < 0x20) {
      escaped += fmt::format("\\u{:04x}", static_cast<int>(byte));
    } else if (byte >= 0x80) {
      const std::size_t length = Utf8SequenceLength(message.substr(i));
      if (length == 0) {
        escaped += "\\ufffd";
        ++i;
      } else {
        escaped.append(message.substr(i, length));
        i += length;
      }
      continue;
    } else {
      escaped += c;
    }
    ++i;
  }
  return {status, "{\"error\": \"" + escaped + "\"}", "application/json"};
}

}  // namespace gshare::net
