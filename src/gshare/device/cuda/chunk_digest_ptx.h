// The chunk digest kernel (chunk_digest_kernel.cu) as PTX text, compiled by nvcc when gshare is
// built and checked there by ptxas; the driver compiles it for the GPU at load
// (cuModuleLoadData). Nothing outside device/cuda uses it.
#pragma once

namespace gshare {

// NUL-terminated PTX.
extern const char kChunkDigestPtx[];
// The kernel's entry: gshare_chunk_digest(const uint8_t* data, uint64_t size, uint64_t* partials),
// launched with 256 threads per block; partials has one entry per block.
inline constexpr const char* kChunkDigestKernelName = "gshare_chunk_digest";
inline constexpr unsigned int kChunkDigestThreads = 256;

}  // namespace gshare
