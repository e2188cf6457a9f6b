// libgshare-cuda-shim.so on any machine: what it exports and what it needs, and its behaviour in
// a program that is not a CUDA program (cuda_shim_probe): passive without GSHARE_CONTROL_FD,
// active with it, dlsym handing out its hooks for a driver the program opened, RTLD_NEXT still
// resolved from dlsym's caller, and the runtime's functions found in a libcudart the program
// opened with RTLD_LOCAL (a stand-in, testing/fake_cudart.cc).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
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

// The stand-in runtime's answers (testing/fake_cudart.cc).
constexpr const char* kFakeMallocResult = "77";

// The probe's output, with `runtime` (when not empty) opened with RTLD_LOCAL before its calls.
std::string Probe(const std::string& environment, const std::string& runtime = "") {
  return RunCommand("env -u GSHARE_CONTROL_FD -u GSHARE_SHIM_VERBOSE " + environment +
                    " LD_PRELOAD=" CUDA_SHIM_LIBRARY " " CUDA_SHIM_PROBE " " CUDA_SHIM_LIBRARY
                    " " CUDA_DRIVER_LIBRARY " " +
                    runtime + " 2>&1");
}

// A control channel whose node end is closed: the slice cannot be served (no driver here, or no
// node to say hello to on a GPU machine), and every allocation fails as out of memory.
class ClosedChannel {
 public:
  ClosedChannel() {
    int channel[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, channel) == 0) {
      ::close(channel[0]);
      fd_ = channel[1];
    }
  }
  ~ClosedChannel() {
    if (fd_ >= 0) ::close(fd_);
  }
  ClosedChannel(const ClosedChannel&) = delete;
  ClosedChannel& operator=(const ClosedChannel&) = delete;

  bool ok() const { return fd_ >= 0; }
  // The switching environment naming it.
  std::string Environment() const {
    return "GSHARE_CONTROL_FD=" + std::to_string(fd_) +
           " GSHARE_DEVICE_BASE=0x7e0000000000 GSHARE_DEVICE_RESERVE=1073741824";
  }

 private:
  int fd_ = -1;
};

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

// The C++ runtime is linked in (a Python whose libstdc++ is older than the compiler's still loads
// the library), hidden by the exports map; libgcc's unwinder is the system's libgcc_s, whose
// static copy would need a newer C library (_dl_find_object, GLIBC_2.35).
TEST(CudaShimLibraryTest, NeedsOnlyTheCRuntimeAndLibgcc) {
  const std::set<std::string> allowed = {"libc.so.6", "libm.so.6", "libgcc_s.so.1",
                                         "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"};
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
  // Nor indirectly.
  const std::string loaded = RunCommand("ldd " CUDA_SHIM_LIBRARY " 2>&1");
  EXPECT_NE(loaded.find("libc.so.6"), std::string::npos) << loaded;
  EXPECT_EQ(loaded.find("libstdc++"), std::string::npos) << loaded;
}

// It loads into programs on older systems than the one it was built on: no symbol of the C library
// newer than GLIBC_2.34 (Ubuntu 22.04 has 2.35, RHEL 9 2.34), whichever glibc built it. The static
// C++ runtime's std::random_device would need arc4random (2.36): unused code is dropped.
TEST(CudaShimLibraryTest, NeedsNoCLibraryNewerThan234) {
  std::istringstream lines(RunCommand("objdump -T " CUDA_SHIM_LIBRARY));
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("GLIBC_2.");
    if (at == std::string::npos) continue;
    std::size_t end = at + 8;
    while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
    const int minor = std::stoi(line.substr(at + 8, end - at - 8));
    EXPECT_LE(minor, 34) << line;
    ++checked;
  }
  EXPECT_GT(checked, 0);
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
  EXPECT_EQ(keys.at("cudaFree_null_result"), "3") << output;
  EXPECT_NE(output.find(
                "gshare-cuda-shim: no CUDA runtime function to forward cudaMalloc to: none after"),
            std::string::npos)
      << output;
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
  const ClosedChannel channel;
  ASSERT_TRUE(channel.ok());
  const std::string output = Probe(channel.Environment());
  const auto keys = Keys(output);
  // Inherited by the probe, and left as it came until the shim connects.
  EXPECT_EQ(keys.at("control_fd_cloexec"), "no") << output;
  EXPECT_EQ(keys.at("rtld_next_finds_shim"), "yes") << output;
  if (keys.at("driver_opened") == "yes") {
    EXPECT_EQ(keys.at("cuMemAlloc_v2"), "shim") << output;
    EXPECT_EQ(keys.at("cuGetProcAddress_v2"), "shim") << output;
    EXPECT_EQ(keys.at("cuInit"), "driver") << output;  // not hooked
  }
  EXPECT_EQ(keys.at("cuMemAlloc_v2_result"), "2") << output;  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(keys.at("cudaMalloc_result"), "2") << output;     // cudaErrorMemoryAllocation
  EXPECT_EQ(keys.at("cudaFree_null_result"), "3") << output;  // forwarded: no runtime here
  const std::string refused = "gshare-cuda-shim: cannot serve the slice, every allocation fails";
  const auto first = output.find(refused);
  EXPECT_NE(first, std::string::npos) << output;
  EXPECT_EQ(output.find(refused, first + 1), std::string::npos) << output;
}

