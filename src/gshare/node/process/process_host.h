// ProcessHost: function instances as real processes, behind the live executor (InstanceHost).
//
// Each instance is a child process (ChildProcess) started from its function's InstanceCommand:
//  - its environment is the command's, plus what the node sets (GSHARE_CONTROL_FD = 3, its end of
//    the control channel; GSHARE_DEVICE_BASE and GSHARE_DEVICE_RESERVE; GSHARE_SOCKET, where it
//    serves the function protocol; OPENBLAS_NUM_THREADS = 1), and a PATH; nothing else of the
//    node's environment, and no descriptor of the node's but its control channel;
//  - standard output and error go to <run dir>/logs/<tenant>/<function>.log (appended, mode 0600,
//    never through a symbolic link); standard input is
//    /dev/null; it leads its own process group; it dumps no core; it has an open-files limit;
//  - when the node runs as root, every tenant's instances run as a uid and gid of their own
//    (TenantIdentities: first_uid + the tenant's index, no supplementary groups); otherwise as the
//    node's uid, and the non-dumpable flag the function library sets is what keeps them apart
//    (docs/live-node.md);
//  - where the node's cgroup v2 delegates the memory and pids controllers, every instance gets a
//    cgroup of its own (pids.max; memory.max when the command sets one), removed after it ends;
//    otherwise it runs without one, and the reason is logged once (cgroup_reason());
//  - it is ready when GET /v2/health/ready answers 200 on its socket (polled until ready_timeout,
//    after which it is killed: a crash), its function's first instance has answered GET /v2
//    (whether it speaks the binary tensor extension: SpeaksBinary) and, for a command that reads
//    metadata, the function's
//    first instance has answered GET /v2/models/{model}: 200 with tensors that pass
//    CheckTensorSpecs (tensors it reports wrongly are a crash, with the reason), or another
//    status (it reports none); once ready the same probe runs every health_interval
//    while no batch is in flight, and health_failures probes failed in a row kill it (a crash);
//    its end is seen through a pidfd on the loop.
// Crashes and restarts: an instance that ends without being stopped (or fails to spawn) is a crash
// of its function. After n crashes in a row the function's next instance starts no earlier than
// restart_backoff_initial * 2^(n-1) (at most restart_backoff_max) after the last one: Start
// returns at once and the process is spawned when the delay has passed (a Stop meanwhile cancels
// it). Past max_crashes in a row the function is in a crash loop: Start refuses (kUnavailable,
// naming the last crash and its log) until restart_backoff_max after the last crash, then allows
// one try. The count restarts when an instance of the function is stopped cleanly after being
// ready, or crashes after being ready for stable_after. The scheduler decides whether to start
// an instance again (a request waiting, min_instances); the host decides how soon.
// Infer stacks a batch's inputs along their first dimension into one KServe v2 request, posts it
// to /v2/models/{model}/infer (in the binary tensor extension, with binary_data_output, to a
// function that speaks it; else as JSON: function_codec.h), splits the answer (either form) per
// request and hands each to the RequestSource. Tensors are written and read on the codec pool,
// not the loop; a batch of one request that its source encoded ahead in the function's form is
// sent as it is, and its answer handed back undecoded where the source takes it so (the fast
// path of a request alone: no copy, no codec work and no hand-off on the way).
// Stop sends SIGTERM to the process group, then SIGKILL after stop_grace.
//
// Time: every delay, timeout and backoff is on the node's clock (LoopClock), whose loop the host
// runs on.
//
// Threading: the node's event loop only. Destroying the host kills and reaps every instance.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "gshare/common/unique_fd.h"
#include "gshare/node/instance_host.h"
#include "gshare/node/loop_clock.h"
#include "gshare/node/process/cgroup.h"
#include "gshare/node/process/child_process.h"
#include "gshare/node/process/function_codec.h"
#include "gshare/node/process/tenant_identity.h"
#include "gshare/protocol/infer.h"
#include "gshare/protocol/model_metadata.h"

