// dlsym, interposed: a runtime that opens libcuda itself and looks up cuGetProcAddress_v2 (or any
// hooked entry point) with dlsym gets the shim's hook, which symbol interposition alone would not
// give it. Every other lookup goes to the C library's dlsym as a tail call, so that dlsym still
// sees its caller's return address: RTLD_NEXT is resolved relative to the caller, not the shim.
// This file is compiled with optimization in every build type for that tail call
// (CMakeLists.txt); the library's test checks RTLD_NEXT from a program.
#include <dlfcn.h>

#include <initializer_list>

#include "gshare/fn/cuda_shim/driver_hooks.h"
#include "gshare/fn/cuda_shim/shim.h"

#if defined(__clang__)
#define GSHARE_SHIM_TAIL_CALL [[clang::musttail]]
#else
#define GSHARE_SHIM_TAIL_CALL
#endif

namespace gshare::fn::cuda_shim {
namespace {

DlsymFunction FindRealDlsym() {
  // glibc 2.34 moved dlsym into libc under a new version; older ones have only the first.
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"}) {
    if (void* found = ::dlvsym(RTLD_NEXT, "dlsym", version)) {
      return reinterpret_cast<DlsymFunction>(found);
    }
  }
  return nullptr;
}

// The hook to hand out for `name`, or nullptr to let the real dlsym answer.
void* HookedByDlsym(void* handle, const char* name) {
  if (name[0] != 'c' || name[1] != 'u') return nullptr;  // dlsym's name is never null
  void* hook = DriverHookNamed(name);
  if (hook == nullptr || !Active()) return nullptr;
  // Only where the real lookup finds the entry point: a program probing for a driver is told
  // the truth. (For RTLD_NEXT this one lookup is relative to the shim.)
  return RealDlsym()(handle, name) != nullptr ? hook : nullptr;
}

}  // namespace

DlsymFunction RealDlsym() {
  static const DlsymFunction real = FindRealDlsym();
  return real;
}

}  // namespace gshare::fn::cuda_shim

extern "C" GSHARE_SHIM_EXPORT void* dlsym(void* handle, const char* name) noexcept {
  if (void* hook = gshare::fn::cuda_shim::HookedByDlsym(handle, name)) return hook;
  GSHARE_SHIM_TAIL_CALL return gshare::fn::cuda_shim::RealDlsym()(handle, name);
}
