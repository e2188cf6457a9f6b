// What `gshare sim` and `gshare compare` both read before they simulate: the catalog, the GPU type
// and the trace, checked in the same order and with the same messages by both commands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gshare/common/status.h"
#include "gshare/model/catalog.h"
#include "gshare/model/gpu_type.h"
#include "gshare/sim/workload/exec_noise.h"
#include "gshare/sim/workload/generator.h"
#include "gshare/sim/workload/trace_reader.h"
#include "gshare/sim/workload/workload.h"
#include "gshare/sim/world_model.h"

namespace gshare::cli {

// Where a simulation's workload comes from, as the flags name it.
struct TraceSource {
  std::string catalog;                       // catalog YAML
  std::string trace;                         // trace file
  std::string trace_format = "invocations";  // a TraceFormatName
  std::string function;                      // azure-llm: the arrivals' function ("": the first)
  std::string gpu_type = "a100-40gb";        // the type of every GPU
  // Instead of catalog and trace: "functions=N,duration=D[,slo-factor=F][,regime=R]
  // [,batching=on|off]", a workload that
  // `gshare workload` would write, generated anew for each seed.
  std::string generate;
};

// Adds --catalog, --trace, --trace-format, --function, --gpu-type, --generate and --policy to a
// command (gshare sim, gshare compare), bound to `source` and `policies`.
void AddTraceSourceOptions(CLI::App* cmd, TraceSource& source, std::vector<std::string>& policies);

// The simulated world's departures from the ideal (world_model.h), as the flags give them; the
// defaults are WorldModel::Fair().
struct WorldFlags {
  bool ideal = false;
  int gpus_per_node = 8;
  std::string host_bandwidth = "50GB/s";
  std::string restore_noise = "lognormal:0.1";
  double prior_error = 0.3;
  std::string fragmentation = "on";
};

// Adds --ideal, --gpus-per-node, --host-bandwidth, --restore-noise, --prior-error and
// --fragmentation (--ideal excludes the others) to a command (gshare sim, gshare compare), bound to
// `world`.
void AddWorldOptions(CLI::App* cmd, WorldFlags& world);

// The world the flags describe, with seed 1 (each run sets its own). InvalidArgument naming the
// flag at fault: a bandwidth that is not a positive size per second ("50GB/s", "25Gi/s"), a noise
// that ParseExecNoise refuses, a fragmentation neither on nor off.
Result<WorldModel> MakeWorld(const WorldFlags& flags);

// NotFound naming the first of `policies` that PolicyNames does not know (and listing those it
// knows); Ok when it knows them all.
Status CheckPolicyNames(const std::vector<std::string>& policies);

// The catalog, trace format and GPU type, read and checked once; Read then reads the trace (or
// generates the workload) and builds the workload, as often as the seeds need (only --generate
// and the formats that draw with the seed need more than one read).
class WorkloadReader {
 public:
  // Loads the catalog (with --generate: parses the spec and takes the built-in GPU types), parses
  // the trace format and finds the GPU type. Errors: InvalidArgument for a malformed --generate
  // spec or a missing --catalog or --trace; those of LoadCatalog and ParseTraceFormat; NotFound
  // for a GPU type the catalog lacks (naming those it has).
  static Result<WorkloadReader> Open(const TraceSource& source);

  // Reads the trace with `seed` into a copy of the catalog (with --generate: generates the
  // catalog and trace with `seed`), builds the workload for the GPU type (trace_path as the flag
  // gave it, or "generated:SPEC") and draws `noise` with `seed`. Errors: those of ReadTrace,
  // GenerateWorkload and BuildWorkload.
  Result<Workload> Read(std::uint64_t seed, const ExecNoise& noise) const;

  // Whether two seeds read different workloads from this trace (TraceFormatDrawsWithSeed).
  bool TraceDrawsWithSeed() const { return generated_ || TraceFormatDrawsWithSeed(format_); }
  const GpuType& gpu() const { return gpu_; }

 private:
  WorkloadReader() = default;

  TraceSource source_;
  bool generated_ = false;
  GeneratorOptions generator_;  // with --generate
  Catalog catalog_;
  TraceFormat format_ = TraceFormat::kInvocations;
  GpuType gpu_;
};

}  // namespace gshare::cli