namespace gshare {

// How to start one function's instances.
struct InstanceCommand {
  std::vector<std::string> argv;  // the program (an absolute path) and its arguments
  std::map<std::string, std::string> env;
  std::string working_dir;  // empty: the run directory
  std::string model;        // the protocol's model name
  std::string name;         // the function's name: its log is <run dir>/logs/<tenant>/<name>.log
  std::string tenant;
  std::optional<std::uint64_t> memory_max_bytes;  // the instance cgroup's memory.max, if any
  // Read the model's tensors from GET /v2/models/{model} when its first instance is ready
  // (ReportedTensors), checked as a model that batches (max_batch above 1) or not.
  bool read_metadata = false;
  bool batched = false;
  // Runs in the sandbox where the host has one (ProcessHostOptions::sandbox), showing these host
  // paths read-only besides the system's (the runtime's programs, the tenant's model folder).
  bool sandboxed = false;
  std::vector<std::string> sandbox_read_only{};
};

// Where the inputs of requests come from and their answers go.
class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // The request's input; null when it is unknown (then the batch fails). Asked once each time
  // the request is sent, when it is sent.
  virtual const InferRequest* Input(RequestId request) = 0;
  virtual void Answer(RequestId request, InferResponse response) = 0;
  virtual void Fail(RequestId request, const Status& status) = 0;

  // Where the source encodes requests ahead (function_codec.h): the request as a batch of itself
  // alone, taken once (a request sent again is encoded by the host). Nothing: the host encodes it.
  virtual std::optional<EncodedRequest> TakeEncoded(RequestId /*request*/) { return std::nullopt; }
  // The request is sent in a batch of several, which the host encodes: what was encoded ahead for
  // it is not needed (the source may free it).
  virtual void DropEncoded(RequestId /*request*/) {}
  // Whether the source takes the answer to a batch of one request still encoded (AnswerEncoded)
  // and decodes it off the loop itself; otherwise every answer is decoded by the host.
  virtual bool TakesEncodedAnswers() const { return false; }
  virtual void AnswerEncoded(RequestId /*request*/, FunctionAnswer /*answer*/) {}
};

struct ProcessHostOptions {
  std::string run_dir;              // sockets and logs live here; it must exist
  uid_t first_uid = 70000;          // tenants' uids when the node runs as root: from first_uid,
  std::uint32_t uid_count = 10000;  // this many
  bool distinct_uids = true;
  // A tenant's fixed number, so that its uid is first_uid + the number in every run (the server's
  // registry gives it); unset: numbers in the order tenants are first seen in this run.
  std::function<Result<std::uint32_t>(const std::string&)> tenant_number{};
  bool cgroups = true;  // false: no instance cgroups even where they are delegated
  // Each instance is the init of a PID namespace of its own where the kernel allows it (as root),
  // so nothing it starts outlives it (ChildProcess).
  bool pid_namespaces = true;
  // gshare-init (init_protocol.h), every instance's first process where set: it reaps what the
  // instance leaves and, when the program ends, ends the rest, also outside a PID namespace (a
  // process that left its group included). Empty: the program runs itself (tests).
  std::string init_program;
  // Where an instance ran outside a PID namespace: end every process of its tenant's uid with the
  // tenant's last instance. Only for a node whose uid range is its own on the host (a range
  // claimed in the host's uid ledger): another node given the same uids would lose processes.
  bool kill_uid_leftovers = false;
  // Folders every uid may write: when a tenant's last instance ends, what its uid left at their
  // top (files, folders with what is in them) is removed, so the next tenant given a uid finds
  // nothing of it. Only for a uid of its own (never the node's).
  std::vector<std::string> tenant_shared_folders = {"/dev/shm", "/tmp"};
  std::uint64_t open_files = 1024;
  // Functions whose command asks for it (InstanceCommand::sandboxed) run in the sandbox
  // (sandbox.h), built in <run_dir>/sandbox, with the instance's folder writable and the init's
  // folder shown; their start fails rather than run without it. Needs root (ProbeSandbox).
  bool sandbox = false;
  std::uint64_t sandbox_tmp_bytes = 256ull << 20;  // each sandbox's /tmp and /dev/shm
  // Devices each sandbox shows besides the harmless ones (a CUDA node's GPU device nodes).
  std::vector<std::string> sandbox_devices{};
  // Folders no sandbox may show (a bind of one or of a folder above one fails the start); the run
  // folder always.
  std::vector<std::string> sandbox_hidden{};
  std::uint64_t pids_max = 512;  // per instance cgroup
  std::chrono::milliseconds ready_poll{20};
  std::chrono::milliseconds ready_timeout{60000};
  std::chrono::milliseconds health_interval{5000};
  std::chrono::milliseconds probe_timeout{2000};
  int health_failures = 3;
  std::chrono::milliseconds restart_backoff_initial{200};
  std::chrono::milliseconds restart_backoff_max{30000};
  int max_crashes = 5;
  std::chrono::milliseconds stable_after{60000};
  std::chrono::milliseconds stop_grace{2000};
  std::chrono::milliseconds request_deadline{60000};
  // Threads that write and read the functions' JSON (0: the cores less one, from 1 to 4).
  std::size_t codec_threads = 0;
};

