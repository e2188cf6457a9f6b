// PlanLaunch: the one place that turns a function spec into how the node runs it: the spec
// resolved for the node's GPUs, and the command its processes start with (a bundled runtime's
// program, or the spec's own command) with its environment, working folder and memory bound.
// `gshare serve` and `gshare node replay` both deploy through it. What the process then gets from
// the node (its control channel, device range, socket, identity, sandbox) is the process host's
// (node/process/instance_environment.h), the same for every command.
#pragma once

#include <filesystem>
#include <string>

#include "gshare/common/status.h"
#include "gshare/model/function_spec.h"
#include "gshare/model/gpu_type.h"
#include "gshare/node/live_node.h"

namespace gshare {

struct LaunchPlanOptions {
  // The bundled runtimes' program (gshare-function), for specs with `runtime:`; the Python
  // runtimes lie beside it, in python/gshare_runtime/ (runtime: pytorch).
  std::filesystem::path function_program;
  // The interpreter the Python runtimes run under (a program without '/' is looked up on PATH).
  std::string python = "python3";
  // The tenant's model folder, shown read-only in the sandbox of the function's processes when it
  // exists (with the runtime's programs, the model files' folders and the interpreter's prefix).
  std::filesystem::path model_folder{};
  // The node's GPUs are CUDA GPUs: the Python runtimes run their models on the process's own CUDA
  // device (--device cuda), not in the function library's emulated device memory.
  bool cuda_gpus = false;
  // Instances the node keeps warm at least (a deployed model stays loaded: 1); the spec's
  // min_instances when larger.
  int min_instances = 0;
};

// The program of a Python runtime (pytorch, python), beside `function_program`.
std::filesystem::path PythonRuntimeProgram(const std::filesystem::path& function_program,
                                           std::string_view runtime);

// InvalidArgument naming the function when it cannot run here: neither runtime nor command, a
// GPU memory larger than a GPU of the node, a spec that does not resolve for `gpu`.
Result<FunctionLaunch> PlanLaunch(const FunctionSpec& spec, const GpuType& gpu,
                                  const LaunchPlanOptions& options);

}  // namespace gshare
