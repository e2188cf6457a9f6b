// The data directory of `gshare serve`: where the registry, the server secret and the admin key
// live. One place names its files, so the server, the command line and the docs agree.
//
//   DIR/gshare.db       the registry (registry.h): tenants and their functions, SQLite in WAL mode
//                       (gshare.db-wal and gshare.db-shm beside it while it is open)
//   DIR/server.secret   32 random bytes, the key under which API keys are hashed (api_keys.h)
//   DIR/admin.key       the admin key as text, when it was generated rather than given
//
// The directory is created with mode 0700, the two secret files with mode 0600; a secret file
// that its mode lets anyone but its owner touch is refused.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "gshare/common/status.h"

namespace gshare::serve {

inline constexpr std::string_view kRegistryFileName = "gshare.db";
inline constexpr std::string_view kServerSecretFileName = "server.secret";
inline constexpr std::string_view kAdminKeyFileName = "admin.key";

// Creates `dir` (and missing parents) with mode 0700 where it is missing. An existing directory
// must belong to this process's uid and not be writable by the group or others
// (FailedPrecondition otherwise); an error when `dir` exists and is not a directory.
Status EnsureDataDir(const std::filesystem::path& dir);

// Reads a secret file of at most `max_bytes`. NotFound when it does not exist;
// FailedPrecondition when it is not a regular file, belongs to another uid, or its mode grants the
// group or others any access (the message says how to fix it).
Result<std::string> ReadPrivateFile(const std::filesystem::path& path, std::size_t max_bytes);

// Creates `path` holding `content`, with mode 0600, unless it exists. Atomic against other
// processes doing the same: the content is written to a temporary file, synced, then linked into
// place, so a reader never sees a partial file and exactly one creator wins. Returns true when
// this call created it, false when it already existed (the caller then reads it).
Result<bool> CreatePrivateFileOnce(const std::filesystem::path& path, std::string_view content);

}  // namespace gshare::serve