// A function's crash record (FunctionRestarts).
struct RestartState {
  int consecutive_crashes = 0;
  bool crash_loop = false;  // Start refuses now
  TimePoint last_crash{};
  std::chrono::milliseconds next_delay{0};  // how long after last_crash the next start waits
  std::string last_reason;
};

class ProcessHost final : public InstanceHost {
 public:
  // `commands` are those of functions 0..n-1 (more come with SetCommand).
  ProcessHost(LoopClock& clock, std::vector<InstanceCommand> commands, RequestSource& requests,
              ProcessHostOptions options);
  ~ProcessHost() override;

  // How instances of `function` start: for a function added while the node runs, set once before
  // its first Start (the command of a running instance is read while it runs). A function
  // without one cannot start (Start refuses).
  void SetCommand(FunctionId function, InstanceCommand command);
  // Forgets the function's command and its crash record, once no instance of it is left.
  void RemoveCommand(FunctionId function);
  // Functions with a command (tests: the host holds only live functions).
  std::size_t commands() const { return commands_.size(); }

  Status Start(InstanceLaunch launch) override;
  void Infer(InstanceId instance, std::span<const RequestId> batch,
             std::function<void(Status)> done) override;
  void Fail(RequestId request, const Status& status) override;
  void Stop(InstanceId instance) override;

  // The uid instances of `tenant` run as (the node's own in the same-uid fallback).
  uid_t UidOf(const std::string& tenant);
  // Where the instances of `tenant`'s function `function` append their stdout and stderr (every
  // instance and version of it): run_dir/logs/<tenant, or "default">/<function>.log.
  static std::filesystem::path LogPath(const std::string& run_dir, const std::string& tenant,
                                       const std::string& function);
  // Why instances do or do not get a cgroup (one line).
  const std::string& cgroup_reason() const { return cgroups_.reason; }
  bool cgroups_enabled() const { return cgroups_.enabled; }
  RestartState FunctionRestarts(FunctionId function) const;
  // The tensors `function`'s metadata reported (empty where it reported none), once an instance
  // of a command that reads metadata is ready; absent before, and for other commands.
  std::optional<ModelTensors> ReportedTensors(FunctionId function) const;
  // Whether `function`'s instances are sent tensors in the binary tensor data extension: its
  // GET /v2 lists "binary_tensor_data" among its extensions (asked once, when its first instance
  // is ready). Otherwise, and before, batches go as JSON.
  bool SpeaksBinary(FunctionId function) const;
  // Requests sent alone with the body their source encoded ahead (the fast path; tests).
  std::uint64_t sent_as_encoded() const { return sent_as_encoded_; }
  // Processes running now (spawned, not yet reaped), and the pids of those ready: the programs'
  // (ChildProcess::program_pid), not their inits'.
  std::size_t running() const;
  std::vector<pid_t> ready_pids() const;
  std::vector<pid_t> pids() const;
  // When the instance's process was spawned (absent while it waits out a restart delay).
  std::optional<TimePoint> SpawnedAt(InstanceId instance) const;
  // Blocks until the removals of tenants' leftovers begun so far are done (tests). Any thread but
  // the codec pool's.
  void WaitForCleanups();

