// FunctionSpec: one tenant's inference function, as the catalog describes it.
//
// Value type. Latencies are execution times on a GPU, without queueing or restore. A spec may
// give batch-1 latency for a reference GPU type only; ResolveFunction turns it into the table the
// scheduler uses for one concrete GPU type.
//
// A spec that a live node can run also says how to start the function as a process (one process
// per instance): a `command` or a bundled `runtime`, its environment, working folder, model files
// and per-request timeout. A simulation-only spec has none of these. The catalog loader
// (catalog.h) is the one validator of every field; the limits it enforces are defined here.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/model/gpu_type.h"
#include "gshare/model/switch_mechanism.h"
#include "gshare/tensor/tensor_spec.h"

namespace gshare {

// Execution latency by batch size on one GPU type. Batch sizes not listed are interpolated.
struct BatchLatency {
  std::map<int, Duration> by_batch;  // batch size -> latency; batch 1 is always present
};

struct FunctionSpec {
  std::string name;                         // unique in a catalog
  std::string tenant;                       // the owner; a tenant sees only its own functions
  std::string model;                        // the model it serves (informational: "resnet50")
  std::uint64_t model_bytes = 0;            // bytes copied onto the GPU on a restore
  std::uint64_t gpu_memory_bytes = 0;       // GPU memory held while resident (>= model_bytes)
  std::string reference_gpu = "a100-40gb";  // the type `exec_latency` refers to when it is scalar
  std::map<std::string, BatchLatency> exec_latency;  // by GPU type name
  std::optional<Duration> slo;           // latency target; default: slo_factor x p90 execution
  std::optional<double> slo_factor;      // without slo: the SLO is this x p90 execution (1.5)
  int max_batch = 1;                     // largest batch the function accepts
  std::uint64_t batch_memory_bytes = 0;  // extra GPU memory per request beyond the first in a batch
  // Instances (processes) of the function: kept warm at least, and at most (0: no bound). A
  // second slice of the function on another GPU needs a second instance.
  int min_instances = 0;
  int max_instances = 0;

  // How a live node starts an instance. Exactly one of `command` and `runtime` for a live
  // function; neither for a simulation-only one, which then has none of the fields below either.
  // The loader stores paths absolute and lexically normal (relative ones are resolved against
  // the catalog file's folder); it does not check that they exist. A program without '/' is
  // looked up as execvp does, a relative one from working_dir; no shell is involved.
  std::vector<std::string> command;        // argv: the program, then its arguments; no shell
  std::string runtime;                     // a bundled runtime (kBundledRuntimes)
  std::map<std::string, std::string> env;  // added to the instance's environment
  std::string working_dir;                 // absolute; empty: the node's choice
  std::vector<std::string> model_files;    // absolute paths the function reads its model from
  // Threads one instance computes with (the pytorch runtime's intra-op threads), 1 to
  // kMaxRuntimeThreads.
  int threads = 1;
  // How a node on CUDA GPUs switches its instances (`switch:`): the allocator shim preloaded into
  // its program (the default), or the driver's process checkpoint API. A node of emulated GPUs
  // switches every instance through the function library (shim) and refuses `checkpoint`.
  SwitchMechanism switch_mechanism = SwitchMechanism::kShim;
  std::optional<Duration> timeout;  // one request's run; unset: kDefaultRequestTimeout
  // Host memory one instance may use (its cgroup's memory.max, where the node has cgroups); unset:
  // no bound of its own. Between kMinHostMemory and kMaxHostMemory.
  std::optional<std::uint64_t> host_memory_bytes;
  // The model's tensors (its `inputs:` and `outputs:`), which the front checks requests against
  // and the metadata endpoint describes. Empty: the function's own metadata at its readiness,
  // where it gives some (CheckTensorSpecs holds for both).
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;

