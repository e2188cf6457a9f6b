#include "gshare/fn/c_api/gshare_fn.h"

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/fn/runtime.h"

namespace {

using gshare::Mutex;
using gshare::MutexLock;
using gshare::fn::DeviceAllocation;
using gshare::fn::FunctionRuntime;

thread_local std::string last_error;

// Runs `body`; an exception (out of memory, say) must not cross into a C caller: it becomes the
// error `failed` returns.
template <typename T, typename Body>
T Guarded(T failed, Body body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "an unknown exception";
  }
  return failed;
}

struct Library {
  Mutex mutex;
  std::unique_ptr<FunctionRuntime> runtime GUARDED_BY(mutex);
  // Every allocation handed out: kept until the process ends.
  std::vector<DeviceAllocation> allocations GUARDED_BY(mutex);
};

Library& TheLibrary() {
  static Library* const library = new Library();  // never destroyed: kernels may run at exit
  return *library;
}

// The runtime, or nullptr (and the error set) before gshare_fn_connect.
FunctionRuntime* Runtime() {
  Library& library = TheLibrary();
  MutexLock lock(library.mutex);
  if (library.runtime == nullptr) last_error = "gshare_fn_connect has not succeeded";
  return library.runtime.get();
}

}  // namespace

extern "C" {

int gshare_fn_connect(void) {
  return Guarded(-1, [] {
    Library& library = TheLibrary();
    MutexLock lock(library.mutex);
    if (library.runtime != nullptr) return 0;
    auto runtime = FunctionRuntime::ConnectFromEnvironment();
    if (!runtime.ok()) {
      last_error = runtime.status().ToString();
      return -1;
    }
    library.runtime = std::move(runtime).value();
    last_error.clear();
    return 0;
  });
}

const char* gshare_fn_last_error(void) { return last_error.c_str(); }

void* gshare_fn_allocate(uint64_t bytes, const char* what) {
  return Guarded(static_cast<void*>(nullptr), [&]() -> void* {
    FunctionRuntime* runtime = Runtime();
    if (runtime == nullptr) return nullptr;
    auto allocation = runtime->Allocate(bytes, what == nullptr ? "device memory" : what);
    if (!allocation.ok()) {
      last_error = allocation.status().ToString();
      return nullptr;
    }
    void* data = allocation->data();
    Library& library = TheLibrary();
    MutexLock lock(library.mutex);
    library.allocations.push_back(std::move(allocation).value());
    return data;
  });
}

int gshare_fn_freeze(void) {
  return Guarded(-1, [] {
    FunctionRuntime* runtime = Runtime();
    if (runtime == nullptr) return -1;
    const gshare::Status frozen = runtime->memory().Freeze();
    if (!frozen.ok()) {
      last_error = frozen.ToString();
      return -1;
    }
    return 0;
  });
}

int gshare_fn_launch(void (*kernel)(void* context), void* context) {
  return Guarded(-1, [&] {
    FunctionRuntime* runtime = Runtime();
    if (runtime == nullptr) return -1;
    const gshare::Status ran = runtime->Launch([kernel, context] { kernel(context); });
    if (!ran.ok()) {
      last_error = ran.ToString();
      return -1;
    }
    return 0;
  });
}

void gshare_fn_end_work(void) {
  Guarded(0, [] {
    if (FunctionRuntime* runtime = Runtime()) runtime->EndWork();
    return 0;
  });
}

uint64_t gshare_fn_quota_bytes(void) {
  return Guarded(uint64_t{0}, [] {
    FunctionRuntime* runtime = Runtime();
    return runtime == nullptr ? uint64_t{0} : runtime->memory().quota_bytes();
  });
}

}  // extern "C"
