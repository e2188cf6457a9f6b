#include "gshare/device/emulated/copy_engine.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GSHARE_COPY_ENGINE_X86 1
#endif

namespace gshare {
namespace {

// Below this, streaming stores gain nothing over memcpy.
constexpr std::size_t kStreamingThresholdBytes = 1 << 20;
constexpr std::size_t kPageBytes = 4096;
// Streams interleave four pages, a cache line pair from each in turn, as glibc's large memcpy
// does: it keeps several DRAM pages open at once.
constexpr std::size_t kGroupBytes = 4 * kPageBytes;

#if defined(GSHARE_COPY_ENGINE_X86)

__attribute__((target("avx512f"))) void StreamingCopyAvx512(std::byte* destination,
                                                            const std::byte* source,
                                                            std::size_t bytes) {
  for (std::size_t group = 0; group < bytes / kGroupBytes; ++group) {
    for (std::size_t line = 0; line < kPageBytes; line += 128) {
      for (std::size_t page = 0; page < 4; ++page) {
        const std::byte* from = source + page * kPageBytes + line;
        std::byte* to = destination + page * kPageBytes + line;
        _mm_prefetch(reinterpret_cast<const char*>(from + 512), _MM_HINT_T0);
        const __m512i a = _mm512_loadu_si512(from);
        const __m512i b = _mm512_loadu_si512(from + 64);
        _mm512_stream_si512(reinterpret_cast<__m512i*>(to), a);
        _mm512_stream_si512(reinterpret_cast<__m512i*>(to + 64), b);
      }
    }
    source += kGroupBytes;
    destination += kGroupBytes;
  }
  _mm_sfence();
}

__attribute__((target("avx2"))) void StreamingCopyAvx2(std::byte* destination,
                                                       const std::byte* source, std::size_t bytes) {
  for (std::size_t group = 0; group < bytes / kGroupBytes; ++group) {
    for (std::size_t line = 0; line < kPageBytes; line += 128) {
      for (std::size_t page = 0; page < 4; ++page) {
        const std::byte* from = source + page * kPageBytes + line;
        std::byte* to = destination + page * kPageBytes + line;
        _mm_prefetch(reinterpret_cast<const char*>(from + 512), _MM_HINT_T0);
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 32));
        const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 64));
        const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 96));
        _mm256_stream_si256(reinterpret_cast<__m256i*>(to), a);
        _mm256_stream_si256(reinterpret_cast<__m256i*>(to + 32), b);
        _mm256_stream_si256(reinterpret_cast<__m256i*>(to + 64), c);
        _mm256_stream_si256(reinterpret_cast<__m256i*>(to + 96), d);
      }
    }
    source += kGroupBytes;
    destination += kGroupBytes;
  }
  _mm_sfence();
}

enum class Kind { kAvx512, kAvx2, kMemcpy };

Kind DetectKind() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Kind::kAvx512;
  if (__builtin_cpu_supports("avx2")) return Kind::kAvx2;
  return Kind::kMemcpy;
}

Kind CachedKind() {
  static const Kind kind = DetectKind();
  return kind;
}

#endif  // GSHARE_COPY_ENGINE_X86

std::atomic<CopyRoutine> active_routine{CopyRoutine::kStreaming};

}  // namespace

const char* CopyRoutineName(CopyRoutine routine) {
  return routine == CopyRoutine::kStreaming ? "streaming" : "memcpy";
}

void SetCopyRoutine(CopyRoutine routine) {
  active_routine.store(routine, std::memory_order_relaxed);
}

CopyRoutine ActiveCopyRoutine() { return active_routine.load(std::memory_order_relaxed); }

void CopyEngineCopy(void* destination, const void* source, std::size_t bytes) {
  CopyEngineCopyWith(ActiveCopyRoutine(), destination, source, bytes);
}

void CopyEngineCopyWith(CopyRoutine routine, void* destination, const void* source,
                        std::size_t bytes) {
#if defined(GSHARE_COPY_ENGINE_X86)
  const Kind kind = CachedKind();
  if (routine == CopyRoutine::kStreaming && bytes >= kStreamingThresholdBytes &&
      kind != Kind::kMemcpy) {
    auto* to = static_cast<std::byte*>(destination);
    const auto* from = static_cast<const std::byte*>(source);
    // Align the destination to a page with memcpy, stream whole groups, memcpy the tail.
    const std::size_t head =
        (kPageBytes - (reinterpret_cast<std::uintptr_t>(to) & (kPageBytes - 1))) & (kPageBytes - 1);
    std::memcpy(to, from, head);
    to += head;
    from += head;
    bytes -= head;
    const std::size_t streamed = bytes / kGroupBytes * kGroupBytes;
    if (kind == Kind::kAvx512) {
      StreamingCopyAvx512(to, from, streamed);
    } else {
      StreamingCopyAvx2(to, from, streamed);
    }
    std::memcpy(to + streamed, from + streamed, bytes - streamed);
    return;
  }
#endif
  std::memcpy(destination, source, bytes);
}

const char* CopyEngineKind() {
#if defined(GSHARE_COPY_ENGINE_X86)
  switch (CachedKind()) {
    case Kind::kAvx512:
      return "avx512";
    case Kind::kAvx2:
      return "avx2";
    case Kind::kMemcpy:
      break;
  }
#endif
  return "memcpy";
}

}  // namespace gshare
