// gshare bench runtime: what the pytorch runtime adds to a TorchScript model's call, and what its
// restore costs, measured in one run (docs/runtimes.md, "Measured").
//
//   gshare bench runtime --model-file F --input-shape 1,3,224,224 --output-shape 1,1000
//                        [--threads 1] [--requests 50] [--repetitions 11] [--python python3]
//                        [--emulated 2x16Gi] [--link-bandwidth 12GB/s] [--json]
//
// The pytorch runtime runs the model as a function process on GPU 0 of an emulated node
// (measure/function_bench.h): --repetitions checkpoint and restore rounds, each answer compared
// with the first, then --requests inferences one after another on the function's socket, in the
// binary tensor form the node uses, in blocks of a tenth. Before each block the same model is
// called in-process as many times, in a Python of its own (python/gshare_runtime/
// inprocess_bench.py beside gshare: torch.jit.load, eval, inference_mode, --threads; three
// untimed calls first), so that both sides share the machine's load. The figures: both medians
// and their difference (the runtime's cost: the protocol, the copy of the tensors, the compute
// grant), the median restore against 1.2 x bytes / link + 1 ms, and the median of the request that
// follows each round's restores.
//
// Exit status: 0 when both sides ran and every answer matched, 1 otherwise, 2 for bad usage.
#include <fmt/format.h>
#include <stdio.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/program_folder.h"
#include "gshare/common/slice_granularity.h"
#include "gshare/common/units.h"
#include "gshare/device/device_registry.h"
#include "gshare/measure/function_bench.h"
#include "gshare/measure/function_client.h"
#include "gshare/measure/stats.h"
#include "gshare/node/launch_plan.h"

namespace gshare::cli {
namespace {

struct BenchRuntimeFlags {
  std::string model_file;
  std::string input_shape;
  std::string output_shape;
  int threads = 1;
  int requests = 50;
  int repetitions = 11;
  std::string python = "python3";
  std::string emulated = "2x16Gi";
  std::string link_bandwidth = "12GB/s";
  std::string slice;  // empty: sized from the model file, as a spec for it would be
  bool fresh_slices = false;
  bool json = false;
};

// `text` quoted for a POSIX shell.
std::string ShellQuoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// Runs inprocess_bench.py for `requests` calls and reads its JSON line: the calls' times, each
// checked finite and positive.
Result<std::vector<double>> RunInProcess(const std::string& python,
                                         const std::filesystem::path& script,
                                         const BenchRuntimeFlags& flags, int requests) {
  const std::string command =
      fmt::format("{} {} --model-file {} --input-shape {} --threads {} --requests {}",
                  ShellQuoted(python), ShellQuoted(script.string()), ShellQuoted(flags.model_file),
                  ShellQuoted(flags.input_shape), flags.threads, requests);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return IoError("cannot start the in-process benchmark");
  std::string out;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    out += buffer;
    if (out.size() > (1 << 20)) break;
  }
  const int status = ::pclose(pipe);
  if (status != 0) {
    return Internal(
        fmt::format("the in-process benchmark failed (status {}): {}", status, out.substr(0, 400)));
  }
  const nlohmann::json parsed = nlohmann::json::parse(out, nullptr, false);
  if (!parsed.is_object() || !parsed.contains("times_ms") || !parsed["times_ms"].is_array() ||
      parsed["times_ms"].size() != static_cast<std::size_t>(requests)) {
    return Internal("the in-process benchmark printed no times: " + out.substr(0, 400));
  }
  std::vector<double> times;
  for (const nlohmann::json& value : parsed["times_ms"]) {
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0 ||
        value.get<double>() > 3.6e6) {
      return Internal("the in-process benchmark printed a time out of bounds: " +
                      out.substr(0, 400));
    }
    times.push_back(value.get<double>());
  }
  return times;
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "gshare bench runtime: %s\n", message.c_str());
  return 2;
}

// "FP32:-1,d1,d2:name" (the runtime's form, node/launch_plan.cc) from a shape whose first
// dimension is the batch.
std::string TensorArgument(std::string_view name, const std::vector<std::int64_t>& shape) {
  std::string text = "FP32:-1";
  for (std::size_t i = 1; i < shape.size(); ++i) text += fmt::format(",{}", shape[i]);
  return fmt::format("{}:{}", text, name);
}

