#include "gshare/node/process/uid_ranges.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace gshare {
namespace {

struct Claim {
  std::uint64_t first = 0;
  std::uint64_t count = 0;
  std::string owner;
};

// Closes the lock file (which releases the lock) when it goes.
class LockFile {
 public:
  explicit LockFile(int fd) : fd_(fd) {}
  ~LockFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;

 private:
  int fd_;
};

bool ParseNumber(std::string_view text, std::uint64_t& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

Result<std::vector<Claim>> ReadLedger(const std::filesystem::path& ledger) {
  std::vector<Claim> claims;
  std::ifstream in(ledger);
  if (!in) {
    if (errno == ENOENT) return claims;
    return IoError(fmt::format("{}: {}", ledger.string(), std::strerror(errno)));
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const auto space1 = line.find(' ');
    const auto space2 = space1 == std::string::npos ? space1 : line.find(' ', space1 + 1);
    Claim claim;
    if (space2 == std::string::npos ||
        !ParseNumber(std::string_view(line).substr(0, space1), claim.first) ||
        !ParseNumber(std::string_view(line).substr(space1 + 1, space2 - space1 - 1), claim.count) ||
        claim.count == 0 || space2 + 1 >= line.size()) {
      return FailedPrecondition(fmt::format("{} line {}: '{}' is not '<first uid> <count> <owner>'",
                                            ledger.string(), number, line.substr(0, 200)));
    }
    claim.owner = line.substr(space2 + 1);
    claims.push_back(std::move(claim));
  }
  return claims;
}

Status WriteLedger(const std::filesystem::path& ledger, const std::vector<Claim>& claims) {
  std::ostringstream text;
  for (const Claim& claim : claims)
    text << claim.first << ' ' << claim.count << ' ' << claim.owner << '\n';
  const std::filesystem::path temporary = ledger.string() + ".new";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text.str();
    out.flush();
    if (!out) return IoError(fmt::format("{}: cannot be written", temporary.string()));
  }
  std::error_code error;
  std::filesystem::permissions(temporary, std::filesystem::perms(0644), error);
  std::filesystem::rename(temporary, ledger, error);
  if (error) return IoError(fmt::format("{}: {}", ledger.string(), error.message()));
  return Status::Ok();
}

}  // namespace

Result<UidRange> ClaimUidRange(const std::filesystem::path& ledger, const std::string& owner,
                               const UidClaimOptions& options) {
  if (owner.empty() || owner.front() != '/' || owner.find_first_of("\n\r") != std::string::npos) {
    return InvalidArgument(
        fmt::format("a uid range's owner must be an absolute path on one line: '{}'", owner));
  }
  if (options.count == 0 || options.lowest == 0 ||
      static_cast<std::uint64_t>(options.lowest) + options.count > options.highest) {
    return InvalidArgument("the uid ranges must be non-empty and above 0");
  }
  std::error_code error;
  std::filesystem::create_directories(ledger.parent_path(), error);
  if (error) return IoError(fmt::format("{}: {}", ledger.parent_path().string(), error.message()));
  const std::string lock_path = ledger.string() + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(fmt::format("{}: {}", lock_path, std::strerror(errno)));
  LockFile lock(fd);
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) return IoError(fmt::format("lock {}: {}", lock_path, std::strerror(errno)));
  }
  GSHARE_ASSIGN_OR_RETURN(std::vector<Claim> claims, ReadLedger(ledger));
  for (const Claim& claim : claims) {
    if (claim.owner == owner) {
      return UidRange{static_cast<uid_t>(claim.first), static_cast<std::uint32_t>(claim.count)};
    }
  }
  // The claims of owners that are gone free their ranges; an owner that cannot be looked at
  // (a permission, an I/O error) is not gone.
  std::erase_if(claims, [](const Claim& claim) {
    std::error_code lookup;
    const auto status = std::filesystem::symlink_status(claim.owner, lookup);
    return status.type() == std::filesystem::file_type::not_found;
  });
  // The lowest aligned range that overlaps no claim.
  for (std::uint64_t first = options.lowest; first + options.count <= options.highest;
       first += options.count) {
    const std::uint64_t end = first + options.count;
    bool free = true;
    for (const Claim& claim : claims) {
      if (first < claim.first + claim.count && claim.first < end) free = false;
    }
    if (!free) continue;
    claims.push_back(Claim{first, options.count, owner});
    GSHARE_RETURN_IF_ERROR(WriteLedger(ledger, claims));
    return UidRange{static_cast<uid_t>(first), options.count};
  }
  return ResourceExhausted(
      fmt::format("{}: every uid range from {} is claimed", ledger.string(), options.lowest));
}

}  // namespace gshare