 private:
  struct Process {
    InstanceId id = 0;
    FunctionId function = 0;
    std::string tenant;                       // its command's, kept past the command's removal
    std::optional<ProcessIdentity> identity;  // what it runs as, from its spawn on
    InstanceLaunch launch;                    // its control end is handed over at the spawn
    std::string socket_path;
    // The socket, opened without following a symlink and checked to be a socket of the
    // instance's uid once it is there; the host connects through /proc/self/fd/N (socket_target),
    // never by the path in a folder the instance may write.
    UniqueFd socket_file;
    std::string socket_target;
    std::unique_ptr<InstanceCgroup> cgroup;  // declared before child: removed after the reap
    std::unique_ptr<ChildProcess> child;     // null while waiting out a restart delay
    LoopTimer timer;                         // delay, readiness, health or stop grace
    bool ready = false;
    bool stopping = false;
    Status kill_reason;  // why the host killed it (readiness, health), reported at its end
    int probe_failures = 0;
    int in_flight = 0;          // batches sent and not answered
    std::uint64_t batches = 0;  // batches ever sent: a probe overlapping one is not judged
    TimePoint spawned{};
    TimePoint ready_at{};
  };
  struct Restarts {
    int consecutive = 0;
    TimePoint last_crash{};
    std::string last_reason;
  };

  std::chrono::milliseconds DelayAfter(int crashes) const;
  Status SpawnNow(Process& process);
  void PollReady(InstanceId id);
  // Reads, once per function, whether it speaks the binary tensor extension (GET /v2), then its
  // metadata where its command asks and nothing is known yet, then Ready.
  void ReadMetadataThenReady(InstanceId id);
  void ReadTensorsThenReady(InstanceId id);
  void Ready(Process& process);
  void ScheduleProbe(InstanceId id);
  void Kill(Process& process, Status reason);
  // Opens the instance's socket once (Process::socket_file): Unavailable while it is not there,
  // PermissionDenied when the path is not a socket of the instance's own uid.
  Status OpenSocket(Process& process);
  // Closes it after a failed connection: the next request opens and checks the path again.
  void ForgetSocket(Process& process);
  // SIGKILL (ChildProcess::SignalGroup), then after stop_grace ChildProcess::KillAll.
  void HardStop(InstanceId id);
  void Exited(InstanceId id, int wait_status);
  // Sends a written batch to `instance` (on the loop) and answers its requests.
  void Send(InstanceId instance, std::vector<RequestId> ids, std::vector<std::int64_t> sizes,
            Result<FunctionBody> body, std::function<void(Status)> done);
  void CountCrash(FunctionId function, const Process& process, const std::string& reason);
  // Once `tenant` has no instance left: removes what its uid left in the shared folders (on the
  // codec pool: a tenant's folders may be large, and the loop is everyone's).
  void RemoveTenantLeftovers(const std::string& tenant, const ProcessIdentity& identity);

  // The command of `function`; an empty one (its instances cannot start) when it has none.
  const InstanceCommand& CommandOf(FunctionId function) const;

  LoopClock& clock_;
  boost::asio::io_context& loop_;
  std::unordered_map<FunctionId, InstanceCommand> commands_;
  RequestSource& requests_;
  const ProcessHostOptions options_;
  std::string run_dir_;                         // options_.run_dir, absolute
  std::optional<TenantIdentities> identities_;  // absent: identity_error_ says why
  Status identity_error_;
  CgroupDecision cgroups_;
  std::map<FunctionId, Restarts> restarts_;
  std::set<FunctionId> ever_ready_;              // functions with an instance that became ready
  std::map<FunctionId, ModelTensors> reported_;  // ReportedTensors
  std::map<FunctionId, bool> binary_;            // SpeaksBinary
  // Instances spawned per uid: a removal of leftovers stops when one of the uid starts.
  std::map<uid_t, std::shared_ptr<std::atomic<std::uint64_t>>> spawns_by_uid_;
  // Uids with an instance that ran outside a PID namespace since their last cleanup.
  std::set<uid_t> outside_namespace_;
  std::map<InstanceId, std::unique_ptr<Process>> processes_;
  std::uint64_t sent_as_encoded_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Writes requests to and reads answers from the functions' JSON off the loop. Jobs touch no
  // member but the loop, which they post back to (checking alive_ there).
  std::unique_ptr<boost::asio::thread_pool> codec_pool_;
  // Leftover removals, one after another on the codec pool (WaitForCleanups waits for them).
  std::optional<boost::asio::strand<boost::asio::thread_pool::executor_type>> cleanups_;
};

}  // namespace gshare
