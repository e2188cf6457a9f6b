// LiveNodeHarness: the live node as a world of the executor contract (sched/testing/
// executor_contract.h): a LiveNode of two emulated GPUs, on a ManualLoopClock, with its instances
// hosted in the test's process (InProcessHost). Time moves only when the node waits for it
// (ManualLoopClock::RunUntil): a restore's copy takes its bytes over the link in the node's time,
// a run its profiled latency, a timer fires when it comes due, and no test waits on wall time for
// a scheduling decision. The GPU type the node describes has no fixed restore cost: an emulated
// link has none in the node's time.
//
// Threading: the test's thread runs the node's loop (Run, RunUntil).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gshare/node/live_node.h"
#include "gshare/node/loop_clock.h"
#include "gshare/node/testing/in_process_host.h"
#include "gshare/sched/testing/executor_contract.h"

namespace gshare::testing {

class LiveNodeHarness final : public ExecutorHarness {
 public:
  ~LiveNodeHarness() override { Teardown(); }

  // A fresh node for `gpu` with `functions` (ids 0..n-1) and `requests` to arrive.
  void Build(const GpuType& gpu, std::vector<ResolvedFunction> functions,
             std::vector<Request> requests) override;
  Executor& executor() override { return node_->executor(); }
  // Submits the requests at their arrival times and runs the node until every one is in and
  // nothing is in flight (LiveExecutor::Busy). Errors: a contract violation (Internal), requests
  // left unanswered (Internal), a node that does not settle within two minutes of wall time.
  Status Run(Scheduler& scheduler) override;
  // Runs the node's loop until `done()` (ManualLoopClock::RunUntil).
  Status RunUntil(const std::function<bool()>& done);

  // Applied by the next Build: the node's options (its executor's among them), and its parts
  // (a switch factory, a checkpoint API; the clock and host are the harness's).
  std::function<void(LiveNodeOptions&)> configure;
  std::function<void(LiveNodeParts&)> configure_parts;
  SliceGranularity granularity;  // of the next Build's vGPU manager

  LiveNode& node() { return *node_; }
  LiveExecutor& live() { return node_->executor(); }
  VGpuManager& vgpus() { return node_->resources().vgpus; }
  const FunctionRegistry& functions() const { return node_->functions(); }
  InProcessHost& host() { return *host_; }
  ManualLoopClock& clock() { return *clock_; }
  boost::asio::io_context& loop() { return node_->loop(); }
  // A meter of the whole run, fed by the executor from the node's start.
  const Meter& meter() const { return *meter_; }

  // Shuts the node's executor down and lets everything in flight end (time moves on so that no
  // instance or copy sleeps on the clock); the node's state stays for inspection.
  void Drain();

 private:
  void Teardown();

  std::unique_ptr<LiveNode> node_;
  ManualLoopClock* clock_ = nullptr;
  InProcessHost* host_ = nullptr;
  std::unique_ptr<Meter> meter_;
  std::vector<Request> requests_;
  bool drained_ = false;
};

}  // namespace gshare::testing
