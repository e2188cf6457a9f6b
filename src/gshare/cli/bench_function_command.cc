// gshare bench function: one function process, switched out and back by a switch driver, timed,
// with the GPU memory the driver reports and the function's answers compared.
//
//   gshare bench function [--device auto|cuda|emulated] [--mechanism shim|checkpoint]
//                         --model NAME [--input-shape 1,3,224,224] [--slice 4Gi]
//                         [--repetitions 3] [--ready-timeout 600] [--json] -- PROGRAM [ARGS...]
//
// PROGRAM is started as a function process on GPU 0 of a node (measure/function_bench.h says
// how), with the rest of this command's environment.
//   shim        (CUDA) with LD_PRELOAD of libgshare-cuda-shim.so from beside gshare: the function
//               runs unmodified; the node gives it a slice of --slice bytes and the shim keeps its
//               allocations there; checkpoint and restore move the bytes in use through the
//               node's restore engine. (Emulated GPUs: PROGRAM links the function library itself,
//               as gshare-function does, and nothing is preloaded.)
//   checkpoint  (CUDA) the driver's process checkpoint API on the function's pid.
// Once the function answers ready, one inference is the reference; then --repetitions rounds each
// checkpoint (forced: every byte copied; timed from the call to its completion), free the slice
// and let the device return cached memory to the driver, read the driver's free memory, restore
// onto a new slice (timed), checkpoint at once without forcing (the fast swap of an unchanged
// image, timed; not for the checkpoint API, which copies anyway), restore again and infer: the
// answer must be exactly the reference's.
//
// Exit status: 0 when every round passed, 1 when anything failed (the reason in "why"), 4 when the
// mechanism is unsupported here (the reason in "why"), 2 for bad usage.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/cli/flag_checks.h"
#include "gshare/cli/program_folder.h"
#include "gshare/common/units.h"
#include "gshare/device/device_registry.h"
#include "gshare/measure/function_bench.h"
#include "gshare/measure/function_client.h"
#include "gshare/node/switch/switch_factory.h"

