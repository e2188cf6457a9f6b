// The chunk digest (device/chunk_digest.h) as a CUDA kernel. Built into a fat binary when gshare
// is built and embedded in it (chunk_digest_image.h), loaded by the driver API: no runtime
// registration, nothing but cuModuleLoadData and cuLaunchKernel.
//
// gshare_chunk_digest(data, size, partials): each block writes the sum of its threads' terms to
// partials[blockIdx.x]; the host adds the partial sums (any order: the digest is a sum). Block 0's
// thread 0 also adds the zero-padded tail word and the length term. blockDim.x is a multiple of
// 32, at most 256.

#include "gshare/device/chunk_digest.h"

namespace {

using gshare::DigestMix;
using gshare::kDigestKey;
using gshare::kDigestLengthKey;

constexpr int kThreads = 256;

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    gshare_chunk_digest(const unsigned char* data, unsigned long long size,
                        unsigned long long* partials) {
  const unsigned long long words = size / 8;
  const unsigned long long* word = reinterpret_cast<const unsigned long long*>(data);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  unsigned long long sum = 0;
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < words; i += stride) {
    sum += DigestMix(word[i] ^ ((i + 1) * kDigestKey));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned long long tail = size % 8;
    if (tail != 0) {
      unsigned long long w = 0;
      for (unsigned long long k = 0; k < tail; ++k) {
        w |= static_cast<unsigned long long>(data[words * 8 + k]) << (8 * k);
      }
      sum += DigestMix(w ^ ((words + 1) * kDigestKey));
    }
    sum += DigestMix(size ^ kDigestLengthKey);
  }
  // The block's sum: within each warp by shuffles, then across the warps in shared memory.
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  __shared__ unsigned long long warp_sums[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long block = 0;
    for (unsigned int w = 0; w < blockDim.x / 32; ++w) block += warp_sums[w];
    partials[blockIdx.x] = block;
  }
}
