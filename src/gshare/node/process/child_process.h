// ChildProcess: one spawned function process, in its own process group, watched without
// blocking the node's event loop.
//
// Spawn forks and, in the child, before exec: makes a new process group, points stdin at
// /dev/null and stdout/stderr at the log file (O_APPEND), applies the limits, joins the
// instance's cgroup (ProcessSpec::cgroup_procs_path), drops to the identity if one is given
// (setgroups({}), setgid, setuid), changes directory with the identity's rights, sets
// PR_SET_DUMPABLE 0 and PR_SET_PDEATHSIG SIGKILL (and ends if the node is already gone), gives
// the passed descriptors their numbers from 3 and marks every other descriptor close-on-exec. A
// failure of any of these steps or of exec is reported by Spawn as a Status naming the step (kIo,
// or kNotFound for a missing program); the child then never runs the program. Spawn itself waits
// (on the status pipe) until the child has exec'd or failed: a short block of the caller's thread.
//
// Note: the kernel sets the dumpable flag back to 1 at execve when the real and effective ids
// agree, so PR_SET_DUMPABLE before exec protects only the moment between fork and exec; the
// function itself (or a library it links) must call prctl(PR_SET_DUMPABLE, 0) at start. The tests
// check what a real child ends up with.
//
// PID namespace: with ProcessSpec::pid_namespace the child is the init of a PID namespace of its
// own (where the kernel allows one: it needs CAP_SYS_ADMIN; elsewhere a plain fork, which
// in_pid_namespace() tells). When it ends, the kernel kills everything left in the namespace, so
// no descendant outlives it, not even one that left its process group; its exit is reported once
// they are gone. As init it receives from the node only the signals it handles, and SIGKILL: a
// program without a SIGTERM handler is stopped by the SIGKILL after the grace time. pid() is the
// node's view of its pid (what /proc and the CUDA driver take).
//
// Init: with ProcessSpec::init_program the child execs gshare-init, which forks the program in a
// group of its own and stays its parent (init_protocol.h). It reaps what the program leaves, passes
// the node's SIGTERM on, and when the program ends ends everything under it, also outside a PID
// namespace (as a child subreaper): a process that left its group is found there too. pid() is
// then the init's; a signal goes to the init (SignalGroup), and SIGKILL outside a namespace is sent
// as the init's hard stop, so that it ends the rest before itself (in a namespace the kernel does).
// Spawn still reports the program's exec failure: the init passes it on through the status pipe.
//
// Sandbox: with ProcessSpec::sandbox the child is cloned into the sandbox's namespaces (PID among
// them) and, before the drop to its identity, builds its view of the files and pivots into it;
// after the drop and just before exec it sets no-new-privileges and the seccomp filter
// (sandbox.h). Where the kernel refuses the namespaces Spawn fails (FailedPrecondition): a
// sandboxed process never starts without them.
//
// Exit: the process is watched through a pidfd (pidfd_open) on the io_context; OnExit's callback
// runs on the loop once the child has exited and been reaped, with its wait status. Threading:
// use from the io_context's thread. The destructor kills the whole group (SIGKILL) and reaps the
// child if it is still there, so no process outlives its owner.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "gshare/common/status.h"
#include "gshare/node/process/process_spec.h"

namespace gshare {

// A wait status in words: "exited with status N", "killed by signal N", or "ended".
std::string DescribeWaitStatus(int wait_status);

// Whether sandboxed processes start here: /bin/true started in a sandbox built in `root_dir` (as
// nobody when run as root), waited for. OK, or why not (the step that failed). Blocks the caller
// for the child's life (milliseconds).
Status ProbeSandbox(const std::string& root_dir);

class ChildProcess {
 public:
  // `wait_status` as waitpid gives it (WIFEXITED/WIFSIGNALED apply).
  using ExitCallback = std::function<void(int wait_status)>;

  static Result<std::unique_ptr<ChildProcess>> Spawn(boost::asio::io_context& io,
                                                     const ProcessSpec& spec);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The program's pid as the node sees it: pid(), or under an init the init's first child (from
  // /proc; pid() where the kernel does not list children, or once the program has ended).
  pid_t program_pid() const;
  bool in_pid_namespace() const { return in_pid_namespace_; }
  bool exited() const { return exit_status_.has_value(); }

  // Sends `signal` to the child's process group; a no-op once the child has been reaped. Under an
  // init outside a PID namespace, SIGKILL is sent as the init's hard stop (the class comment).
  void SignalGroup(int signal);
  // SIGKILL to the program's group and the init's, whatever the init does: the last resort when
  // the init's hard stop did not end it (a program of its uid may have stopped it). What the
  // program started outside its group is then left to the uid sweep (docs/live-node.md).
  void KillAll();

  // Registers the callback for the exit (one; a later call replaces it). If the child has already
  // exited, the callback is posted to the loop.
  void OnExit(ExitCallback callback);

 private:
  ChildProcess(boost::asio::io_context& io, pid_t pid, int pidfd);
  void Watch();
  void Reap();

  boost::asio::io_context& io_;
  pid_t pid_;
  boost::asio::posix::stream_descriptor pidfd_;
  std::optional<int> exit_status_;
  bool in_pid_namespace_ = false;
  bool under_init_ = false;
  mutable pid_t program_pid_ = 0;  // under an init, once read
  ExitCallback on_exit_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace gshare