int RunBenchRuntime(const BenchRuntimeFlags& flags) {
  if (!std::filesystem::is_regular_file(flags.model_file)) {
    return Usage(fmt::format("--model-file {} is not a file", flags.model_file));
  }
  auto input_shape = measure::ParseShape(flags.input_shape);
  if (!input_shape.ok()) return Usage("--input-shape: " + input_shape.status().message());
  auto output_shape = measure::ParseShape(flags.output_shape);
  if (!output_shape.ok()) return Usage("--output-shape: " + output_shape.status().message());
  if (input_shape->empty() || output_shape->empty() || input_shape->front() < 1 ||
      output_shape->front() != input_shape->front()) {
    return Usage("the shapes' first dimension is the batch, the same in both");
  }
  auto python = FindProgram(flags.python);
  if (!python.ok()) return Usage("--python: " + python.status().message());
  auto folder = ProgramFolder();
  if (!folder.ok()) return Usage(folder.status().ToString());
  const std::filesystem::path runtime = *folder / "python" / "gshare_runtime";
  const std::filesystem::path model_file = std::filesystem::absolute(flags.model_file);

  measure::FunctionBenchOptions options;
  options.mechanism = SwitchMechanism::kShim;
  options.model = "bench";
  options.input_shape = *input_shape;
  options.repetitions = flags.repetitions;
  options.requests = flags.requests;
  options.request_block = std::max(1, flags.requests / 10);
  std::vector<double> in_process_times;
  Status in_process_status = Status::Ok();
  options.before_block = [&] {
    if (!in_process_status.ok()) return;
    auto times =
        RunInProcess(*python, runtime / "inprocess_bench.py", flags, options.request_block);
    if (!times.ok()) {
      in_process_status = times.status();
      return;
    }
    in_process_times.insert(in_process_times.end(), times->begin(), times->end());
  };
  // The function's slice: --slice, or what the live node would give a spec for this model: the
  // main job's catalog asks 1.25 x the parameters + 32 MiB (scripts/real-models.py), and the
  // node hands out slices in its granularity's steps.
  if (!flags.slice.empty()) {
    auto given = ParseBytes(flags.slice);
    if (!given.ok() || *given == 0) {
      return Usage(fmt::format("--slice {}: a size of bytes, e.g. 256Mi", flags.slice));
    }
    options.slice_bytes = *given;
  } else {
    std::error_code error;
    const auto file_bytes = std::filesystem::file_size(model_file, error);
    const std::uint64_t step = SliceGranularity().bytes();
    const std::uint64_t wanted = error ? 4 * kGiB : (file_bytes * 5 / 4 / kMiB + 32) * kMiB;
    options.slice_bytes = (wanted + step - 1) / step * step;
  }
  options.prepared_slices = !flags.fresh_slices;
  options.program = {
      *python,        PythonRuntimeProgram(*folder / "gshare-function", "pytorch").string(),
      "--model-file", model_file.string(),
      "--name",       "bench",
      "--max-batch",  std::to_string(input_shape->front()),
      "--threads",    std::to_string(flags.threads),
      "--input",      TensorArgument("input", *input_shape),
      "--output",     TensorArgument("output", *output_shape)};
  auto devices = MakeDeviceOptions("emulated", flags.emulated, flags.link_bandwidth);
  if (!devices.ok()) return Usage(devices.status().ToString());
  const double link = devices->emulated.front().link_bytes_per_second;
  options.devices = std::move(devices).value();
  options.environment = ProcessEnvironment();
  measure::FunctionBenchReport report = measure::RunFunctionBench(options);
  if (!in_process_status.ok()) {
    report.status = "fail";
    report.why = "the in-process side: " + in_process_status.ToString();
  }
  const double in_process_p50_ms = measure::Median(in_process_times);
  const double in_process_p90_ms = measure::Percentile(in_process_times, 90);
  const double overhead_ms = report.infer_p50_ms - in_process_p50_ms;
  const double bound_ms =
      link > 0 ? 1.2 * static_cast<double>(report.allocated_bytes) / link * 1e3 + 1.0 : 0.0;
  if (flags.json) {
    const nlohmann::json out = {{"status", report.status},
                                {"why", report.why},
                                {"threads", flags.threads},
                                {"requests", report.requests},
                                {"in_process_p50_ms", in_process_p50_ms},
                                {"in_process_p90_ms", in_process_p90_ms},
                                {"function_p50_ms", report.infer_p50_ms},
                                {"function_p90_ms", report.infer_p90_ms},
                                {"after_restore_ms", report.after_restore_infer_ms},
                                {"overhead_p50_ms", overhead_ms},
                                {"device_bytes", report.allocated_bytes},
                                {"restore_ms", report.restore_ms},
                                {"restore_bound_ms", bound_ms},
                                {"slice_bytes", report.slice_bytes},
                                {"prepared_restores", report.prepared_restores},
                                {"rounds", report.rounds},
                                {"outputs_identical", report.outputs_identical}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("model %s, %d thread(s), batch %lld, %s: %s%s%s\n", flags.model_file.c_str(),
                flags.threads, static_cast<long long>(input_shape->front()), report.device.c_str(),
                report.status.c_str(), report.why.empty() ? "" : ": ", report.why.c_str());
    std::printf("  in-process    p50 %8.3f ms  p90 %8.3f ms\n", in_process_p50_ms,
                in_process_p90_ms);
    if (report.requests > 0) {
      std::printf("  the function  p50 %8.3f ms  p90 %8.3f ms  (%d requests)\n",
                  report.infer_p50_ms, report.infer_p90_ms, report.requests);
      std::printf("  the runtime's cost at p50: %.3f ms\n", overhead_ms);
    }
    if (report.rounds > 0) {
      std::printf(
          "  restore of %s in device memory into a %s slice (%d of %d prepared ahead): %.3f ms "
          "median of %d (1.2 x bytes / link + 1 ms: %.3f ms); outputs identical after every "
          "restore: %s\n",
          FormatBytes(report.allocated_bytes).c_str(), FormatBytes(report.slice_bytes).c_str(),
          report.prepared_restores, report.rounds, report.restore_ms, report.rounds, bound_ms,
          report.outputs_identical ? "yes" : "NO");
      std::printf("  the first request after a restore: %.3f ms median of %d\n",
                  report.after_restore_infer_ms, report.rounds);
    }
  }
  return report.status == "pass" ? 0 : 1;
}

}  // namespace

