#include "gshare/node/launch_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <utility>

#include <algorithm>

#include "gshare/model/catalog.h"

namespace gshare {

Result<FunctionLaunch> PlanLaunch(const FunctionSpec& spec, const GpuType& gpu,
                                  const LaunchPlanOptions& options) {
  FunctionLaunch launch;
  auto resolved = ResolveFunction(spec, gpu, BuiltinGpuTypes());
  if (!resolved.ok()) return resolved.status().WithContext(fmt::format("function '{}'", spec.name));
  launch.function = std::move(resolved).value();
  launch.function.min_instances = std::max(options.min_instances, launch.function.min_instances);
  if (launch.function.MemoryForBatch(1) > gpu.memory_bytes) {
    return InvalidArgument(fmt::format(
        "function '{}': gpu_memory {} is more than a GPU of this node has ({})", spec.name,
        FormatBytes(launch.function.gpu_memory_bytes), FormatBytes(gpu.memory_bytes)));
  }
  InstanceCommand& command = launch.command;
  if (!spec.command.empty()) {
    command.argv = spec.command;
    command.model = spec.model.empty() ? spec.name : spec.model;
  } else if (IsTenantCodeRuntime(spec.runtime)) {
    // The tenant's TorchScript, or its handler, with the tensors its spec declares (the parser
    // checked them), served under the name the node's requests use.
    command.model = spec.model.empty() ? spec.name : spec.model;
    const bool pytorch = spec.runtime == "pytorch";
    command.argv = {options.python,
                    PythonRuntimeProgram(options.function_program, spec.runtime).string(),
                    pytorch ? "--model-file" : "--handler",
                    spec.model_files.front(),
                    "--name",
                    command.model,
                    "--max-batch",
                    std::to_string(spec.max_batch),
                    "--threads",
                    std::to_string(spec.threads),
                    "--device",
                    options.cuda_gpus ? "cuda" : "emulated"};
    for (const auto& [flag, tensors] :
         {std::pair{"--input", &spec.inputs}, std::pair{"--output", &spec.outputs}}) {
      for (const TensorSpec& tensor : *tensors) {
        command.argv.push_back(flag);
        // DATATYPE:dims:name: it starts with a letter (never read as an option), and the name,
        // last, may hold any character.
        command.argv.push_back(fmt::format("{}:{}:{}", DataTypeName(tensor.datatype),
                                           fmt::join(tensor.shape, ","), tensor.name));
      }
    }
  } else if (!spec.runtime.empty()) {
    // Without model files a bundled runtime runs its built-in weights (from the fixed seed).
    command.argv = {options.function_program.string(), "--model", spec.runtime};
    if (spec.runtime != "echo" && !spec.model_files.empty()) {
      command.argv.push_back("--weights");
      command.argv.push_back(spec.model_files.front());
    }
    command.model = spec.runtime;
  } else {
    return InvalidArgument(fmt::format(
        "function '{}' has neither runtime nor command: it can be simulated, not served",
        spec.name));
  }
  command.env = spec.env;
  command.working_dir = spec.working_dir;
  if (spec.command.empty()) {
    // A runtime, run in the sandbox where the node has one (the admin's own command is not):
    // what it reads is shown, read-only.
    command.sandboxed = true;
    auto show = [&command](const std::filesystem::path& path) {
      std::error_code error;
      if (path.empty() || !std::filesystem::exists(path, error)) return;
      const std::string text = path.lexically_normal().string();
      if (std::find(command.sandbox_read_only.begin(), command.sandbox_read_only.end(), text) ==
          command.sandbox_read_only.end()) {
        command.sandbox_read_only.push_back(text);
      }
    };
    show(options.function_program.parent_path());  // gshare-function, libgshare-fn.so, python/
    show(options.model_folder);
    for (const std::string& file : spec.model_files)
      show(std::filesystem::path(file).parent_path());
    show(spec.working_dir);
    if (IsTenantCodeRuntime(spec.runtime) && !options.python.empty() &&
        options.python.front() == '/') {
      // An interpreter outside /usr: its own bin/ and lib/ (a virtual environment's, by the path
      // given, and its base interpreter's, by the symlink's end), never the folders above them.
      const std::filesystem::path given(options.python);
      std::error_code error;
      const auto real = std::filesystem::canonical(given, error);
      for (const auto& prefix :
           {given.parent_path().parent_path(),
            error ? std::filesystem::path() : real.parent_path().parent_path()}) {
        if (prefix.empty() || prefix == "/usr" || prefix == "/" ||
            prefix.string().rfind("/usr/", 0) == 0) {
          continue;
        }
        for (const char* part : {"bin", "lib", "lib64"}) show(prefix / part);
      }
    }
  }
  if (spec.runtime == "python" && command.working_dir.empty()) {
    // The handler reads the files beside it by their names.
    command.working_dir = std::filesystem::path(spec.model_files.front()).parent_path().string();
  }
  command.name = spec.name;
  command.tenant = spec.tenant;
  command.memory_max_bytes = spec.host_memory_bytes;
  // Tensors the spec declares are the model's; otherwise the function's own metadata says.
  command.read_metadata = spec.inputs.empty() && spec.outputs.empty();
  command.batched = spec.max_batch > 1;
  launch.run_timeout = spec.RequestTimeout();
  launch.mechanism = spec.switch_mechanism;
  return launch;
}

std::filesystem::path PythonRuntimeProgram(const std::filesystem::path& function_program,
                                           std::string_view runtime) {
  return function_program.parent_path() / "python" / "gshare_runtime" /
         (std::string(runtime) + "_function.py");
}

}  // namespace gshare
