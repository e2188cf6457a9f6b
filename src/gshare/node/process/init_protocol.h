// What ChildProcess and gshare-init (init_main.cc) agree on: how the node starts a program under
// the init, and what the init reports back before the program runs.
//
//   gshare-init --report-fd=N -- PROGRAM [ARG...]
//
// N is ChildProcess's status pipe, open across the init's exec. The init closes it once PROGRAM
// has been exec'd (the node reads end of file: the start succeeded), or writes two ints, a step
// below and errno, when a step before that failed. kHardStopSignal, sent to the init, ends the
// program and everything it left (a SIGKILL to the init could not: it would end the init first).
#pragma once

#include <signal.h>

#include <string_view>

namespace gshare::init_protocol {

// Its name: it is installed beside the function programs (gshare-function).
inline constexpr std::string_view kProgramName = "gshare-init";
inline constexpr std::string_view kReportFlag = "--report-fd=";
inline constexpr int kHardStopSignal = SIGUSR1;

// Steps the init reports, numbered after ChildProcess's own.
enum Step : int {
  kStepArguments = 100,  // its command line is not the above
  kStepFork = 101,
  kStepExec = 102,
};

}  // namespace gshare::init_protocol
