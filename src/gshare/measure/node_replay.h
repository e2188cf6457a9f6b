// NodeReplay: a trace replayed against real function processes on the live node (node/live_node.h),
// under the same policy code as the simulator, every answer checked against the reference of the
// bundled runtimes, and the simulator's prediction of the same run measured beside it
// (docs/live-node.md, "Replay and fidelity"). `gshare node replay` is its command line.
//
// RunNodeReplay writes OUT/summary.json (the layout of gshare sim, plus "wrong_outputs",
// "answered", "failed", "answered_twice"), OUT/fidelity.json and OUT/memory.json (the resident
// memory of the node and its function processes, sampled every memory_interval, and its growth
// after the warm-up), and the function processes' logs under OUT/run/logs. The node runs on this
// thread; the call returns when every request is answered (or the replay is given up, after
// twice its span and five minutes more, with what is in flight).
//
// Errors: InvalidArgument for input the replay cannot run (a function without a bundled runtime,
// a trace with no request in the window), another code when the run failed; wrong or repeated
// answers and failed requests are in the result, not errors.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "gshare/common/slice_granularity.h"
#include "gshare/common/status.h"
#include "gshare/device/device_registry.h"
#include "gshare/model/catalog.h"
#include "gshare/sim/fidelity.h"
#include "gshare/sim/policy_report.h"
#include "gshare/sim/workload/trace_reader.h"

namespace gshare::measure {

struct NodeReplayOptions {
  Catalog catalog;                         // the functions: bundled runtimes only
  RawTrace trace;                          // read over `catalog`
  std::string trace_path;                  // for the report
  std::string trace_format;                // for the report
  std::filesystem::path weights_dir;       // where the catalog's weights are (written when missing)
  std::filesystem::path function_program;  // gshare-function
  std::string policy = "gshare";
  DeviceOptions devices;  // emulated GPUs with a paced link
  int gpus = 2;           // how many: the simulator's cap too
  SliceGranularity granularity;
  Duration duration = std::chrono::minutes(2);  // the first `duration` of trace time
  double speedup = 1;
  Duration memory_interval = std::chrono::seconds(10);
  std::filesystem::path out;
  // Progress lines for the operator (may be empty).
  std::function<void(const std::string&)> progress;
};

struct NodeReplayResult {
  std::size_t requests = 0;
  std::uint64_t answered = 0;
  std::uint64_t failed = 0;
  std::uint64_t wrong = 0;           // answers that differ from the reference
  std::uint64_t answered_twice = 0;  // answers to requests already answered
  PolicyReport live;                 // the whole replay, as the live node's meter saw it
  FidelityReport fidelity;           // the last two thirds, live and simulated
  std::string memory_summary;        // one line
  Status memory_error;               // the first failure to read the node's memory, or OK
};

Result<NodeReplayResult> RunNodeReplay(const NodeReplayOptions& options);

}  // namespace gshare::measure
