// gshare: the command line. Each subcommand lives in its own file (commands.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "gshare/cli/commands.h"
#include "gshare/common/log.h"

int main(int argc, char** argv) {
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
  gshare::cli::AddOptGapCommand(app, context);
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
