#include "gshare/serve/tenant_message.h"

#include <cctype>

namespace gshare::serve {
namespace {

// Longer messages are cut here: they come from the node, or from a function's error answer,
// and are read by people.
constexpr std::size_t kMaxTenantMessageBytes = 4096;

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// The length of a run of digits at `at` (0: none).
std::size_t Digits(std::string_view text, std::size_t at) {
  std::size_t n = 0;
  while (at + n < text.size() && IsDigit(text[at + n])) ++n;
  return n;
}

// Whether `word` followed by digits (and not by more of a word) starts at `at`; its length.
std::size_t WordAndNumber(std::string_view text, std::size_t at, std::string_view word) {
  if (text.substr(at, word.size()) != word) return 0;
  const std::size_t digits = Digits(text, at + word.size());
  if (digits == 0) return 0;
  const std::size_t end = at + word.size() + digits;
  if (end < text.size() && IsWordChar(text[end])) return 0;
  return word.size() + digits;
}

bool PathCharacter(char c) {
  return !IsSpace(c) && c != '\'' && c != '"' && c != ')' && c != ',' && c != ';' && c != ':';
}

}  // namespace

std::string ForTenant(std::string_view message, const std::filesystem::path& models) {
  const bool cut = message.size() > kMaxTenantMessageBytes;
  const std::string_view text = message.substr(0, kMaxTenantMessageBytes);
  std::string out;
  out.reserve(text.size() + 16);
  const std::filesystem::path base = models.lexically_normal();
  std::size_t i = 0;
  while (i < text.size()) {
    const bool word_start = i == 0 || !IsWordChar(text[i - 1]);
    if (word_start) {
      // "instance instance-7", "instance 7", "instance-7": an instance.
      std::size_t n = 0;
      if (text.substr(i, 9) == "instance ") n = WordAndNumber(text, i + 9, "instance-");
      if (n > 0) {
        n += 9;
      } else {
        n = WordAndNumber(text, i, "instance ");
        if (n == 0) n = WordAndNumber(text, i, "instance-");
      }
      if (n > 0) {
        out += "an instance";
        i += n;
        continue;
      }
      // "(pid 4242)" goes with the space before it; "pid 4242" is a process.
      if (text[i] == '(') {
        const std::size_t pid = WordAndNumber(text, i + 1, "pid ");
        const std::size_t close = i + 1 + pid;
        if (pid > 0 && close < text.size() && text[close] == ')') {
          if (!out.empty() && out.back() == ' ') out.pop_back();
          i = close + 1;
          continue;
        }
      }
      if (const std::size_t pid = WordAndNumber(text, i, "pid "); pid > 0) {
        out += "a process";
        i += pid;
        continue;
      }
    }
    // An absolute path: a '/' at the start or after a space, a quote, '(' or '=', followed by
    // more of a path (so "3 / 4" and "https://host/x" are left alone).
    const char before = i == 0 ? ' ' : text[i - 1];
    const bool url = before == ':' && i + 1 < text.size() && text[i + 1] == '/';  // "https://"
    const bool path_start = text[i] == '/' && i + 1 < text.size() && PathCharacter(text[i + 1]) &&
                            !url &&
                            (IsSpace(before) || before == '\'' || before == '"' || before == '(' ||
                             before == '=' || before == ':');
    if (path_start) {
      std::size_t end = i + 1;
      while (end < text.size() && PathCharacter(text[end])) ++end;
      const std::filesystem::path path =
          std::filesystem::path(std::string(text.substr(i, end - i))).lexically_normal();
      const std::filesystem::path relative = path.lexically_relative(base);
      const bool inside =
          !models.empty() && !relative.empty() && *relative.begin() != ".." && relative != ".";
      out += inside ? relative.string() : "(a node path)";
      i = end;
      continue;
    }
    out += text[i];
    ++i;
  }
  if (cut) out += "...";
  return out;
}

Status ForTenant(const Status& status, const std::filesystem::path& models) {
  if (status.ok()) return status;
  return Status(status.code(), ForTenant(status.message(), models));
}

}  // namespace gshare::serve
