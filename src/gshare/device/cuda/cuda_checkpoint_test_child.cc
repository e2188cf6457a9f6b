// A CUDA process for the process checkpoint API test (cuda_checkpoint_test.cc): it allocates
// device memory on GPU 0, fills it with a pattern, and writes "ready" on its standard output. On a
// line on its standard input it reads the memory back and writes "ok", or where it differs.
//
//   cuda_checkpoint_test_child [BYTES]     (default 256 MiB)
//
// Exit status: 0 when the pattern came back intact, 1 when it did not, 2 on a CUDA error.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

std::uint8_t Pattern(std::size_t i) { return static_cast<std::uint8_t>((i * 131) ^ (i >> 12)); }

int Fail(const char* what, cudaError_t error) {
  std::printf("error: %s: %s\n", what, cudaGetErrorString(error));
  std::fflush(stdout);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256ULL << 20;
  std::vector<std::uint8_t> host(bytes);
  for (std::size_t i = 0; i < bytes; ++i) host[i] = Pattern(i);
  void* device = nullptr;
  if (const cudaError_t e = cudaMalloc(&device, bytes); e != cudaSuccess)
    return Fail("cudaMalloc", e);
  if (const cudaError_t e = cudaMemcpy(device, host.data(), bytes, cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    return Fail("cudaMemcpy to the GPU", e);
  }
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    return Fail("cudaDeviceSynchronize", e);
  }
  std::printf("ready\n");
  std::fflush(stdout);

  char line[64];
  if (std::fgets(line, sizeof line, stdin) == nullptr) return 2;
  std::vector<std::uint8_t> back(bytes);
  if (const cudaError_t e = cudaMemcpy(back.data(), device, bytes, cudaMemcpyDeviceToHost);
      e != cudaSuccess) {
    return Fail("cudaMemcpy from the GPU", e);
  }
  for (std::size_t i = 0; i < bytes; ++i) {
    if (back[i] != Pattern(i)) {
      std::printf("mismatch at byte %zu: %u, not %u\n", i, unsigned{back[i]}, unsigned{Pattern(i)});
      std::fflush(stdout);
      return 1;
    }
  }
  cudaFree(device);
  std::printf("ok\n");
  std::fflush(stdout);
  return 0;
}
