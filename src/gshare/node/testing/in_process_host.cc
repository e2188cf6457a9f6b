#include "gshare/node/testing/in_process_host.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cstring>
#include <vector>

#include "gshare/fn/runtime.h"

namespace gshare::testing {

InProcessHost::InProcessHost(LoopClock& clock, const FunctionRegistry& functions,
                             RequestSource* requests)
    : clock_(clock), functions_(functions), requests_(requests) {}

InProcessHost::~InProcessHost() {
  for (auto& [id, hosted] : hosted_) Halt(*hosted);
  for (auto& [id, hosted] : hosted_) hosted->thread.join();
}

std::function<std::unique_ptr<InstanceHost>(LoopClock&, const FunctionRegistry&, RequestSource*)>
InProcessHost::Factory(InProcessHost** made) {
  return [made](LoopClock& clock, const FunctionRegistry& functions, RequestSource* requests) {
    auto host = std::make_unique<InProcessHost>(clock, functions, requests);
    if (made != nullptr) *made = host.get();
    return host;
  };
}

void InProcessHost::Halt(Hosted& hosted) {
  std::lock_guard lock(hosted.mutex);
  hosted.stop = true;
  hosted.changed.notify_all();
}

void InProcessHost::Post(std::function<void()> f) {
  boost::asio::post(clock_.loop(), std::move(f));
}

Status InProcessHost::Start(InstanceLaunch launch) {
  ++started;
  if (crash_at_start) {  // the process dies before it says hello
    Post([exit = launch.on_exit] { exit(Unavailable("exited with status 1")); });
    return Status::Ok();
  }
  auto hosted = std::make_unique<Hosted>();
  Hosted& h = *hosted;
  h.spec = &functions_[launch.function];
  const InstanceId id = launch.instance;
  {
    std::lock_guard lock(running_mutex_);
    ++running_;
  }
  h.thread = std::thread([this, &h, launch = std::move(launch)]() mutable {
    Serve(h, launch);
    std::lock_guard lock(running_mutex_);
    --running_;
    running_changed_.notify_all();
  });
  hosted_[id] = std::move(hosted);
  return Status::Ok();
}

void InProcessHost::Infer(InstanceId instance, std::span<const RequestId> batch,
                          std::function<void(Status)> done) {
  Hosted& h = *hosted_.at(instance);
  std::vector<RequestId> requests(batch.begin(), batch.end());
  const bool hang = hang_runs > 0;
  if (hang) --hang_runs;
  // The answers, as the echo function gives them: each request's input, renamed.
  std::vector<InferResponse> answers;
  if (requests_ != nullptr) {
    for (const RequestId request : requests) {
      const InferRequest* input = requests_->Input(request);
      InferResponse answer;
      if (input != nullptr) {
        answer.id = input->id;
        for (Tensor tensor : input->inputs) {
          answer.outputs.push_back(std::move(tensor).Renamed("output"));
        }
      }
      answers.push_back(std::move(answer));
    }
  }
  // Answers are delivered when the run ends OK; each request must be answered once.
  auto deliver = [this, requests, answers = std::move(answers),
                  done = std::move(done)](Status status) mutable {
    if (status.ok()) {
      for (std::size_t i = 0; i < requests.size(); ++i) {
        ++answered[requests[i]];
        if (requests_ != nullptr) requests_->Answer(requests[i], std::move(answers[i]));
      }
    }
    done(status);
  };
  std::lock_guard lock(h.mutex);
  h.jobs.push_back({static_cast<int>(batch.size()), hang, std::move(deliver)});
  h.changed.notify_all();
}

void InProcessHost::Fail(RequestId request, const Status& status) {
  failed[request] = status;
  if (requests_ != nullptr) requests_->Fail(request, status);
}

void InProcessHost::Stop(InstanceId instance) {
  if (hold_stops) {
    held_stops_.push_back(instance);
    return;
  }
  auto it = hosted_.find(instance);
  if (it != hosted_.end()) Halt(*it->second);
}

void InProcessHost::ReleaseStops() {
  hold_stops = false;
  std::vector<InstanceId> held;
  held.swap(held_stops_);
  for (const InstanceId instance : held) Stop(instance);
}

void InProcessHost::StopAll() {
  for (auto& [id, hosted] : hosted_) Halt(*hosted);
}

bool InProcessHost::WaitExited(std::chrono::milliseconds wait) {
  std::unique_lock lock(running_mutex_);
  return running_changed_.wait_for(lock, wait, [this] { return running_ == 0; });
}

void InProcessHost::Serve(Hosted& h, InstanceLaunch& launch) {
  // Each instance's stand-in pid: no process of its own, and never one of the machine's that a
  // test could harm.
  const std::int64_t pid = kStandInPidBase + static_cast<std::int64_t>(launch.instance);
  if (!launch.control.valid()) return ServeUnmodified(h, launch, pid);
  auto runtime =
      fn::FunctionRuntime::Connect(std::move(launch.control), launch.device_base,
                                   launch.device_reserve_bytes, {.exit_when_node_gone = false});
  if (!runtime.ok()) {
    Post([exit = launch.on_exit, status = runtime.status()] { exit(status); });
    return;
  }
  auto weights = (*runtime)->Allocate(h.spec->model_bytes, "weights");
  if (weights.ok()) {
    (void)(*runtime)->Launch([&] { std::memset(weights->data(), 0x5a, weights->size_bytes()); });
    (*runtime)->EndWork();
    (void)(*runtime)->memory().Freeze();
    Post([ready = launch.on_ready, pid] { ready(pid); });
  }
  // One kernel as long as the profile says, under the GPU's compute grant.
  RunJobs(h, [&](Duration exec) {
    const Status ran = (*runtime)->Launch([&] { clock_.SleepUntil(clock_.Now() + exec); });
    (*runtime)->EndWork();
    return ran;
  });
  weights = Status(Cancelled("stopping"));
  runtime = Status(Cancelled("stopping"));  // closes the channel
  Post([exit = launch.on_exit] { exit(Status::Ok()); });
}

void InProcessHost::ServeUnmodified(Hosted& h, InstanceLaunch& launch, std::int64_t pid) {
  // Without a control channel: a program the driver switches (the checkpoint API), whose memory
  // the node never sees and whose kernels share the GPU by its own time slicing.
  Post([ready = launch.on_ready, pid] { ready(pid); });
  RunJobs(h, [&](Duration exec) {
    clock_.SleepUntil(clock_.Now() + exec);
    return Status::Ok();
  });
  Post([exit = launch.on_exit] { exit(Status::Ok()); });
}

void InProcessHost::RunJobs(Hosted& h, const std::function<Status(Duration)>& run) {
  const auto stopped = [&] {
    std::lock_guard lock(h.mutex);
    return h.stop;
  };
  for (;;) {
    Job job;
    {
      std::unique_lock lock(h.mutex);
      h.changed.wait(lock, [&] { return h.stop || !h.jobs.empty(); });
      if (h.stop) break;
      job = std::move(h.jobs.front());
      h.jobs.pop_front();
    }
    if (job.hang) {
      // Stuck until the node stops the instance: no answer. It naps on the node's clock, so that
      // a manual clock moves on to the node's timers (the run's timeout among them).
      while (!stopped()) clock_.SleepUntil(clock_.Now() + std::chrono::seconds(1));
      break;
    }
    const Status ran = run(h.spec->ExecLatency(job.batch));
    Post([done = std::move(job.done), ran] { done(ran); });
  }
}

}  // namespace gshare::testing
