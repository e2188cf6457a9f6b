// ReplayDriver: the trace side of gshare replay. It sends each request at its due time as a KServe
// v2 JSON inference to a running server, from a fixed number of workers, checks every answer
// where a reference exists, and measures latency and SLO attainment at the client with the
// Meter's own accounting (sched/meter.h), so that a replay's figures mean what a simulation's do.
//
// Workers: `concurrency` threads, each with a kept-alive connection of its own (net::HttpClient);
// a request is handed to a worker only when one is idle, so at most `concurrency` are in flight.
// A request due while every worker is busy waits for the first to be free and is counted as a
// late send.
//
// Timing: the replay's clock starts when the driver is made; a request's latency runs from the
// moment its worker sends it to the end of its answer, and it meets its SLO when answered 200,
// right, within its target's `slo`. A request with no answer within its target's
// `answer_timeout` counts as unanswered (and failed).
//
// Threading: Run is called once, from one thread, and blocks until every request is answered or
// given up; Report and counts are read after it has returned. The checker is used under a lock of
// the driver's (it is not thread-safe); it must outlive the driver, as must the workload.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "examples/runtime/output_checker.h"
#include "gshare/common/clock.h"
#include "gshare/common/mutex.h"
#include "gshare/common/units.h"
#include "gshare/measure/reference_answers.h"
#include "gshare/model/request.h"
#include "gshare/net/http_client.h"
#include "gshare/sched/meter.h"
#include "gshare/sim/policy_report.h"
#include "gshare/sim/workload/workload.h"

namespace gshare::measure {

// One replayed function as the driver sends to it.
struct ReplayTarget {
  std::string infer_path;     // /v2/models/NAME/infer
  std::string authorization;  // "Bearer KEY"
  std::string model;          // the checker's model: the bundled runtime, or "echo" (for its input)
  bool checked = false;       // a bundled runtime: its answers are checked against the reference
  // Or a reference given by files (reference_answers.h): its request is sent, its outputs are the
  // answer's; owned by the ReferenceAnswers, which outlives the driver.
  const ReferenceAnswer* reference = nullptr;
  // Its request serialized once, without an id (the driver puts each request's id first).
  std::string reference_body;
  Duration slo{};
  Duration answer_timeout{};
};

// One request of the replay, due this long after the replay's start.
struct PlannedRequest {
  RequestId id = 0;  // also its checker index and its `id` on the wire
  FunctionId function = 0;
  Duration due{};
};

class ReplayDriver {
 public:
  // `targets` by FunctionId, as `workload.functions`.
  // `references` (may be null) checks the targets that have a reference; it must outlive the
  // driver.
  ReplayDriver(net::HttpEndpoint endpoint, std::vector<ReplayTarget> targets,
               examples::OutputChecker& checker, const Workload& workload, int concurrency,
               const ReferenceAnswers* references = nullptr);

  // Sends every request of `plan` (sorted by due time); returns once each is answered or given
  // up.
  void Run(const std::vector<PlannedRequest>& plan);

  // After Run: what the client measured, as gshare sim reports a policy (requests, failures, SLO
  // attainment, latency; the GPU figures are the server's and stay 0 here), under `policy`.
  PolicyReport Report(std::string policy);

  struct PerFunction {
    std::map<int, std::uint64_t> statuses;  // answers by HTTP status
    std::uint64_t unanswered = 0;
    std::uint64_t wrong = 0;
  };
  struct Counts {
    std::map<int, std::uint64_t> statuses;
    std::vector<PerFunction> functions;  // by FunctionId
    std::uint64_t answered = 0;          // any status
    std::uint64_t unanswered = 0;
    std::uint64_t wrong = 0;      // 200 answers that were wrong
    std::uint64_t unchecked = 0;  // right-looking 200 answers with no reference
    std::uint64_t late_sends = 0;
  };
  // After Run.
  Counts counts();

 private:
  void Work();
  void Send(net::HttpClient& client, const PlannedRequest& planned);
  // "" when the answer is right (or has no reference to check against), why not otherwise.
  std::string CheckAnswer(const ReplayTarget& target, RequestId id, const std::string& body);
  void Progress(std::size_t total);

  const net::HttpEndpoint endpoint_;
  const std::vector<ReplayTarget> targets_;
  Mutex checker_mutex_;
  examples::OutputChecker& checker_ GUARDED_BY(checker_mutex_);
  const Workload& workload_;
  const int concurrency_;
  const ReferenceAnswers* const references_;
  const SteadyClock clock_;  // the replay's time: zero when the driver is made

  Mutex mutex_;
  CondVar work_ready_;     // a request was queued, or the replay is closing
  CondVar worker_free_;    // a worker finished its request
  CondVar progress_wake_;  // the replay finished
  std::deque<PlannedRequest> queue_ GUARDED_BY(mutex_);
  int idle_ GUARDED_BY(mutex_) = 0;  // workers without a request; a request is queued for one
  bool closing_ GUARDED_BY(mutex_) = false;
  bool finished_ GUARDED_BY(mutex_) = false;
  Meter meter_ GUARDED_BY(mutex_);
  TimePoint last_answer_ GUARDED_BY(mutex_){};
  std::uint64_t sent_ GUARDED_BY(mutex_) = 0;
  std::uint64_t error_answers_ GUARDED_BY(mutex_) = 0;
  Counts counts_ GUARDED_BY(mutex_);
};

}  // namespace gshare::measure
