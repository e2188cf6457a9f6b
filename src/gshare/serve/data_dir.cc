#include "gshare/serve/data_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "gshare/common/unique_fd.h"

namespace gshare::serve {
namespace {

std::string ErrnoText(int error) { return std::system_category().message(error); }

Status WriteAll(int fd, std::string_view content, const std::filesystem::path& path) {
  while (!content.empty()) {
    const ssize_t written = ::write(fd, content.data(), content.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return IoError(fmt::format("{}: write failed: {}", path.string(), ErrnoText(errno)));
    }
    content.remove_prefix(static_cast<std::size_t>(written));
  }
  return Status::Ok();
}

}  // namespace

Status EnsureDataDir(const std::filesystem::path& dir) {
  if (dir.empty()) return InvalidArgument("the data directory is not given");
  std::error_code error;
  if (std::filesystem::is_directory(dir, error)) {
    // Its secrets are trusted only in a folder of the server's own that no one else may write.
    struct stat info {};
    if (::stat(dir.c_str(), &info) != 0) {
      return IoError(fmt::format("{}: cannot stat: {}", dir.string(), ErrnoText(errno)));
    }
    if (info.st_uid != ::geteuid()) {
      return FailedPrecondition(fmt::format(
          "{}: belongs to uid {}, not to this server's uid {}; a data directory must be the "
          "server's own",
          dir.string(), info.st_uid, ::geteuid()));
    }
    if ((info.st_mode & 0022) != 0) {
      return FailedPrecondition(
          fmt::format("{}: mode {:04o} lets other users write into it; run `chmod 700 {}`",
                      dir.string(), info.st_mode & 07777, dir.string()));
    }
    return Status::Ok();
  }
  if (std::filesystem::exists(dir, error)) {
    return InvalidArgument(fmt::format("{}: exists and is not a directory", dir.string()));
  }
  if (dir.has_parent_path()) {
    std::filesystem::create_directories(dir.parent_path(), error);
    if (error) {
      return IoError(fmt::format("{}: cannot create the directory: {}", dir.parent_path().string(),
                                 error.message()));
    }
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return IoError(
        fmt::format("{}: cannot create the data directory: {}", dir.string(), ErrnoText(errno)));
  }
  if (!std::filesystem::is_directory(dir, error)) {
    return InvalidArgument(fmt::format("{}: exists and is not a directory", dir.string()));
  }
  return Status::Ok();
}

Result<std::string> ReadPrivateFile(const std::filesystem::path& path, std::size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) {
    if (errno == ENOENT) return NotFound(fmt::format("{}: does not exist", path.string()));
    if (errno == ELOOP) {
      return FailedPrecondition(fmt::format(
          "{}: is a symbolic link; a secret file must be a regular file", path.string()));
    }
    return IoError(fmt::format("{}: cannot open: {}", path.string(), ErrnoText(errno)));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    return IoError(fmt::format("{}: cannot stat: {}", path.string(), ErrnoText(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    return FailedPrecondition(fmt::format("{}: is not a regular file", path.string()));
  }
  if (info.st_uid != ::geteuid()) {
    return FailedPrecondition(
        fmt::format("{}: belongs to uid {}, not to this server's uid {}; a secret file must be "
                    "the server's own",
                    path.string(), info.st_uid, ::geteuid()));
  }
  if ((info.st_mode & 0077) != 0) {
    return FailedPrecondition(
        fmt::format("{}: mode {:04o} lets users other than its owner access this secret; "
                    "run `chmod 600 {}`",
                    path.string(), info.st_mode & 07777, path.string()));
  }
  if (static_cast<std::size_t>(info.st_size) > max_bytes) {
    return InvalidArgument(
        fmt::format("{}: is {} bytes; at most {}", path.string(), info.st_size, max_bytes));
  }
  std::string content(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t got = ::read(fd.get(), content.data() + done, content.size() - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      return IoError(fmt::format("{}: read failed: {}", path.string(), ErrnoText(errno)));
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  content.resize(done);
  return content;
}

Result<bool> CreatePrivateFileOnce(const std::filesystem::path& path, std::string_view content) {
  std::string temporary = path.string() + ".XXXXXX";
  // mkostemp creates the file with mode 0600.
  UniqueFd fd(::mkostemp(temporary.data(), O_CLOEXEC));
  if (!fd.valid()) {
    return IoError(
        fmt::format("{}: cannot create a temporary file: {}", temporary, ErrnoText(errno)));
  }
  Status written = WriteAll(fd.get(), content, temporary);
  if (written.ok() && ::fchmod(fd.get(), 0600) != 0) {
    written = IoError(fmt::format("{}: chmod failed: {}", temporary, ErrnoText(errno)));
  }
  if (written.ok() && ::fsync(fd.get()) != 0) {
    written = IoError(fmt::format("{}: fsync failed: {}", temporary, ErrnoText(errno)));
  }
  fd.Reset();
  if (!written.ok()) {
    ::unlink(temporary.c_str());
    return written;
  }
  // link() fails with EEXIST where another process (or an earlier start) made the file first.
  const int linked = ::link(temporary.c_str(), path.c_str());
  const int link_error = errno;
  ::unlink(temporary.c_str());
  if (linked == 0) {
    // The new name lasts a crash only once its directory is synced; a failure here is not one
    // of the file, which is complete.
    const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : ".";
    UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.valid()) ::fsync(dir.get());
    return true;
  }
  if (link_error == EEXIST) return false;
  return IoError(fmt::format("{}: cannot create: {}", path.string(), ErrnoText(link_error)));
}

}  // namespace gshare::serve
