// ProcessHost: function instances as real processes, behind the live executor (InstanceHost).
//
// Each instance is a child process started from its function's InstanceCommand:
//  - its environment is the command's, plus what the node sets (GSHARE_CONTROL_FD = 3, its end of
//    the control channel; GSHARE_DEVICE_BASE and GSHARE_DEVICE_RESERVE; GSHARE_SOCKET, where it
//    serves the function protocol; OPENBLAS_NUM_THREADS = 1), and a PATH; nothing else of the
//    node's environment;
//  - standard output and error go to <run dir>/logs/<function>.log (appended); standard input is
//    /dev/null; it leads its own process group; it dumps no core;
//  - when the node runs as root, every tenant's instances run as a uid and gid of their own
//    (first_uid + the tenant's index, no supplementary groups); otherwise as the node's uid, and
//    the non-dumpable flag the function library sets is what keeps them apart (docs/live-node.md);
//  - it is ready when GET /v2/health/ready answers 200 on its socket (polled until
//    ready_timeout, after which it is stopped); its end is seen through a pidfd on the loop.
// Infer stacks a batch's inputs along their first dimension into one KServe v2 request, posts it
// to /v2/models/{model}/infer, splits the answer per request and hands each to the RequestSource.
// Stop sends SIGTERM to the process group, then SIGKILL after stop_grace.
//
// Threading: the node's event loop only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gshare/node/instance_host.h"
#include "gshare/protocol/infer.h"

namespace gshare {

// How to start one function's instances.
struct InstanceCommand {
  std::vector<std::string> argv;  // the program (an absolute path) and its arguments
  std::map<std::string, std::string> env;
  std::string working_dir;  // empty: the run directory
  std::string model;        // the protocol's model name
  std::string name;         // the function's name: its log is <run dir>/logs/<name>.log
  std::string tenant;
};

// Where the inputs of requests come from and their answers go.
class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // The request's input; null when it is unknown (then the batch fails).
  virtual const InferRequest* Input(RequestId request) = 0;
  virtual void Answer(RequestId request, InferResponse response) = 0;
  virtual void Fail(RequestId request, const Status& status) = 0;
};

struct ProcessHostOptions {
  std::string run_dir;      // sockets and logs live here; it must exist
  uid_t first_uid = 70000;  // tenants' uids when the node runs as root
  bool distinct_uids = true;
  std::chrono::milliseconds ready_poll{20};
  std::chrono::milliseconds ready_timeout{60000};
  std::chrono::milliseconds stop_grace{2000};
  std::chrono::milliseconds request_deadline{60000};
};

class ProcessHost final : public InstanceHost {
 public:
  ProcessHost(boost::asio::io_context& loop, std::vector<InstanceCommand> commands,
              RequestSource& requests, ProcessHostOptions options);
  ~ProcessHost() override;

  Status Start(InstanceLaunch launch) override;
  void Infer(InstanceId instance, std::span<const RequestId> batch,
             std::function<void(Status)> done) override;
  void Fail(RequestId request, const Status& status) override;
  void Stop(InstanceId instance) override;

  // The uid instances of `tenant` run as (the node's own when not root or not distinct).
  uid_t UidOf(const std::string& tenant);
  // Processes running now, and the pids of those ready.
  std::size_t running() const { return processes_.size(); }
  std::vector<pid_t> ready_pids() const {
    std::vector<pid_t> out;
    for (const auto& [id, process] : processes_) {
      if (process->ready) out.push_back(process->pid);
    }
    return out;
  }

 private:
  struct Process {
    InstanceId id = 0;
    FunctionId function = 0;
    pid_t pid = -1;
    std::string socket_path;
    std::unique_ptr<boost::asio::posix::stream_descriptor> exit_watch;
    std::unique_ptr<boost::asio::steady_timer> timer;  // readiness polls, then the stop grace
    std::function<void()> on_ready;
    std::function<void(Status)> on_exit;
    bool ready = false;
    bool stopping = false;
    std::chrono::steady_clock::time_point started;
  };

  Result<pid_t> Spawn(const InstanceCommand& command, InstanceLaunch& launch,
                      const std::string& socket_path);
  void PollReady(InstanceId id);
  void Exited(InstanceId id);

  boost::asio::io_context& loop_;
  const std::vector<InstanceCommand> commands_;
  RequestSource& requests_;
  const ProcessHostOptions options_;
  std::string run_dir_;  // options_.run_dir, absolute
  std::map<std::string, uid_t> tenant_uids_;
  std::map<InstanceId, std::unique_ptr<Process>> processes_;
};

}  // namespace gshare
