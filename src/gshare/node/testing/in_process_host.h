// InProcessHost: function instances as threads of the test's own process, behind the live node
// (an InstanceHost, for LiveNodeParts::host). Each instance links the function library exactly as
// a function process does: it connects over its control channel, allocates its model's bytes in
// its device memory, freezes them, and answers its readiness; a batch is one kernel, under the
// node's compute grant, that takes the function's profiled latency on the node's clock (it
// sleeps on it: on a ManualLoopClock a run takes no wall time). A hung run naps on the clock until
// the instance is stopped, so that the node's timers still come due.
//
// What it did is kept for the test: requests answered (and how often) and failed, instances
// started. Faults on demand: runs that hang, instances that die at start.
//
// Threading: Start, Infer, Fail and Stop on the node's loop; every callback is posted to it. The
// destructor stops and joins every instance: nothing of them may sleep on a manual clock that no
// one advances (advance it first).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gshare/node/instance_host.h"
#include "gshare/node/loop_clock.h"
#include "gshare/node/process/process_host.h"
#include "gshare/sched/function_registry.h"

namespace gshare::testing {

class InProcessHost final : public InstanceHost {
 public:
  // `requests` (may be null) gets the answers, with the echo function's behaviour: the output is
  // the input, renamed.
  InProcessHost(LoopClock& clock, const FunctionRegistry& functions, RequestSource* requests);
  ~InProcessHost() override;

  // A factory for LiveNodeParts::host that keeps a view of the host it made in `*made`.
  static std::function<std::unique_ptr<InstanceHost>(LoopClock&, const FunctionRegistry&,
                                                     RequestSource*)>
  Factory(InProcessHost** made);

  // Where instances' stand-in pids start (InstanceLaunch::on_ready): above any pid (pid_max is at
  // most 2^22), within an int (the driver's API takes one).
  static constexpr std::int64_t kStandInPidBase = std::int64_t{1} << 30;

  Status Start(InstanceLaunch launch) override;
  void Infer(InstanceId instance, std::span<const RequestId> batch,
             std::function<void(Status)> done) override;
  void Fail(RequestId request, const Status& status) override;
  void Stop(InstanceId instance) override;

  std::map<RequestId, Status> failed;
  std::map<RequestId, int> answered;
  int started = 0;              // instances started
  int hang_runs = 0;            // the next runs that never end on their own
  bool crash_at_start = false;  // every instance dies at once
  // While true, Stop only records the instance; ReleaseStops stops those recorded (an instance
  // that is slow to end).
  bool hold_stops = false;
  void ReleaseStops();
  // Stops every instance. Then WaitExited waits, at most `wait` of wall time, until every
  // instance's thread has ended; false while one has not (one sleeping on a manual clock wakes
  // only when the clock moves: move it and wait again).
  void StopAll();
  bool WaitExited(std::chrono::milliseconds wait);

 private:
  struct Job {
    int batch = 0;
    bool hang = false;
    std::function<void(Status)> done;
  };
  struct Hosted {
    const ResolvedFunction* spec = nullptr;
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Job> jobs;
    bool stop = false;
    std::thread thread;
  };

  static void Halt(Hosted& hosted);
  void Post(std::function<void()> f);
  void Serve(Hosted& hosted, InstanceLaunch& launch);
  void ServeUnmodified(Hosted& hosted, InstanceLaunch& launch, std::int64_t pid);
  // Runs the instance's jobs until it is stopped: `run` takes a batch's profiled time and says how
  // the run ended; a hanging job ends the loop once the instance is stopped.
  void RunJobs(Hosted& hosted, const std::function<Status(Duration)>& run);

  LoopClock& clock_;
  const FunctionRegistry& functions_;
  RequestSource* requests_;
  std::map<InstanceId, std::unique_ptr<Hosted>> hosted_;
  std::vector<InstanceId> held_stops_;
  std::mutex running_mutex_;
  std::condition_variable running_changed_;
  int running_ = 0;  // instance threads that have not ended
};

}  // namespace gshare::testing
