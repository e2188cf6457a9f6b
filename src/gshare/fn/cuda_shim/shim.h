// The CUDA allocator shim's process-wide state, shared by its hooks (driver_hooks.cc,
// runtime_hooks.cc, dlsym_hook.cc).
//
// Nothing happens when the library is loaded (so a launcher that execs the function, an env
// shebang or a shell's exec, passes the channel on to it). On the first hooked call the shim
// decides its mode
// from the environment: with GSHARE_CONTROL_FD naming a control channel it is active and serves
// the instance's slice; without the variable it is passive: every hook forwards to the real
// function, and with GSHARE_SHIM_VERBOSE set it says so once on standard error. A variable with
// no channel behind it (what a program the function starts inherits: the shim marks the channel
// close-on-exec when it connects) is passive too, said once. The slice is connected on the first
// call that needs it (an allocation, a memory query): the driver is loaded, initialized, device 0's
// primary context retained, the address range reserved (GSHARE_DEVICE_BASE, GSHARE_DEVICE_RESERVE),
// hello said, and the node's first map awaited. A connection that fails before the node is reached
// closes the channel (the node hears of it), is said once on standard error, and every allocation
// fails from then on. Once connected, a node that closes the channel ends the process
// (_exit(70), as the function library does: a function without its node has nothing to do), and
// so does a node that goes away while the first map is awaited.
//
// The state lives for the whole process and is never destroyed (a control thread serves the node
// until the process ends). Every function here may be called from any thread.
#pragma once

#include <cuda.h>

#include <string_view>

#include "gshare/fn/cuda_shim/cuda_driver.h"
#include "gshare/fn/cuda_shim/shim_core.h"

// Marks a hook the library exports (everything else is hidden; exports.map lists them).
#define GSHARE_SHIM_EXPORT __attribute__((visibility("default")))

namespace gshare::fn::cuda_shim {

// The dlsym of the C library (the shim interposes dlsym itself).
using DlsymFunction = void* (*)(void* handle, const char* name) noexcept;
DlsymFunction RealDlsym();

// Whether the shim serves a slice (GSHARE_CONTROL_FD is set).
bool Active();
// libcuda's entry points; nullptr when the driver cannot be loaded.
const CudaDriver* Driver();
// The slice, connected on the first call; nullptr when the shim is passive or the connection
// failed.
ShimCore* Slice();
// The slice if it is connected already, without connecting (memory the shim handed out exists
// only once it is).
ShimCore* ConnectedSlice();

// Waits for the device's work (the primary context), before memory goes back to the slice.
void SynchronizeDevice();
// Waits for `stream`'s work: with the caller's context when it has one (a special stream
// handle means the current context's), else the primary context.
CUresult SynchronizeStream(CUstream stream);
// Whether `stream` is capturing a graph (whose allocations the shim leaves to the driver).
bool IsCapturing(CUstream stream);

// Whether GSHARE_SHIM_VERBOSE asks for the shim's informational lines (set, not empty, not "0").
bool Verbose();
// One line on standard error, prefixed "gshare-cuda-shim: ".
void LogLine(std::string_view line);

}  // namespace gshare::fn::cuda_shim
