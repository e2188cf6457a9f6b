// TimesliceBench: example functions sharing one emulated GPU's compute engine, measured against
// what the simulator's time-slicing model predicts (docs/live-node.md). `gshare bench timeslice`
// is its command line.
//
// For 1, 2 and 3 instances: a live node of one emulated GPU starts that many `mlp` function
// processes (the bundled program), restores each onto the GPU, and then, round after round, sends
// every instance `batch` requests at the same moment, which it runs as one batch (one kernel), and
// waits for all answers (every answer checked against the reference). A request's latency is from
// its submission to its answer, as the live executor sees it. Figures are over `rounds` rounds,
// after one untimed round. The control: the same processes and rounds with each instance on an
// emulated GPU of its own, so that they share the host's CPUs and the node's event loop but no
// compute engine.
//
// The prediction: a request's latency alone is its compute (the mlp's one kernel, its forward pass
// over the batch, timed in this process on one BLAS thread, median of 101 calls) plus the rest (the
// function protocol, the process's wake-ups), which the solo latency measured with one instance
// less that compute gives. For n instances, the simulator's compute model (sim/compute_sharing.h)
// is given n runs of that compute arriving together; each predicted latency is the rest plus a
// run's completion time. The rest is taken to overlap freely: on the node the processes also share
// the host's CPUs, which the model does not see. As a bound from the other side, the model is also
// given runs of the whole solo latency (everything a request does, shared as compute is).
//
// The node runs on the calling thread on the steady clock; a bench that does not finish in two
// minutes is given up with the executor's state. Errors: a wrong answer, a failed request or
// restore, a process that died.
#pragma once

#include <filesystem>
#include <vector>

#include "gshare/common/status.h"

namespace gshare::measure {

struct TimesliceBenchOptions {
  std::filesystem::path weights_dir;       // mlp.safetensors and cnn.safetensors; seed 1 if empty
  std::filesystem::path function_program;  // gshare-function
  int rounds = 100;
  int batch = 1;
};

struct TimesliceRow {
  int instances = 0;
  double live_median_ms = 0;
  double live_mean_ms = 0;
  double own_gpus_median_ms = 0;   // each instance on a GPU of its own: the host's share alone
  double sim_median_ms = 0;        // the kernel shared, the rest overlapping
  double sim_whole_median_ms = 0;  // the whole solo latency shared
};

struct TimesliceBenchResult {
  double kernel_ms = 0;            // the mlp's forward pass over a batch, alone
  double solo_ms = 0;              // one instance's median latency
  double quantum_ms = 0;           // the compute model's quantum
  std::vector<TimesliceRow> rows;  // 1, 2 and 3 instances
};

Result<TimesliceBenchResult> RunTimesliceBench(const TimesliceBenchOptions& options);

}  // namespace gshare::measure