namespace gshare::cli {
namespace {

constexpr int kExitUnsupported = 4;

struct BenchFunctionFlags {
  std::string device = "auto";
  std::string emulated = "2x16Gi";
  std::string mechanism = "shim";
  std::string model;
  std::string input_shape;
  std::string slice = "4Gi";
  bool slice_given = false;
  bool fresh_slices = false;
  int repetitions = 3;
  int ready_timeout_s = 600;
  bool json = false;
  std::vector<std::string> program;
};

void Print(const measure::FunctionBenchReport& r, bool json) {
  if (json) {
    const nlohmann::json out = {{"function", r.function},
                                {"mechanism", r.mechanism},
                                {"device", r.device},
                                {"status", r.status},
                                {"why", r.why},
                                {"rounds", r.rounds},
                                {"slice_bytes", r.slice_bytes},
                                {"allocated_bytes", r.allocated_bytes},
                                {"checkpoint_ms", r.checkpoint_ms},
                                {"fast_swap_ms", r.fast_swap_ms},
                                {"fast_swap_copied_bytes", r.fast_swap_copied_bytes},
                                {"fast_swap_compared_bytes", r.fast_swap_compared_bytes},
                                {"restore_ms", r.restore_ms},
                                {"restore_copy_ms", r.restore_copy_ms},
                                {"slice_alloc_ms", r.slice_alloc_ms},
                                {"after_restore_ms", r.after_restore_infer_ms},
                                {"prepared_restores", r.prepared_restores},
                                {"restore_gbps", r.restore_gbps},
                                {"free_before_start_bytes", r.free_before_start_bytes},
                                {"free_resident_bytes", r.free_resident_bytes},
                                {"free_after_checkpoint_bytes", r.free_after_checkpoint_bytes},
                                {"freed_bytes", r.freed_bytes},
                                {"context_bytes", r.context_bytes},
                                {"outputs_identical", r.outputs_identical}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("function %s, mechanism %s, on %s: %s%s%s\n", r.function.c_str(), r.mechanism.c_str(),
              r.device.c_str(), r.status.c_str(), r.why.empty() ? "" : ": ", r.why.c_str());
  if (r.rounds == 0) return;
  std::printf(
      "  rounds %d; allocated %s; checkpoint %.3f ms; restore %.3f ms (%.2f GB/s), of which "
      "%.3f ms moving bytes; %.3f ms handing out the slice before it (%d of %d slices prepared "
      "ahead)\n",
      r.rounds, FormatBytes(r.allocated_bytes).c_str(), r.checkpoint_ms, r.restore_ms,
      r.restore_gbps, r.restore_copy_ms, r.slice_alloc_ms, r.prepared_restores, r.rounds);
  std::printf(
      "  free GPU memory: %s before start, %s resident, %s after checkpoint: %s freed, %s left "
      "(the function's context and whatever it keeps)\n",
      FormatBytes(r.free_before_start_bytes).c_str(), FormatBytes(r.free_resident_bytes).c_str(),
      FormatBytes(r.free_after_checkpoint_bytes).c_str(), FormatBytes(r.freed_bytes).c_str(),
      FormatBytes(r.context_bytes).c_str());
  if (r.mechanism == "checkpoint") {
    std::printf("  fast swap: not measured (the checkpoint API copies everything)\n");
  } else {
    std::printf(
        "  fast swap (a checkpoint right after a restore, nothing run): %.3f ms, %s copied at "
        "most (%.1fx faster than the full checkpoint)\n",
        r.fast_swap_ms, FormatBytes(r.fast_swap_copied_bytes).c_str(),
        r.fast_swap_ms > 0 ? r.checkpoint_ms / r.fast_swap_ms : 0.0);
  }
  std::printf("  the first inference after a restore: %.3f ms (median)\n",
              r.after_restore_infer_ms);
  std::printf("  outputs identical after every restore: %s\n", r.outputs_identical ? "yes" : "NO");
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "gshare bench function: %s\n", message.c_str());
  return 2;
}

int RunBenchFunction(const BenchFunctionFlags& flags) {
  auto mechanism = ParseSwitchMechanism(flags.mechanism);
  if (!mechanism.ok()) return Usage(mechanism.status().message());
  if (flags.model.empty()) return Usage("--model NAME is required");
  if (flags.program.empty()) return Usage("give the function's program after --");
  if (flags.slice_given && *mechanism != SwitchMechanism::kShim) {
    return Usage(
        "--slice applies to the shim mechanism only (the checkpoint API's function allocates "
        "through the driver itself)");
  }
  measure::FunctionBenchOptions options;
  options.mechanism = *mechanism;
  options.model = flags.model;
  options.repetitions = flags.repetitions;
  options.ready_timeout = std::chrono::seconds(flags.ready_timeout_s);
  auto program = FindProgram(flags.program.front());
  if (!program.ok()) return Usage(program.status().ToString());
  options.program = flags.program;
  options.program.front() = *program;
  if (!flags.input_shape.empty()) {
    auto shape = measure::ParseShape(flags.input_shape);
    if (!shape.ok()) return Usage("--input-shape: " + shape.status().message());
    options.input_shape = *shape;
  }
  auto devices = MakeDeviceOptions(flags.device, flags.emulated, "0");
  if (!devices.ok()) return Usage(devices.status().ToString());
  options.devices = std::move(devices).value();
  auto slice_bytes = ParseBytes(flags.slice);
  constexpr std::uint64_t kMaxSlice = 64 * kGiB;
  if (!slice_bytes.ok() || *slice_bytes == 0 || *slice_bytes > kMaxSlice) {
    return Usage(fmt::format("--slice: a size of bytes up to {}", FormatBytes(kMaxSlice)));
  }
  options.slice_bytes = *slice_bytes;
  options.prepared_slices = !flags.fresh_slices;
  if (auto folder = ProgramFolder(); folder.ok()) {
    options.shim_library = *folder / kCudaShimLibrary;
  }
  options.environment = ProcessEnvironment();
  const measure::FunctionBenchReport report = measure::RunFunctionBench(options);
  if (!report.note.empty()) std::fprintf(stderr, "%s\n", report.note.c_str());
  Print(report, flags.json);
  if (report.status == "pass") return 0;
  return report.status == "unsupported" ? kExitUnsupported : 1;
}

}  // namespace

void AddBenchFunctionCommand(CLI::App& bench, CommandContext& context) {
  auto flags = std::make_shared<BenchFunctionFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "function",
      "Checkpoint and restore one function process by a switch mechanism, with the GPU memory "
      "freed and its answers compared");
  cmd->add_option("--device", flags->device, "auto, cuda or emulated")->capture_default_str();
  cmd->add_flag("--fresh-slices", flags->fresh_slices,
                "Emulated GPUs: restore into fresh segments, paying their page faults (default: "
                "slices prepared ahead within the live node's budget, where the preparer has one "
                "ready)");
  cmd->add_option("--emulated", flags->emulated, "Emulated GPUs (\"2x16Gi\")")
      ->capture_default_str();
  cmd->add_option("--mechanism", flags->mechanism,
                  "shim (the allocator shim; emulated GPUs: the function library) or checkpoint "
                  "(the driver's process checkpoint API)")
      ->capture_default_str();
  cmd->add_option("--model", flags->model, "The model name the function serves")->required();
  cmd->add_option("--input-shape", flags->input_shape,
                  "The FP32 input's shape (\"1,3,224,224\"); default: the model's metadata");
  CLI::Option* slice =
      cmd->add_option("--slice", flags->slice, "The function's GPU slice (the shim mechanism only)")
          ->capture_default_str();
  cmd->add_option("--repetitions", flags->repetitions, "Checkpoint and restore rounds")
      ->check(WholeIn(1, 100))
      ->capture_default_str();
  cmd->add_option("--ready-timeout", flags->ready_timeout_s,
                  "Seconds to wait for the function to load its model")
      ->check(WholeIn(1, 3600))
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->add_option("program", flags->program, "-- PROGRAM [ARGS...]: the function to run")
      ->required();
  cmd->callback([flags, slice, &context] {
    flags->slice_given = slice->count() > 0;
    context.exit_code = RunBenchFunction(*flags);
  });
}

}  // namespace gshare::cli
