// An unmodified CUDA program for gshare_cuda_shim_gpu_test: it uses the CUDA runtime as any
// program does and knows nothing of gShare. The test runs it with the shim preloaded and sends it
// commands on standard input, one per line; it answers each with one line on standard output.
//
//   alloc N                 cudaMalloc              -> "alloc ok 0xADDR" | "alloc error CODE"
//   fill ADDR N SEED        cudaMemcpy of N pseudo-random bytes to the device -> "fill ok"
//   check ADDR N SEED       cudaMemcpy back and compare     -> "check ok" | "check differs"
//   free ADDR               cudaFree                        -> "free ok"
//   info                    cudaMemGetInfo                  -> "info FREE TOTAL"
//   managed N               cudaMallocManaged, written, cudaFree -> "managed ok"
//   async N                 cudaMallocAsync, cudaMemsetAsync, cudaFreeAsync on a stream
//                                                           -> "async ok 0xADDR"
//   driver N                the driver's cuMemAlloc from cudaGetDriverEntryPoint, then its
//                           cuMemFree                       -> "driver ok 0xADDR"
//   quit                    exits 0
// Any failure answers "<command> error CODE".
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<unsigned char> Pattern(std::size_t bytes, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<unsigned char> pattern(bytes);
  for (auto& byte : pattern) byte = static_cast<unsigned char>(random());
  return pattern;
}

void* Pointer(const std::string& text) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(std::stoull(text, nullptr, 0)));
}

std::string Error(const std::string& command, int code) {
  return command + " error " + std::to_string(code);
}

std::string Address(const void* pointer) {
  char text[32];
  std::snprintf(text, sizeof(text), "%#llx",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(pointer)));
  return text;
}

std::string Serve(const std::string& line) {
  std::istringstream in(line);
  std::string command;
  in >> command;
  if (command == "alloc") {
    std::size_t bytes = 0;
    in >> bytes;
    void* pointer = nullptr;
    const cudaError_t result = cudaMalloc(&pointer, bytes);
    return result == cudaSuccess ? "alloc ok " + Address(pointer) : Error(command, result);
  }
  if (command == "fill" || command == "check") {
    std::string address;
    std::size_t bytes = 0;
    unsigned seed = 0;
    in >> address >> bytes >> seed;
    const auto pattern = Pattern(bytes, seed);
    if (command == "fill") {
      const cudaError_t result =
          cudaMemcpy(Pointer(address), pattern.data(), bytes, cudaMemcpyHostToDevice);
      return result == cudaSuccess ? "fill ok" : Error(command, result);
    }
    std::vector<unsigned char> back(bytes);
    const cudaError_t result =
        cudaMemcpy(back.data(), Pointer(address), bytes, cudaMemcpyDeviceToHost);
    if (result != cudaSuccess) return Error(command, result);
    return back == pattern ? "check ok" : "check differs";
  }
  if (command == "free") {
    std::string address;
    in >> address;
    const cudaError_t result = cudaFree(Pointer(address));
    return result == cudaSuccess ? "free ok" : Error(command, result);
  }
  if (command == "info") {
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    const cudaError_t result = cudaMemGetInfo(&free_bytes, &total_bytes);
    if (result != cudaSuccess) return Error(command, result);
    return "info " + std::to_string(free_bytes) + " " + std::to_string(total_bytes);
  }
  if (command == "managed") {
    std::size_t bytes = 0;
    in >> bytes;
    void* pointer = nullptr;
    cudaError_t result = cudaMallocManaged(&pointer, bytes);
    if (result != cudaSuccess) return Error(command, result);
    auto* bytes_there = static_cast<unsigned char*>(pointer);
    for (std::size_t i = 0; i < bytes; ++i) bytes_there[i] = static_cast<unsigned char>(i);
    result = cudaFree(pointer);
    return result == cudaSuccess ? "managed ok" : Error(command, result);
  }
  if (command == "async") {
    std::size_t bytes = 0;
    in >> bytes;
    cudaStream_t stream = nullptr;
    void* pointer = nullptr;
    cudaError_t result = cudaStreamCreate(&stream);
    if (result == cudaSuccess) result = cudaMallocAsync(&pointer, bytes, stream);
    if (result == cudaSuccess) result = cudaMemsetAsync(pointer, 0x5a, bytes, stream);
    if (result == cudaSuccess) result = cudaFreeAsync(pointer, stream);
    if (result == cudaSuccess) result = cudaStreamSynchronize(stream);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
    return result == cudaSuccess ? "async ok " + Address(pointer) : Error(command, result);
  }
  if (command == "driver") {
    std::size_t bytes = 0;
    in >> bytes;
    void* allocate = nullptr;
    void* release = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    cudaError_t result =
        cudaGetDriverEntryPointByVersion("cuMemAlloc", &allocate, 12000, cudaEnableDefault, &found);
    if (result == cudaSuccess) {
      result =
          cudaGetDriverEntryPointByVersion("cuMemFree", &release, 12000, cudaEnableDefault, &found);
    }
#else
    cudaError_t result =
        cudaGetDriverEntryPoint("cuMemAlloc", &allocate, cudaEnableDefault, &found);
    if (result == cudaSuccess) {
      result = cudaGetDriverEntryPoint("cuMemFree", &release, cudaEnableDefault, &found);
    }
#endif
    if (result != cudaSuccess || allocate == nullptr || release == nullptr) {
      return Error(command, result);
    }
    CUdeviceptr pointer = 0;
    CUresult driver_result =
        reinterpret_cast<CUresult (*)(CUdeviceptr*, std::size_t)>(allocate)(&pointer, bytes);
    if (driver_result != CUDA_SUCCESS) return Error(command, driver_result);
    driver_result = reinterpret_cast<CUresult (*)(CUdeviceptr)>(release)(pointer);
    if (driver_result != CUDA_SUCCESS) return Error(command, driver_result);
    return "driver ok " + Address(reinterpret_cast<void*>(static_cast<std::uintptr_t>(pointer)));
  }
  return "unknown " + command;
}

}  // namespace

int main() {
  for (std::string line; std::getline(std::cin, line);) {
    if (line == "quit") return 0;
    std::cout << Serve(line) << std::endl;
  }
  return 0;
}
