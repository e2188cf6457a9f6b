#include "gshare/serve/tenant_message.h"

#include <regex>

namespace gshare::serve {

std::string ForTenant(std::string_view message, const std::filesystem::path& models) {
  static const std::regex kInstanceOf(R"(\binstance (instance-)?[0-9]+ of )");
  static const std::regex kInstance(R"(\b(instance )?instance-[0-9]+\b|\binstance [0-9]+\b)");
  static const std::regex kPid(R"( ?\(pid [0-9]+\))");
  static const std::regex kPidWord(R"(\bpid [0-9]+\b)");
  static const std::regex kPath(R"((^|[\s'"(=:])(/[^\s'"),;:]*))");
  std::string text(message);
  text = std::regex_replace(text, kInstanceOf, "an instance of ");
  text = std::regex_replace(text, kInstance, "an instance");
  text = std::regex_replace(text, kPid, "");
  text = std::regex_replace(text, kPidWord, "a process");
  std::string out;
  auto begin = std::sregex_iterator(text.begin(), text.end(), kPath);
  std::size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const std::smatch& match = *it;
    const std::size_t at = static_cast<std::size_t>(match.position(2));
    out.append(text, last, at - last);
    const std::filesystem::path path(match.str(2));
    const std::filesystem::path relative = path.lexically_relative(models);
    const bool inside = !models.empty() && !relative.empty() && *relative.begin() != "..";
    out += inside ? relative.string() : "(a node path)";
    last = at + static_cast<std::size_t>(match.length(2));
  }
  out.append(text, last, std::string::npos);
  return out;
}

Status ForTenant(const Status& status, const std::filesystem::path& models) {
  if (status.ok()) return status;
  return Status(status.code(), ForTenant(status.message(), models));
}

}  // namespace gshare::serve
