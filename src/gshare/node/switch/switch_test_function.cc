// A function process for the switching tests: it links the function library, keeps "weights" in
// its device memory, and answers one command per line on standard input:
//   sum              the FNV-1a hash of its weights, computed on the GPU, and their address
//   alloc BYTES      allocates (and frees) device memory: "alloc ok" or "alloc error <why>"
//   spin MS KERNEL_US  runs kernels of KERNEL_US each until MS of kernel time: prints the grants
//                    received and every kernel's [start, end] on the system's monotonic clock
//   hang             starts a kernel that never ends
//   peek PID FD      tries to open /proc/PID/fd/FD, /proc/PID/mem and /proc/PID/map_files: prints
//                    the three errno names
//   poke OFFSET      adds 1 to the weights' byte at OFFSET (not frozen only): "poke ok"
//   quit
// Started with [--weights BYTES] (default 4 MiB) [--no-freeze] (the weights stay writable, and
// every checkpoint is told the image was written, as the CUDA allocator shim tells it). Prints
// "ready <address>" once initialized.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gshare/fn/runtime.h"

namespace {

std::uint64_t MonotonicNanoseconds() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1000000000ULL +
         static_cast<std::uint64_t>(now.tv_nsec);
}

std::string OpenErrno(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return "OPENED";
  }
  return errno == EACCES ? "EACCES" : errno == EPERM ? "EPERM" : std::to_string(errno);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t weight_bytes = 4 << 20;
  bool freeze = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--weights" && i + 1 < argc) {
      weight_bytes = std::stoull(argv[++i]);
    } else if (arg == "--no-freeze") {
      freeze = false;
    } else {
      std::fprintf(stderr, "switch_test_function: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }

  auto connected = gshare::fn::FunctionRuntime::ConnectFromEnvironment();
  if (!connected.ok()) {
    std::fprintf(stderr, "switch_test_function: %s\n", connected.status().ToString().c_str());
    return 2;
  }
  gshare::fn::FunctionRuntime& runtime = **connected;
  auto weights = runtime.Allocate(weight_bytes, "weights");
  if (!weights.ok()) {
    std::fprintf(stderr, "switch_test_function: %s\n", weights.status().ToString().c_str());
    return 2;
  }
  const gshare::Status loaded = runtime.Launch([&] {
    auto* words = weights->as<std::uint64_t>();
    for (std::uint64_t i = 0; i < weight_bytes / 8; ++i) words[i] = i * 0x9E3779B97F4A7C15ULL;
  });
  runtime.EndWork();
  if (!loaded.ok() || (freeze && !runtime.memory().Freeze().ok())) return 2;
  std::cout << "ready " << static_cast<void*>(weights->data()) << std::endl;

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream command(line);
    std::string verb;
    command >> verb;
    if (verb == "sum") {
      std::uint64_t hash = 1469598103934665603ULL;
      const gshare::Status ran = runtime.Launch([&] {
        const auto* bytes = reinterpret_cast<const unsigned char*>(weights->data());
        for (std::uint64_t i = 0; i < weight_bytes; ++i)
          hash = (hash ^ bytes[i]) * 1099511628211ULL;
      });
      runtime.EndWork();
      std::cout << "sum " << (ran.ok() ? std::to_string(hash) : ran.ToString()) << " "
                << static_cast<void*>(weights->data()) << std::endl;
    } else if (verb == "alloc") {
      std::uint64_t bytes = 0;
      command >> bytes;
      auto allocation = runtime.Allocate(bytes, "a request's workspace");
      std::cout << (allocation.ok() ? "alloc ok" : "alloc error " + allocation.status().ToString())
                << std::endl;
    } else if (verb == "spin") {
      std::uint64_t total_ms = 0, kernel_us = 0;
      command >> total_ms >> kernel_us;
      const std::uint64_t grants_before = runtime.grants();
      std::vector<std::pair<std::uint64_t, std::uint64_t>> kernels;
      std::uint64_t ran_ns = 0;
      while (ran_ns < total_ms * 1000000ULL) {
        std::uint64_t start = 0, end = 0;
        const gshare::Status ran = runtime.Launch([&] {
          start = MonotonicNanoseconds();
          while (MonotonicNanoseconds() - start < kernel_us * 1000ULL) {
          }
          end = MonotonicNanoseconds();
        });
        if (!ran.ok()) break;
        kernels.emplace_back(start, end);
        ran_ns += end - start;
      }
      runtime.EndWork();
      std::cout << "spin " << runtime.grants() - grants_before;
      for (const auto& [start, end] : kernels) std::cout << " " << start << " " << end;
      std::cout << std::endl;
    } else if (verb == "hang") {
      (void)runtime.Launch([] {
        std::cout << "hanging" << std::endl;  // from inside the kernel: the GPU is held
        for (;;) ::pause();
      });
    } else if (verb == "peek") {
      std::string pid, fd;
      command >> pid >> fd;
      std::cout << "peek " << OpenErrno("/proc/" + pid + "/fd/" + fd) << " "
                << OpenErrno("/proc/" + pid + "/mem") << " "
                << OpenErrno("/proc/" + pid + "/map_files") << std::endl;
    } else if (verb == "poke") {
      std::uint64_t offset = 0;
      command >> offset;
      const gshare::Status ran = runtime.Launch(
          [&] { reinterpret_cast<unsigned char*>(weights->data())[offset % weight_bytes] += 1; });
      runtime.EndWork();
      std::cout << (ran.ok() ? std::string("poke ok") : "poke " + ran.ToString()) << std::endl;
    } else if (verb == "quit") {
      return 0;
    } else {
      std::cout << "unknown " << verb << std::endl;
    }
  }
  return 0;
}