  // Whether a live node can run this function (it has a command or a runtime).
  bool IsLive() const { return !command.empty() || !runtime.empty(); }
  Duration RequestTimeout() const;
};

// The example runtimes shipped with gshare that a spec may name as `runtime`: the node knows
// where their programs and model files are (examples/).
// The example runtimes (mlp, cnn, echo: gshare-function) and the tenants' own models' runtimes
// (pytorch: a TorchScript file, the one model file; python: a handler, the first model file;
// both with the tensors their spec declares).
inline constexpr std::array<std::string_view, 5> kBundledRuntimes = {"mlp", "cnn", "echo",
                                                                     "pytorch", "python"};
// Whether `runtime` runs the tenant's own model (code: TorchScript or Python).
inline bool IsTenantCodeRuntime(std::string_view runtime) {
  return runtime == "pytorch" || runtime == "python";
}
inline constexpr int kMaxRuntimeThreads = 64;

// Per-request run timeout when a spec gives none, and the largest one it may give. The default
// follows Knative's and OpenFaaS's habit of tens of seconds for a synchronous call.
inline constexpr Duration kDefaultRequestTimeout = std::chrono::seconds(30);
inline constexpr Duration kMaxRequestTimeout = std::chrono::hours(1);
inline constexpr std::uint64_t kMinHostMemory = 16ULL << 20;
inline constexpr std::uint64_t kMaxHostMemory = 1ULL << 40;

// Limits on the process fields: the lengths of strings in bytes, and the number of items.
inline constexpr std::size_t kMaxNameBytes = 256;       // name, tenant, model, runtime
inline constexpr std::size_t kMaxPathBytes = 4096;      // working_dir, model_files (PATH_MAX)
inline constexpr std::size_t kMaxArgumentBytes = 4096;  // one command argument
inline constexpr std::size_t kMaxEnvNameBytes = 256;
inline constexpr std::size_t kMaxEnvValueBytes = 32768;
inline constexpr std::size_t kMaxCommandArguments = 256;  // program included
inline constexpr std::size_t kMaxEnvEntries = 256;
inline constexpr std::size_t kMaxModelFiles = 256;

// Environment names the node sets itself (GSHARE_SOCKET, ...): a spec may not set them.
inline constexpr std::string_view kReservedEnvPrefix = "GSHARE_";

// The largest batch a function may declare (max_batch): a latency table is kept per batch size.
inline constexpr int kMaxBatch = 4096;

// The most instances a function may ask for, as min_instances or max_instances.
inline constexpr int kMaxInstancesPerFunction = 10000;

// A function ready for one GPU type: latency by batch size 1..max_batch, and its SLO.
struct ResolvedFunction {
  std::string name;
  std::string tenant;
  std::uint64_t model_bytes = 0;
  std::uint64_t gpu_memory_bytes = 0;
  std::vector<Duration> exec_by_batch;  // index b - 1: latency of a batch of b
  Duration slo{};
  int max_batch = 1;
  std::uint64_t batch_memory_bytes = 0;  // extra GPU memory per request beyond the first
  int min_instances = 0;                 // instances kept warm
  int max_instances = 0;                 // 0: no bound

  // GPU memory a batch of `batch` needs: the slice grows with the batch.
  std::uint64_t MemoryForBatch(int batch) const {
    return gpu_memory_bytes +
           batch_memory_bytes * static_cast<std::uint64_t>(batch < 1 ? 0 : batch - 1);
  }

  Duration ExecLatency(int batch) const {
    const auto i = static_cast<std::size_t>(batch < 1 ? 1 : batch) - 1;
    return exec_by_batch[i < exec_by_batch.size() ? i : exec_by_batch.size() - 1];
  }
};

// The paper's default SLO: 1.5 x the p90 execution latency.
inline constexpr double kDefaultSloFactor = 1.5;

// Resolves `spec` for `gpu`. Latency comes from the spec's entry for this GPU type, else from its
// reference type scaled by gpu.relative_latency / reference.relative_latency. Batch sizes without
// a figure are scaled from batch 1 with gpu.BatchScale. The SLO is the spec's, else its
// slo_factor (kDefaultSloFactor when unset) x `p90_exec` when given (the p90 of observed
// durations), else x batch-1 latency. Errors: no latency for this type or its reference type;
// gpu_memory < model size.
Result<ResolvedFunction> ResolveFunction(const FunctionSpec& spec, const GpuType& gpu,
                                         const std::vector<GpuType>& known_types,
                                         std::optional<Duration> p90_exec = std::nullopt);

}  // namespace gshare
