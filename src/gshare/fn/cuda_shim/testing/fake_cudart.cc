// A stand-in for the CUDA runtime (libcudart), for gshare_cuda_shim_library_test: cuda_shim_probe
// opens it with RTLD_LOCAL, as a Python extension may open the real one, so that the shim's
// fall-through cannot find it with RTLD_NEXT. Its answers are its own, so the test tells them from
// the shim's: cudaMalloc fails with kFakeMallocResult, cudaFree(nullptr) succeeds.
#include <cstddef>

namespace {

constexpr int kFakeMallocResult = 77;
constexpr int kFakeFreeResult = 78;  // a free of anything but nullptr

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int cudaMalloc(void** pointer, std::size_t) {
  if (pointer != nullptr) *pointer = nullptr;
  return kFakeMallocResult;
}

__attribute__((visibility("default"))) int cudaFree(void* pointer) {
  return pointer == nullptr ? 0 : kFakeFreeResult;
}

}  // extern "C"
