#include "gshare/serve/log_tail.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gshare/common/unique_fd.h"
#include "gshare/serve/tenant_message.h"

namespace gshare::serve {

Result<std::vector<std::string>> LogTail(const std::filesystem::path& log,
                                         const std::filesystem::path& models, std::size_t lines,
                                         std::size_t max_bytes) {
  std::vector<std::string> tail;
  UniqueFd file(::open(log.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!file.valid()) {
    if (errno == ENOENT) return NotFound("no log");
    return IoError(fmt::format("cannot open the log: {}", std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(file.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return IoError("the log is not a regular file");
  }
  const auto size = static_cast<std::uint64_t>(info.st_size);
  const std::uint64_t start = size > max_bytes ? size - max_bytes : 0;
  std::string text(static_cast<std::size_t>(size - start), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n =
        ::pread(file.get(), text.data() + got, text.size() - got, static_cast<off_t>(start + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError(fmt::format("cannot read the log: {}", std::strerror(errno)));
    if (n == 0) break;  // cut meanwhile
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  // Lines from the end: the last ones whole, a final one without its newline included (it is
  // being written).
  std::size_t end = text.size();
  if (end > 0 && text[end - 1] == '\n') --end;
  while (tail.size() < lines && end > 0) {
    const std::size_t newline = text.rfind('\n', end - 1);
    const std::size_t from = newline == std::string::npos ? 0 : newline + 1;
    tail.push_back(ForTenant(std::string_view(text).substr(from, end - from), models));
    if (newline == std::string::npos) break;
    end = newline;
  }
  std::reverse(tail.begin(), tail.end());
  return tail;
}

}  // namespace gshare::serve
