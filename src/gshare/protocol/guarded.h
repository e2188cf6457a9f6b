// Guarded(f): runs f and turns an exception escaping it into a Status (bad_alloc ->
// ResourceExhausted, anything else -> Internal), so that no parse or write of an inference
// message throws past the codec. Internal to the protocol library.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "gshare/common/status.h"

namespace gshare::kserve {

template <typename F>
auto Guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory handling an inference message");
  } catch (const std::exception& e) {
    return Internal(std::string("inference message: ") + e.what());
  }
}

}  // namespace gshare::kserve
