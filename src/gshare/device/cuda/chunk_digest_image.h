// The chunk digest kernel (chunk_digest_kernel.cu) as a fat binary, built by nvcc when gshare is
// built: machine code for the GPU generations the toolkit knows (sm_75 to sm_90; sm_100 and
// sm_120 from CUDA 12.8; sm_110 from 13.0), loaded without compiling (cuModuleLoadData), and
// compute_75 PTX that the driver compiles for any other GPU. Nothing outside device/cuda uses it.
#pragma once

#include <cstddef>

namespace gshare {

extern const unsigned char kChunkDigestImage[];
extern const std::size_t kChunkDigestImageBytes;
// The kernel's entry: gshare_chunk_digest(const uint8_t* data, uint64_t size, uint64_t* partials),
// launched with kChunkDigestThreads threads per block; partials has one entry per block.
inline constexpr const char* kChunkDigestKernelName = "gshare_chunk_digest";
inline constexpr unsigned int kChunkDigestThreads = 256;

}  // namespace gshare