// A launcher that execs the function (an env shebang, a shell's exec) runs with the shim preloaded
// too: loading it there must not keep the channel from the function.
TEST(CudaShimLibraryTest, AnExecWrapperPassesTheChannelOn) {
  const ClosedChannel channel;
  ASSERT_TRUE(channel.ok());
  const std::string output =
      RunCommand("env -u GSHARE_CONTROL_FD -u GSHARE_SHIM_VERBOSE " + channel.Environment() +
                 " LD_PRELOAD=" CUDA_SHIM_LIBRARY " /bin/sh -c 'exec " CUDA_SHIM_PROBE
                 " " CUDA_SHIM_LIBRARY " " CUDA_DRIVER_LIBRARY "' 2>&1");
  const auto keys = Keys(output);
  EXPECT_EQ(keys.at("control_fd_cloexec"), "no") << output;
  EXPECT_EQ(keys.at("cudaMalloc_result"), "2") << output;  // active: the slice, which fails here
  EXPECT_EQ(output.find("passive"), std::string::npos) << output;
}

TEST(CudaShimLibraryTest, RefusesPyTorchsExpandableSegmentsClearly) {
  const ClosedChannel channel;
  ASSERT_TRUE(channel.ok());
  for (const std::string variable : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
    const std::string output = Probe(channel.Environment() + " " + variable +
                                     "=max_split_size_mb:64,expandable_segments:True");
    const auto keys = Keys(output);
    EXPECT_EQ(keys.at("cudaMalloc_result"), "2") << output;  // cudaErrorMemoryAllocation
    EXPECT_NE(output.find("cannot serve the slice, every allocation fails: FailedPrecondition: " +
                          variable +
                          "=max_split_size_mb:64,expandable_segments:True turns on "
                          "PyTorch's expandable segments"),
              std::string::npos)
        << output;
  }
  // Turned off, it is no reason to refuse (the connection fails here for want of a driver or a
  // node instead).
  const std::string off =
      Probe(channel.Environment() + " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False");
  EXPECT_EQ(off.find("expandable segments"), std::string::npos) << off;
}

TEST(CudaShimLibraryTest, AVariableWithoutAChannelBehindItIsPassive) {
  // What a program the function starts inherits: the variable, not the channel.
  const std::string output = Probe("GSHARE_CONTROL_FD=1000");
  const auto keys = Keys(output);
  EXPECT_EQ(keys.at("control_fd_cloexec"), "none") << output;
  if (keys.at("driver_opened") == "yes") {
    EXPECT_EQ(keys.at("cuMemAlloc_v2"), "driver") << output;
  }
  EXPECT_EQ(keys.at("cudaMalloc_result"), "3") << output;  // forwarded: no runtime here
  EXPECT_NE(output.find("gshare-cuda-shim: GSHARE_CONTROL_FD=1000 is not a control channel"),
            std::string::npos)
      << output;
}

// A runtime that a library opened with RTLD_LOCAL (as a Python extension may open libcudart) is
// not in the global scope, where RTLD_NEXT looks: the shim finds the loaded libcudart instead,
// by its soname (libcudart.so.13, .12) or else by its file name, and says where, once.
void ExpectTheRuntimeFoundOutsideTheGlobalScope(const std::string& runtime) {
  const std::string output = Probe("GSHARE_SHIM_VERBOSE=1", runtime);
  const auto keys = Keys(output);
  EXPECT_EQ(keys.at("runtime_opened"), "yes") << output;
  EXPECT_EQ(keys.at("cudaMalloc_result"), kFakeMallocResult) << output;
  EXPECT_EQ(keys.at("cudaFree_null_result"), "0") << output;
  const std::string said =
      "gshare-cuda-shim: the CUDA runtime's functions (cudaMalloc first) come from " + runtime +
      " (a libcudart loaded outside the global scope)";
  const auto first = output.find(said);
  EXPECT_NE(first, std::string::npos) << output;
  EXPECT_EQ(output.find("come from", first + said.size()), std::string::npos) << output;
  EXPECT_EQ(output.find("no CUDA runtime"), std::string::npos) << output;
}

TEST(CudaShimLibraryTest, PassiveForwardsToARuntimeOpenedLocallyFoundBySoname) {
  ExpectTheRuntimeFoundOutsideTheGlobalScope(FAKE_RUNTIME_BY_SONAME);
}

TEST(CudaShimLibraryTest, PassiveForwardsToARuntimeOpenedLocallyFoundByFileName) {
  ExpectTheRuntimeFoundOutsideTheGlobalScope(FAKE_RUNTIME_BY_FILE_NAME);
}

TEST(CudaShimLibraryTest, ActiveForwardsFreesOfNoSliceMemoryToARuntimeOpenedLocally) {
  const ClosedChannel channel;
  ASSERT_TRUE(channel.ok());
  const std::string output = Probe(channel.Environment(), FAKE_RUNTIME_BY_SONAME);
  const auto keys = Keys(output);
  EXPECT_EQ(keys.at("cudaMalloc_result"), "2") << output;     // the slice's, which it cannot serve
  EXPECT_EQ(keys.at("cudaFree_null_result"), "0") << output;  // the runtime's
  EXPECT_EQ(output.find("come from"), std::string::npos) << output;  // not verbose
}

}  // namespace