void AddBenchRuntimeCommand(CLI::App& bench, CommandContext& context) {
  auto flags = std::make_shared<BenchRuntimeFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "runtime",
      "A TorchScript model through the pytorch runtime against the same model called in-process, "
      "and its restore");
  cmd->add_option("--model-file", flags->model_file, "The TorchScript file")->required();
  cmd->add_option("--input-shape", flags->input_shape,
                  "The FP32 input's shape, the batch first (\"1,3,224,224\")")
      ->required();
  cmd->add_option("--output-shape", flags->output_shape,
                  "The FP32 output's shape, the batch first (\"1,1000\")")
      ->required();
  cmd->add_option("--threads", flags->threads, "Intra-op threads, on both sides")
      ->check(WholeIn(1, 64))
      ->capture_default_str();
  cmd->add_option("--requests", flags->requests, "Timed calls on each side")
      ->check(WholeIn(1, 100'000))
      ->capture_default_str();
  cmd->add_option("--repetitions", flags->repetitions, "Checkpoint and restore rounds")
      ->check(WholeIn(1, 1000))
      ->capture_default_str();
  cmd->add_option("--python", flags->python, "A Python with PyTorch")->capture_default_str();
  cmd->add_option("--emulated", flags->emulated, "Emulated GPUs (\"2x16Gi\")")
      ->capture_default_str();
  cmd->add_option("--link-bandwidth", flags->link_bandwidth, "Each emulated GPU's link")
      ->capture_default_str();
  cmd->add_option("--slice", flags->slice,
                  "The function's GPU slice (default: 1.25 x the model file + 32Mi, rounded up "
                  "to the node's slice steps)");
  cmd->add_flag("--fresh-slices", flags->fresh_slices,
                "Restore into fresh segments, paying their page faults (default: slices prepared "
                "ahead within the live node's budget, where the preparer has one ready)");
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->callback([flags, &context] { context.exit_code = RunBenchRuntime(*flags); });
}

}  // namespace gshare::cli
