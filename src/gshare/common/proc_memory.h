// Resident memory of a process, as Linux reports it in /proc/<pid>/status.
//
// The node's device memory and snapshots are memfd segments: a process's resident set counts
// them as RssShmem, apart from its own heap and stacks (RssAnon) and mapped files (RssFile), so
// the three are kept apart. Values are bytes (the kernel writes kB, meaning KiB).
//
// Threading: free functions, no shared state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "gshare/common/status.h"

namespace gshare {

struct ProcessMemory {
  std::uint64_t rss_bytes = 0;        // VmRSS: the whole resident set
  std::uint64_t rss_anon_bytes = 0;   // RssAnon: private anonymous memory
  std::uint64_t rss_file_bytes = 0;   // RssFile: mapped files
  std::uint64_t rss_shmem_bytes = 0;  // RssShmem: shared memory, memfd segments among it
  std::uint64_t peak_rss_bytes = 0;   // VmHWM: the largest VmRSS since start or the last reset
};

// Parses the text of a /proc/<pid>/status file. VmRSS is required (InvalidArgument when it is
// missing or malformed: a kernel thread has none); the Rss* and VmHWM lines are 0 when absent.
Result<ProcessMemory> ParseProcStatus(std::string_view text);

// Reads /proc/<pid>/status. NotFound when the process no longer exists (it exited between being
// listed and being read: callers that sample many processes skip it).
Result<ProcessMemory> ReadProcessMemory(pid_t pid);

// Reads /proc/self/status.
Result<ProcessMemory> ReadOwnMemory();

// Resets this process's peak_rss_bytes to its present resident set (writes 5 to
// /proc/self/clear_refs); an error where the kernel refuses, for a caller to skip its measurement.
Status ResetOwnPeakMemory();

}  // namespace gshare
