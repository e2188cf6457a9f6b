// Counts the bytes this test binary holds through operator new, and their peak: linking
// allocation_counter_for_test.cc replaces the global operator new and delete (every form) with
// counting ones over malloc. Exact and independent of how the allocator returns memory to the
// kernel, unlike the resident set. Thread-safe (atomics).
#pragma once

#include <cstddef>

namespace gshare::testing {

std::size_t AllocatedBytes();
std::size_t PeakAllocatedBytes();
// Sets the peak to what is allocated now.
void ResetPeakAllocatedBytes();

}  // namespace gshare::testing
