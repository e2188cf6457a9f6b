#include "gshare/sim/figures.h"

#include <sys/wait.h>

#include <fmt/format.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace gshare {

Status WriteTextFile(const std::filesystem::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return IoError(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
  out << content;
  out.close();
  if (!out) return IoError(fmt::format("error writing {}", path.string()));
  return Status::Ok();
}

bool HaveGnuplot() {
  return std::system("command -v gnuplot >/dev/null 2>&1") == 0;  // NOLINT: fixed command
}

Status RenderGnuplot(const std::filesystem::path& dir, const std::vector<std::string>& scripts) {
  for (const std::string& script : scripts) {
    const std::string command = fmt::format("cd '{}' && gnuplot '{}' 2>/dev/null",
                                            std::filesystem::absolute(dir).string(), script);
    const int rc = std::system(command.c_str());  // NOLINT: paths are ours, quoted
    if (rc != 0) {
      return IoError(fmt::format("gnuplot failed on {} (exit {})", (dir / script).string(),
                                 WIFEXITED(rc) ? WEXITSTATUS(rc) : -1));
    }
  }
  return Status::Ok();
}

}  // namespace gshare
