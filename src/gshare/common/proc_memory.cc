#include "gshare/common/proc_memory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace gshare {
namespace {

// The value of a "Name:   1234 kB" line, in bytes.
Result<std::uint64_t> KibLine(std::string_view name, std::string_view rest) {
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  std::uint64_t kib = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
  std::string_view unit(end, static_cast<std::size_t>(rest.data() + rest.size() - end));
  while (!unit.empty() && (unit.back() == ' ' || unit.back() == '\r')) unit.remove_suffix(1);
  if (error != std::errc() || end == rest.data() || unit != " kB" || kib > UINT64_MAX / 1024) {
    return InvalidArgument(fmt::format("/proc status: '{}:{}' is not a size in kB", name, rest));
  }
  return kib * 1024;
}

Result<ProcessMemory> ReadStatusFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT || error == ESRCH)
      return NotFound(fmt::format("{}: no such process", path));
    return IoError(fmt::format("{}: {}", path, std::strerror(error)));
  }
  std::string text;
  char buffer[4096];
  while (true) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      ::close(fd);
      // A process that exits while its file is open reads as ESRCH.
      if (error == ESRCH) return NotFound(fmt::format("{}: no such process", path));
      return IoError(fmt::format("{}: {}", path, std::strerror(error)));
    }
    if (got == 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fd);
  auto memory = ParseProcStatus(text);
  if (!memory.ok()) return memory.status().WithContext(path);
  return memory;
}

}  // namespace

Result<ProcessMemory> ParseProcStatus(std::string_view text) {
  ProcessMemory memory;
  bool has_rss = false;
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    std::uint64_t* field = nullptr;
    if (name == "VmRSS") {
      field = &memory.rss_bytes;
      has_rss = true;
    } else if (name == "RssAnon") {
      field = &memory.rss_anon_bytes;
    } else if (name == "RssFile") {
      field = &memory.rss_file_bytes;
    } else if (name == "RssShmem") {
      field = &memory.rss_shmem_bytes;
    } else if (name == "VmHWM") {
      field = &memory.peak_rss_bytes;
    } else {
      continue;
    }
    auto bytes = KibLine(name, line.substr(colon + 1));
    if (!bytes.ok()) return bytes.status();
    *field = *bytes;
  }
  if (!has_rss) return InvalidArgument("/proc status: no VmRSS line (a kernel thread?)");
  return memory;
}

Result<ProcessMemory> ReadProcessMemory(pid_t pid) {
  return ReadStatusFile(fmt::format("/proc/{}/status", pid));
}

Result<ProcessMemory> ReadOwnMemory() { return ReadStatusFile("/proc/self/status"); }

Status ResetOwnPeakMemory() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return IoError(fmt::format("/proc/self/clear_refs: {}", std::strerror(errno)));
  const ssize_t wrote = ::write(fd, "5", 1);
  const int error = errno;
  ::close(fd);
  if (wrote != 1) return IoError(fmt::format("/proc/self/clear_refs: {}", std::strerror(error)));
  return Status::Ok();
}

}  // namespace gshare
