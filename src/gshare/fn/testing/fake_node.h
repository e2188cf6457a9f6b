// FakeNode: the node's side of the control channel for tests of code that links the function
// library in-process. It maps one memfd segment of `segment_bytes` with `quota_bytes` when the
// function says hello, and grants the compute engine whenever asked. Header-only.
//
// Usage: FakeNode node(16 << 20); auto runtime = FunctionRuntime::Connect(node.TakeFunctionEnd(),
// FakeNode::FreeBase(), FakeNode::kReserve, {.exit_when_node_gone = false});
#pragma once

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "gshare/fn/control_channel.h"

namespace gshare::fn::testing {

class FakeNode {
 public:
  static constexpr std::uint64_t kReserve = 1ULL << 30;

  explicit FakeNode(std::uint64_t segment_bytes, std::uint64_t quota_bytes = 0) {
    auto pair = ControlChannel::CreatePair();
    node_ = std::move(pair->first);
    function_end_ = std::move(pair->second);
    segment_.Reset(::memfd_create("fake-gpu", MFD_CLOEXEC));
    if (::ftruncate(segment_.get(), static_cast<off_t>(segment_bytes)) != 0) return;
    thread_ = std::thread([this, segment_bytes, quota_bytes] {
      for (;;) {
        auto received = node_.Receive();
        if (!received.ok()) return;
        switch (received->message.type) {
          case ControlType::kHello:
            (void)node_.Send({.type = ControlType::kMap,
                              .a = segment_bytes,
                              .b = quota_bytes == 0 ? segment_bytes : quota_bytes,
                              .c = 1},
                             segment_.get());
            break;
          case ControlType::kComputeAcquire:
            (void)node_.Send(
                {.type = ControlType::kComputeGrant,
                 .a = static_cast<std::uint64_t>(
                     std::chrono::nanoseconds(std::chrono::milliseconds(20)).count())});
            break;
          case ControlType::kQuotaExceeded:
            ++quota_exceeded;
            break;
          default:
            break;
        }
      }
    });
  }
  ~FakeNode() {
    ::shutdown(node_.fd(), SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
  }

  UniqueFd TakeFunctionEnd() { return std::move(function_end_); }

  // A free, page-aligned range of kReserve bytes in this process.
  static std::uintptr_t FreeBase() {
    void* probe = ::mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ::munmap(probe, kReserve);
    return reinterpret_cast<std::uintptr_t>(probe);
  }

  int quota_exceeded = 0;  // read after the runtime is gone

 private:
  ControlChannel node_;
  UniqueFd function_end_;
  UniqueFd segment_;
  std::thread thread_;
};

}  // namespace gshare::fn::testing
