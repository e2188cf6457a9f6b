// LogTail: the last lines of a function's log (the stdout and stderr of its instances, which the
// node appends to one file per function), as its tenant may read them: each line through
// ForTenant (tenant_message.h), so the node's paths, instance ids and pids are left out.
// Free function, no state: any thread; it reads at most `max_bytes` from the end of the file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "gshare/common/status.h"

namespace gshare::serve {

inline constexpr std::size_t kMaxLogTailLines = 10'000;
inline constexpr std::size_t kMaxLogTailBytes = 1 << 20;

// The last `lines` whole lines of the file at `log` (no line ending), oldest first, each as
// ForTenant gives it against `models`. A line longer than what is read is cut at its start.
// NotFound where there is no such file (no instance of the function ran), IoError when it cannot
// be read.
Result<std::vector<std::string>> LogTail(const std::filesystem::path& log,
                                         const std::filesystem::path& models, std::size_t lines,
                                         std::size_t max_bytes = kMaxLogTailBytes);

}  // namespace gshare::serve
