// gshare: the command line. Each subcommand lives in its own file (commands.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/cli/program_folder.h"
#include "gshare/common/heap_reuse.h"
#include "gshare/common/log.h"

namespace {

// `gshare optgap ARGS`: runs gshare-optgap ARGS, the program beside gshare that links the exact
// solver (gshare itself does not). Returns only when it cannot be run.
int RunOptGap(const std::vector<std::string>& args) {
  auto folder = gshare::ProgramFolder();
  if (!folder.ok()) {
    std::fprintf(stderr, "gshare optgap: %s\n", folder.status().ToString().c_str());
    return 1;
  }
  const std::string program = (*folder / "gshare-optgap").string();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execv(program.c_str(), argv.data());
  std::fprintf(stderr,
               "gshare optgap: cannot run %s: %s (it is built with the exact solver: cmake "
               "--build build --target gshare-optgap)\n",
               program.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Request bodies are faulted in once, not on every request (common/heap_reuse.h).
  gshare::KeepFreedMemoryForReuse();
  CLI::App app{
      "gshare: fine-grained GPU sharing for multi-tenant serverless inference.\n"
      "Simulate a trace under each sharing policy, generate workloads, and run the node."};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();

  gshare::cli::CommandContext context;
  gshare::cli::AddSimCommand(app, context);
  gshare::cli::AddCompareCommand(app, context);
  gshare::cli::AddWorkloadCommand(app, context);
#if defined(GSHARE_HAVE_EXACT)
  // A program of its own (gshare-optgap), so that gshare links no solver: every argument after
  // `optgap`, --help included, goes to it.
  CLI::App* optgap = app.add_subcommand(
      "optgap",
      "Solve small instances exactly (MILP, CBC) and online; report the optimality gap "
      "(gshare-optgap)");
  optgap->prefix_command();
  optgap->set_help_flag();
  optgap->callback([optgap, &context] { context.exit_code = RunOptGap(optgap->remaining()); });
#else
  app.footer("gshare optgap is not in this build: it needs the exact solver (GSHARE_BUILD_EXACT).");
#endif
  gshare::cli::AddCatalogCommand(app, context);
  gshare::cli::AddNodeCommands(app, context);
  gshare::cli::AddExamplesCommand(app, context);
  gshare::cli::AddTenantCommand(app, context);
  gshare::cli::AddServeCommand(app, context);
  gshare::cli::AddReplayCommand(app, context);
  CLI::App* bench =
      app.add_subcommand("bench", "Micro-benchmarks that print ratios measured in one run");
  bench->require_subcommand(1);
  gshare::cli::AddBenchRestoreCommand(*bench, context);
  gshare::cli::AddBenchSwitchCommand(*bench, context);
  gshare::cli::AddBenchTimesliceCommand(*bench, context);
  gshare::cli::AddBenchFrontCommand(*bench, context);
  gshare::cli::AddBenchFunctionCommand(*bench, context);
  gshare::cli::AddBenchRuntimeCommand(*bench, context);
  // The top level takes no positionals, so a word that names no subcommand is an error at once,
  // before --help is looked at: `gshare optgap --help` fails where optgap is not built. Only the
  // top level is set; each subcommand parses its own arguments as before.
  app.positionals_at_end();

  app.parse_complete_callback([&] {
    if (!gshare::SetLogLevel(log_level)) {
      throw CLI::ValidationError("--log-level", "unknown level '" + log_level + "'");
    }
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end here with status 0; every malformed or missing flag is bad input,
    // status 2, as every other bad input is.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gshare: %s\n", e.what());
    return 1;
  }
  return context.exit_code;
}
