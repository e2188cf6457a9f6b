// ChunkDigest: a 64-bit digest of a run of device memory, computed where the memory is.
//
// A checkpoint compares the digest of each chunk of a function's device memory with the one it
// recorded when that chunk last moved, and copies only the chunks that changed
// (node/restore_engine.h). The digest is computed by the device itself (CopyStream::Digest): on a
// GPU by a kernel that reads device memory at its own bandwidth, far above the link's; on an
// emulated GPU by this file's reference code.
//
// Definition (the CUDA kernel, device/cuda/chunk_digest_kernel.cu, computes the same value): the
// bytes are read as little-endian 64-bit words w[0..n), the last one zero-padded; the digest is
//   sum over i of Mix(w[i] xor ((i + 1) * kDigestKey))  +  Mix(size_bytes xor kDigestLengthKey)
// modulo 2^64, where Mix is a bijective 64-bit finalizer (two multiplications, three xor-shifts).
// A sum is order-free, so a GPU adds its threads' partial sums in any order. It detects changes,
// it does not authenticate: two different images share a digest with probability about 2^-64
// unless built to collide, and a function that builds its own collision only makes its own
// snapshot stale.
//
// The constants and Mix are shared with the kernel, which includes this header.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#if defined(__CUDACC__)
#define GSHARE_HOST_DEVICE __host__ __device__
#else
#define GSHARE_HOST_DEVICE
#endif

namespace gshare {

inline constexpr std::uint64_t kDigestKey = 0x9e3779b97f4a7c15ULL;
inline constexpr std::uint64_t kDigestLengthKey = 0xd6e8feb86659fd93ULL;

GSHARE_HOST_DEVICE constexpr std::uint64_t DigestMix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// The digest of `bytes`, as defined above.
std::uint64_t ChunkDigest(std::span<const std::byte> bytes);

}  // namespace gshare
