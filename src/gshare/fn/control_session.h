// The function side of a control channel (control_channel.h), shared by the function library
// (runtime.h) and the CUDA allocator shim (cuda_shim/shim_core.h): what the node's environment
// says, how the process is sealed before device memory is mapped, and the loop that serves the
// node's messages.
//
// Thread safety: ReadNodeNumber and SealFunctionProcess from any thread; ServeControl on the one
// thread that receives from the channel.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "gshare/common/status.h"
#include "gshare/fn/control_channel.h"

namespace gshare::fn {

// The number in the environment variable `name` (which the node sets: kControlFdEnv,
// kDeviceBaseEnv, kDeviceReserveEnv), in `base` (16 takes an optional "0x"). InvalidArgument when
// it is unset (saying that a gshare node starts this program) or not a number.
Result<std::uint64_t> ReadNodeNumber(const char* name, int base);

// Before any device memory is mapped: makes the process non-dumpable (no process of the same uid
// reads its memory or descriptors through /proc: the kernel makes /proc/<pid>/{mem,fd,map_files}
// root's), and marks the channel close-on-exec (inherited once, by this program: nothing it
// starts in turn gets it).
Status SealFunctionProcess(int control_fd);

// The pid the node knows this process by, for the hello. In a PID namespace of its own getpid()
// says 1, while /proc/self names the process in the namespace /proc was mounted in: the node's.
std::uint64_t PidAsTheNodeSeesIt();

// Receives the node's messages until the channel fails, handing each to `handle`. A datagram that
// cannot be read (InvalidArgument) is logged ("ignored: ...") and skipped; a message `handle`
// fails is logged, and a failure with kUnavailable ends the loop as a broken channel does.
// Returns why it ended (never Ok).
Status ServeControl(const ControlChannel& channel,
                    const std::function<Status(ReceivedMessage)>& handle,
                    const std::function<void(std::string_view)>& log);

}  // namespace gshare::fn
