// gshare-optgap: `gshare optgap`, a program of its own beside gshare, so that gshare (and the
// server it runs) links no exact solver: `gshare optgap ARGS` runs `gshare-optgap ARGS`. Built
// only with the exact solver (GSHARE_BUILD_EXACT).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "gshare/cli/commands.h"
#include "gshare/common/log.h"

int main(int argc, char** argv) {
  CLI::App app{"gshare: the optimality gap of the online policy (the exact solver, COIN-OR CBC)"};
  app.name("gshare");
  app.require_subcommand(1);
  gshare::cli::CommandContext context;
  gshare::cli::AddOptGapCommand(app, context);
  // Parsed as `gshare optgap ARGS`: its help and its errors read as gshare's.
  std::vector<std::string> args;
  args.reserve(static_cast<std::size_t>(argc));
  for (int i = argc - 1; i >= 1; --i) args.emplace_back(argv[i]);
  args.emplace_back("optgap");
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gshare optgap: %s\n", e.what());
    return 1;
  }
  return context.exit_code;
}
