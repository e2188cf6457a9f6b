// UidRanges: which range of uids each gshare server (or node) on a host gives its tenants,
// recorded in a file on the host, so that two servers never hand out the same uid: one server's
// tenant could otherwise signal, trace or read the files of another's function.
//
// The ledger is a text file, one line per claim: `<first uid> <count> <owner>`, the owner being
// the claiming server's data directory (an absolute path, the rest of the line). A claim is kept
// while its owner exists: the same owner gets the same range in every run (the files its tenants
// own stay theirs), and a range is handed to another owner only once the folder that claimed it is
// gone (with the files in it; a data directory on a volume that is not mounted counts as gone).
// Claims are made under an exclusive lock on `<ledger>.lock` (flock), and the ledger is replaced by
// rename, so concurrent servers and a crash mid-write leave it whole.
//
// Thread-compatible free function; it blocks on the lock while another process claims.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "gshare/common/status.h"

namespace gshare {

// Where a root server records its claim unless told otherwise.
inline constexpr std::string_view kDefaultUidLedger = "/var/lib/gshare/uid-ranges";

struct UidRange {
  uid_t first = 0;
  std::uint32_t count = 0;
};

struct UidClaimOptions {
  uid_t lowest = 70000;         // the first range starts here
  std::uint32_t count = 10000;  // uids per range
  uid_t highest = 1u << 31;     // no range reaches past this
};

// The range `owner` holds in the ledger at `ledger`, claiming the lowest free one (aligned to
// `count` from `lowest`, overlapping no other claim) when it holds none. Creates the ledger and its
// folder (mode 0755, the file 0644) where missing. InvalidArgument for an owner that is not an
// absolute path on one line; FailedPrecondition for a ledger line that does not
// parse (the line is named: it is never silently dropped); ResourceExhausted when no range is free;
// IoError for what the file system refuses.
Result<UidRange> ClaimUidRange(const std::filesystem::path& ledger, const std::string& owner,
                               const UidClaimOptions& options = {});

}  // namespace gshare
