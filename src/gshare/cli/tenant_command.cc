// gshare tenant: add, list and remove the tenants of a `gshare serve` data directory.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <csignal>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "gshare/cli/commands.h"
#include "gshare/serve/api_keys.h"
#include "gshare/serve/registry.h"

namespace gshare::cli {
namespace {

struct TenantFlags {
  std::string name;
  std::string data_dir;
};

// Bad input (a malformed name) is status 2, as everywhere in gshare; a refused operation (a
// taken or unknown name, a secret with a loose mode, a locked database) is 1; a bug is 3.
int Fail(const Status& status) {
  std::fprintf(stderr, "gshare tenant: %s\n", status.ToString().c_str());
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      return 2;
    case StatusCode::kInternal:
      return 3;
    default:
      return 1;
  }
}

// list and remove read an existing data directory; they do not create one.
Status RequireDataDir(const std::string& dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return NotFound(fmt::format("{}: no such data directory", dir));
  }
  return Status::Ok();
}

int RunAdd(const TenantFlags& flags) {
  if (Status valid = serve::ValidateTenantName(flags.name); !valid.ok()) return Fail(valid);
  auto registry = serve::Registry::Open(flags.data_dir);
  if (!registry.ok()) return Fail(registry.status());
  auto secret = serve::ServerSecret::LoadOrCreate(flags.data_dir);
  if (!secret.ok()) return Fail(secret.status());
  auto keys = serve::TenantKeys::Open(**registry, std::move(secret).value());
  if (!keys.ok()) return Fail(keys.status());
  auto key = (*keys)->AddTenant(flags.name);
  if (!key.ok()) return Fail(key.status());
  // The key alone on stdout, so that a script can take it; it is stored nowhere. A key that could
  // not be written is a tenant nobody can use: it is removed again.
  std::signal(SIGPIPE, SIG_IGN);  // a reader gone is an error to handle here, not a kill
  std::printf("%s\n", key->c_str());
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const Status removed = (*keys)->RemoveTenant(flags.name);
    return Fail(IoError(fmt::format(
        "could not write the new key of tenant '{}' to standard output; the tenant was {}",
        flags.name, removed.ok() ? "removed again" : "kept: " + removed.ToString())));
  }
  std::fprintf(stderr,
               "gshare tenant: added tenant '%s'; its API key is printed above and only now\n",
               flags.name.c_str());
  return 0;
}

std::string FormatUnixMs(std::int64_t unix_ms) {
  const std::chrono::sys_time<std::chrono::seconds> time{std::chrono::seconds(unix_ms / 1000)};
  return fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", time);
}

int RunList(const TenantFlags& flags) {
  if (Status present = RequireDataDir(flags.data_dir); !present.ok()) return Fail(present);
  auto registry = serve::Registry::Open(flags.data_dir);
  if (!registry.ok()) return Fail(registry.status());
  auto tenants = (*registry)->ListTenants();
  if (!tenants.ok()) return Fail(tenants.status());
  std::printf("%-32s %9s  %s\n", "tenant", "functions", "created");
  for (const auto& tenant : *tenants) {
    std::printf("%-32s %9lld  %s\n", tenant.name.c_str(),
                static_cast<long long>(tenant.function_count),
                FormatUnixMs(tenant.created_unix_ms).c_str());
  }
  return 0;
}

int RunRemove(const TenantFlags& flags) {
  if (Status present = RequireDataDir(flags.data_dir); !present.ok()) return Fail(present);
  auto registry = serve::Registry::Open(flags.data_dir);
  if (!registry.ok()) return Fail(registry.status());
  if (Status removed = (*registry)->RemoveTenant(flags.name); !removed.ok()) return Fail(removed);
  std::printf("removed tenant %s and its functions\n", flags.name.c_str());
  return 0;
}

}  // namespace

void AddTenantCommand(CLI::App& app, CommandContext& context) {
  CLI::App* cmd =
      app.add_subcommand("tenant", "Add, list and remove the tenants of a gshare serve data dir");
  cmd->require_subcommand(1);
  const auto data_dir_help = "The data directory of gshare serve (docs/serve.md)";

  auto add = std::make_shared<TenantFlags>();
  CLI::App* add_cmd = cmd->add_subcommand(
      "add", "Add a tenant and print its new API key (shown this once; only its hash is kept)");
  add_cmd->add_option("name", add->name, "Tenant name: letters, digits, '_', '-', '.'")->required();
  add_cmd->add_option("--data-dir", add->data_dir, data_dir_help)->required();
  add_cmd->callback([add, &context] { context.exit_code = RunAdd(*add); });

  auto list = std::make_shared<TenantFlags>();
  CLI::App* list_cmd = cmd->add_subcommand("list", "List the tenants and their function counts");
  list_cmd->add_option("--data-dir", list->data_dir, data_dir_help)->required();
  list_cmd->callback([list, &context] { context.exit_code = RunList(*list); });

  auto remove = std::make_shared<TenantFlags>();
  CLI::App* remove_cmd =
      cmd->add_subcommand("remove", "Remove a tenant and all its functions; its key stops working");
  remove_cmd->add_option("name", remove->name, "Tenant name")->required();
  remove_cmd->add_option("--data-dir", remove->data_dir, data_dir_help)->required();
  remove_cmd->callback([remove, &context] { context.exit_code = RunRemove(*remove); });
}

}  // namespace gshare::cli
