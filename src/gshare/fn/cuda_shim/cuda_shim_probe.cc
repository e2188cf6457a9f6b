// A program that is not a CUDA program, run by gshare_cuda_shim_library_test with the shim
// preloaded: it looks symbols up and calls the hooks, and prints what it saw, one "key value"
// line each. It declares the few CUDA signatures it calls itself: it sees no CUDA header.
//
//   cuda_shim_probe SHIM_LIBRARY DRIVER_LIBRARY [RUNTIME_LIBRARY]
//
// RUNTIME_LIBRARY, a CUDA runtime (or a stand-in), is opened with RTLD_LOCAL before the calls: it
// is loaded, but not in the global scope, where the shim's RTLD_NEXT would find it.
#include <dlfcn.h>
#include <fcntl.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace {

using DriverAlloc = int (*)(unsigned long long* pointer, std::size_t bytes);
using RuntimeAlloc = int (*)(void** pointer, std::size_t bytes);
using RuntimeFree = int (*)(void* pointer);

const char* YesNo(bool value) { return value ? "yes" : "no"; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: cuda_shim_probe SHIM_LIBRARY DRIVER_LIBRARY [RUNTIME_LIBRARY]\n");
    return 2;
  }
  // Before any call into the shim: the channel GSHARE_CONTROL_FD names, as loading left it.
  if (const char* control = std::getenv("GSHARE_CONTROL_FD"); control != nullptr) {
    const int flags = ::fcntl(std::atoi(control), F_GETFD);
    std::printf("control_fd_cloexec %s\n", flags < 0 ? "none" : YesNo((flags & FD_CLOEXEC) != 0));
  }
  void* shim = ::dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  std::printf("shim_preloaded %s\n", YesNo(shim != nullptr));
  if (shim == nullptr) return 1;

  // RTLD_NEXT from the program: the next object after the program that defines cudaMalloc is
  // the shim, and dlsym must resolve "next" from its caller, not from itself.
  void* next = ::dlsym(RTLD_NEXT, "cudaMalloc");
  std::printf("rtld_next_finds_shim %s\n",
              YesNo(next != nullptr && next == ::dlsym(shim, "cudaMalloc")));

  // A driver opened by the program itself, as a CUDA runtime opens libcuda.so.1.
  void* driver = ::dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  std::printf("driver_opened %s\n", YesNo(driver != nullptr));
  if (driver != nullptr) {
    for (const char* name : {"cuMemAlloc_v2", "cuGetProcAddress_v2", "cuInit"}) {
      void* found = ::dlsym(driver, name);
      std::printf("%s %s\n", name,
                  found == nullptr               ? "missing"
                  : found == ::dlsym(shim, name) ? "shim"
                                                 : "driver");
    }
  }

  if (argc == 4) {
    std::printf("runtime_opened %s\n", YesNo(::dlopen(argv[3], RTLD_NOW | RTLD_LOCAL) != nullptr));
  }

  auto driver_alloc = reinterpret_cast<DriverAlloc>(::dlsym(shim, "cuMemAlloc_v2"));
  auto runtime_alloc = reinterpret_cast<RuntimeAlloc>(::dlsym(shim, "cudaMalloc"));
  auto runtime_free = reinterpret_cast<RuntimeFree>(::dlsym(shim, "cudaFree"));
  unsigned long long device_pointer = 0;
  void* pointer = nullptr;
  std::printf("cuMemAlloc_v2_result %d\n", driver_alloc(&device_pointer, 1024));
  std::printf("cudaMalloc_result %d\n", runtime_alloc(&pointer, 1024));
  // What programs call to create the context: never the slice's, always forwarded.
  std::printf("cudaFree_null_result %d\n", runtime_free(nullptr));
  std::fflush(stdout);
  return 0;
}
