// The subcommands of `gshare`. Each Add*Command registers one subcommand (its flags, help text and
// action) on the application; the action stores its exit code in the CommandContext.
#pragma once

#include <CLI/CLI.hpp>

namespace gshare::cli {

struct CommandContext {
  int exit_code = 0;
};

void AddSimCommand(CLI::App& app, CommandContext& context);       // gshare sim
void AddCompareCommand(CLI::App& app, CommandContext& context);   // gshare compare
void AddWorkloadCommand(CLI::App& app, CommandContext& context);  // gshare workload
void AddCatalogCommand(CLI::App& app, CommandContext& context);   // gshare catalog
void AddNodeCommands(CLI::App& app, CommandContext& context);     // gshare node ...
void AddExamplesCommand(CLI::App& app, CommandContext& context);  // gshare examples ...
void AddTenantCommand(CLI::App& app, CommandContext& context);    // gshare tenant ...
void AddServeCommand(CLI::App& app, CommandContext& context);     // gshare serve
void AddReplayCommand(CLI::App& app, CommandContext& context);    // gshare replay
// `node` is the group AddNodeCommands creates.
void AddNodeReplayCommand(CLI::App& node, CommandContext& context);  // gshare node replay
// Only in builds with the exact solver (GSHARE_BUILD_EXACT); main adds it on GSHARE_HAVE_EXACT.
void AddOptGapCommand(CLI::App& app, CommandContext& context);  // gshare optgap
// `bench` is the group created by main; each adds its benchmark under it.
void AddBenchRestoreCommand(CLI::App& bench, CommandContext& context);    // gshare bench restore
void AddBenchSwitchCommand(CLI::App& bench, CommandContext& context);     // gshare bench switch
void AddBenchTimesliceCommand(CLI::App& bench, CommandContext& context);  // gshare bench timeslice
void AddBenchFrontCommand(CLI::App& bench, CommandContext& context);      // gshare bench front
void AddBenchFunctionCommand(CLI::App& bench, CommandContext& context);   // gshare bench function
void AddBenchRuntimeCommand(CLI::App& bench, CommandContext& context);    // gshare bench runtime

}  // namespace gshare::cli
