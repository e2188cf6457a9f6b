// libgshare-cuda-shim.so on any machine: what it exports and what it needs, and its behaviour in
// a program that is not a CUDA program (cuda_shim_probe): passive without GSHARE_CONTROL_FD,
// active with it, dlsym handing out its hooks for a driver the program opened, and RTLD_NEXT
// still resolved from dlsym's caller.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace {

// Runs `command` through the shell; returns its standard output (and error, when redirected).
std::string RunCommand(const std::string& command) {
  std::string output;
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[4096];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) {
    output.append(buffer, got);
  }
  ::pclose(pipe);
  return output;
}

// The probe's "key value" lines.
std::map<std::string, std::string> Keys(const std::string& output) {
  std::map<std::string, std::string> keys;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const auto space = line.find(' ');
    if (space != std::string::npos) keys[line.substr(0, space)] = line.substr(space + 1);
  }
  return keys;
}

std::string Probe(const std::string& environment) {
  return RunCommand("env -u GSHARE_CONTROL_FD -u GSHARE_SHIM_VERBOSE " + environment +
                    " LD_PRELOAD=" CUDA_SHIM_LIBRARY " " CUDA_SHIM_PROBE " " CUDA_SHIM_LIBRARY
                    " " CUDA_DRIVER_LIBRARY " 2>&1");
}

TEST(CudaShimLibraryTest, ExportsItsHooksOnly) {
  std::set<std::string> exported;
  std::istringstream lines(RunCommand("nm -D --defined-only " CUDA_SHIM_LIBRARY));
  for (std::string line; std::getline(lines, line);) {
    exported.insert(line.substr(line.rfind(' ') + 1));
  }
  const std::set<std::string> hooks = {"cudaMalloc",
                                       "cudaFree",
                                       "cudaMallocAsync",
                                       "cudaMallocAsync_ptsz",
                                       "cudaFreeAsync",
                                       "cudaFreeAsync_ptsz",
                                       "cudaMallocPitch",
                                       "cudaMemGetInfo",
                                       "cuMemAlloc_v2",
                                       "cuMemFree_v2",
                                       "cuMemAllocAsync",
                                       "cuMemAllocAsync_ptsz",
                                       "cuMemFreeAsync",
                                       "cuMemFreeAsync_ptsz",
                                       "cuMemAllocPitch_v2",
                                       "cuMemGetInfo_v2",
                                       "cuGetProcAddress",
                                       "cuGetProcAddress_v2",
                                       "dlsym"};
  EXPECT_EQ(exported, hooks);
}

TEST(CudaShimLibraryTest, NeedsOnlyTheCAndCxxRuntimes) {
  const std::set<std::string> allowed = {"libc.so.6",
                                         "libm.so.6",
                                         "libstdc++.so.6",
                                         "libgcc_s.so.1",
                                         "ld-linux-x86-64.so.2",
                                         "ld-linux-aarch64.so.1"};
  std::istringstream lines(RunCommand("readelf -dW " CUDA_SHIM_LIBRARY));
  int needed = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    const auto open = line.find('[');
    const auto close = line.find(']');
    ASSERT_NE(open, std::string::npos) << line;
    const std::string library = line.substr(open + 1, close - open - 1);
    EXPECT_TRUE(allowed.contains(library)) << library;
    ++needed;
  }
  EXPECT_GT(needed, 0);
}

TEST(CudaShimLibraryTest, PassiveWithoutAControlChannelForwardsEverything) {
  const std::string output = Probe("GSHARE_SHIM_VERBOSE=1");
  const auto keys = Keys(output);
  EXPECT_EQ(keys.at("shim_preloaded"), "yes") << output;
  EXPECT_EQ(keys.at("rtld_next_finds_shim"), "yes") << output;
  if (keys.at("driver_opened") == "yes") {
    // The driver's own entry points: the shim hands out nothing.
    EXPECT_EQ(keys.at("cuMemAlloc_v2"), "driver") << output;
    EXPECT_EQ(keys.at("cuGetProcAddress_v2"), "driver") << output;
  }
  // Forwarded: to the driver (CUDA_ERROR_NOT_INITIALIZED without one, or the stub's answer) and
  // to the next cudaMalloc (none here: cudaErrorInitializationError), never the slice.
  EXPECT_NE(keys.at("cuMemAlloc_v2_result"), "0") << output;
  EXPECT_EQ(keys.at("cudaMalloc_result"), "3") << output;
  // Said once.
  const std::string passive = "gshare-cuda-shim: GSHARE_CONTROL_FD is not set: passive";
  const auto first = output.find(passive);
  EXPECT_NE(first, std::string::npos) << output;
  EXPECT_EQ(output.find(passive, first + 1), std::string::npos) << output;
}

TEST(CudaShimLibraryTest, QuietWhenPassiveAndNotVerbose) {
  const std::string output = Probe("");
  EXPECT_EQ(output.find("gshare-cuda-shim:"), std::string::npos) << output;
}

TEST(CudaShimLibraryTest, ActiveHandsOutItsHooksAndFailsAllocationsItCannotServe) {
  // A control channel whose node end is closed: the slice cannot be served (no driver here, or
  // no node to say hello to on a GPU machine), and every allocation fails as out of memory.
  int channel[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, channel), 0);
  ::close(channel[0]);
  const std::string output =
      Probe("GSHARE_CONTROL_FD=" + std::to_string(channel[1]) +
            " GSHARE_DEVICE_BASE=0x7e0000000000 GSHARE_DEVICE_RESERVE=1073741824");
  ::close(channel[1]);
  const auto keys = Keys(output);
  EXPECT_EQ(keys.at("rtld_next_finds_shim"), "yes") << output;
  if (keys.at("driver_opened") == "yes") {
    EXPECT_EQ(keys.at("cuMemAlloc_v2"), "shim") << output;
    EXPECT_EQ(keys.at("cuGetProcAddress_v2"), "shim") << output;
    EXPECT_EQ(keys.at("cuInit"), "driver") << output;  // not hooked
  }
  EXPECT_EQ(keys.at("cuMemAlloc_v2_result"), "2") << output;  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(keys.at("cudaMalloc_result"), "2") << output;     // cudaErrorMemoryAllocation
  const std::string refused = "gshare-cuda-shim: cannot serve the slice, every allocation fails";
  const auto first = output.find(refused);
  EXPECT_NE(first, std::string::npos) << output;
  EXPECT_EQ(output.find(refused, first + 1), std::string::npos) << output;
}

TEST(CudaShimLibraryTest, AVariableWithoutAChannelBehindItIsPassive) {
  // What a program the function starts inherits: the variable, not the channel.
  const std::string output = Probe("GSHARE_CONTROL_FD=1000");
  const auto keys = Keys(output);
  if (keys.at("driver_opened") == "yes") {
    EXPECT_EQ(keys.at("cuMemAlloc_v2"), "driver") << output;
  }
  EXPECT_EQ(keys.at("cudaMalloc_result"), "3") << output;  // forwarded: no runtime here
  EXPECT_NE(output.find("gshare-cuda-shim: GSHARE_CONTROL_FD=1000 is not a control channel"),
            std::string::npos)
      << output;
}

}  // namespace
