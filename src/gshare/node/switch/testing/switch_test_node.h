// SwitchTestNode: the parts of a node that switch drivers use, for tests: two emulated GPUs of
// 256 MiB (unpaced), a snapshot store of 64 MiB in 1 MiB chunks, a restore engine with two streams
// per GPU, one copy thread, and an event loop that runs on a thread of its own.
//
// Call Start() from the test's SetUp (its failures are the test's). Stop(), which the destructor
// calls too, waits for the restore engine's transfers, lets the loop run out and joins it and the
// copy thread: close every switch on the loop
// first, and free the buffers switches used only after it.
//
// Threading: OnLoop and Operate from the test's thread; everything else before Start or after
// Stop, or on the loop.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "gshare/common/clock.h"
#include "gshare/common/status.h"
#include "gshare/device/emulated/emulated_device.h"
#include "gshare/device/emulated/emulated_host_memory.h"
#include "gshare/node/restore_engine.h"
#include "gshare/node/snapshot_store.h"
#include "gshare/node/switch/channel_switch.h"

namespace gshare::switch_testing {

class SwitchTestNode {
 public:
  static constexpr int kGpus = 2;

  SwitchTestNode() = default;
  ~SwitchTestNode() { Stop(); }
  SwitchTestNode(const SwitchTestNode&) = delete;
  SwitchTestNode& operator=(const SwitchTestNode&) = delete;

  void Start() {
    for (int i = 0; i < kGpus; ++i) {
      auto device = EmulatedDevice::Create(i, {.name = "",
                                               .memory_bytes = 256ULL << 20,
                                               .link_bytes_per_second = 0,
                                               .prepared_bytes = 0});
      ASSERT_TRUE(device.ok()) << device.status().ToString();
      devices_.push_back(std::move(device).value());
      device_pointers_.push_back(devices_.back().get());
    }
    auto store =
        SnapshotStore::Create(host_memory_, {.pool_bytes = 64ULL << 20, .chunk_bytes = 1ULL << 20});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    auto engine = RestoreEngine::Create(device_pointers_, {.streams_per_device = 2}, clock_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine).value();
    loop_thread_ = std::thread([this] { loop_.run(); });
  }

  // Lets the loop run out and joins it and the copy thread. Idempotent.
  void Stop() {
    // Transfers in flight end first: their ends post to the loop, which must still run.
    if (engine_) engine_->WaitForTransfers();
    work_.reset();
    if (loop_thread_.joinable()) loop_thread_.join();
    copies_.join();
  }

  // Runs `f` on the event loop and returns its result; on this thread when the loop does not run
  // (Start failed or Stop was called), so that a test's TearDown never waits for it.
  template <typename F>
  auto OnLoop(F f) {
    if (!loop_thread_.joinable()) return f();
    std::promise<decltype(f())> promise;
    boost::asio::post(loop_, [&] { promise.set_value(f()); });
    return promise.get_future().get();
  }

  // Runs an operation that completes through a Done callback, and waits for it.
  template <typename Begin>
  Status Operate(Begin begin) {
    if (!loop_thread_.joinable()) return Internal("the test node's loop does not run");
    std::promise<Status> promise;
    boost::asio::post(loop_, [&] { begin([&](Status status) { promise.set_value(status); }); });
    return promise.get_future().get();
  }

  SwitchContext context() { return {loop_, copies_, *engine_, *store_, clock_}; }
  boost::asio::io_context& loop() { return loop_; }
  EmulatedDevice& device(int gpu) { return *devices_[gpu]; }
  SnapshotStore& store() { return *store_; }

 private:
  SteadyClock clock_;
  EmulatedHostMemory host_memory_;
  std::vector<std::unique_ptr<EmulatedDevice>> devices_;
  std::vector<Device*> device_pointers_;
  std::unique_ptr<SnapshotStore> store_;
  std::unique_ptr<RestoreEngine> engine_;
  boost::asio::io_context loop_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
      loop_.get_executor()};
  boost::asio::thread_pool copies_{1};
  std::thread loop_thread_;
};

}  // namespace gshare::switch_testing
