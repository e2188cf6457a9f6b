// Registry: the persistent state of `gshare serve`, its tenants and each tenant's functions, in
// SQLite (DATA_DIR/gshare.db, WAL mode).
//
// A tenant has a unique name and the keyed hash of its API key (api_keys.h makes the hash; the
// key itself is never stored). A function lives in one tenant's namespace: its name is unique
// within that tenant, and its spec is one catalog entry (model/catalog.h), validated by the
// catalog's parser before anything is written and stored in the parser's canonical YAML, tenant
// included. A spec's `tenant`, where it names one, must be the namespace's tenant. Every
// operation names its tenant, and no operation on one tenant reads or changes another's
// functions.
//
// Errors: InvalidArgument for a malformed name or spec (nothing is written), AlreadyExists for a
// name taken within its scope, NotFound for an unknown tenant or function (an unknown function
// and another tenant's function get the same answer), Unavailable when the database stayed
// locked by another process past the busy timeout, Io for any other SQLite failure. Messages name
// the operation and the database file.
//
// Thread safety: every method may be called from any thread. The registry holds one SQLite
// connection and a mutex that serializes its operations (SQLite serializes writers anyway, and
// the registry is not on the request path). Several processes may open one database (the server
// and `gshare tenant` at once): SQLite's file locks order them, and a writer waits up to
// `busy_timeout` for another's transaction to end.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"

struct sqlite3;

namespace gshare::serve {

// The keyed hash of an API key (HMAC-SHA-256, api_keys.h).
inline constexpr std::size_t kKeyHashBytes = 32;
using KeyHash = std::array<std::uint8_t, kKeyHashBytes>;

// A tenant name: 1 to 64 characters of [A-Za-z0-9_.-], starting with a letter or a digit, so that
// it fits a URL path segment, a metric label and a log line as it is.
inline constexpr std::size_t kMaxTenantNameBytes = 64;
Status ValidateTenantName(std::string_view name);

struct TenantRecord {
  std::string name;
  KeyHash key_hash{};
  std::int64_t created_unix_ms = 0;
  std::int64_t function_count = 0;
  // The tenant's number, from 1: fixed while it exists and never given to another tenant, even
  // after its removal (a counter in the registry; tenants of a version-1 registry keep theirs).
  // Its function processes' uid is the server's first uid plus this.
  std::int64_t number = 0;
};

struct FunctionRecord {
  std::string tenant;
  std::string name;
  std::string spec_yaml;  // canonical YAML of one catalog entry (FunctionSpecToYaml)
  std::int64_t created_unix_ms = 0;
  std::int64_t updated_unix_ms = 0;
};

struct RegistryOptions {
  // How long an operation waits for another process's transaction before Unavailable.
  std::chrono::milliseconds busy_timeout{5000};
  // Wall time for the created and updated stamps, in milliseconds since the Unix epoch; the
  // system clock when empty.
  std::function<std::int64_t()> now_unix_ms;
};

class Registry {
 public:
  // Opens DATA_DIR/gshare.db, creating the data directory (EnsureDataDir) and the schema where
  // missing. FailedPrecondition for a database written by a newer gshare (a schema version this
  // build does not know).
  static Result<std::unique_ptr<Registry>> Open(const std::filesystem::path& data_dir,
                                                RegistryOptions options = {});
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Tenants.
  Status AddTenant(std::string_view name, const KeyHash& key_hash) EXCLUDES(mutex_);
  // Removes the tenant and all its functions in one transaction.
  Status RemoveTenant(std::string_view name) EXCLUDES(mutex_);
  // Replaces the tenant's key hash (key rotation).
  Status SetTenantKeyHash(std::string_view name, const KeyHash& key_hash) EXCLUDES(mutex_);
  Result<TenantRecord> GetTenant(std::string_view name) EXCLUDES(mutex_);
  // Every tenant, by name.
  Result<std::vector<TenantRecord>> ListTenants() EXCLUDES(mutex_);

  // Functions in `tenant`'s namespace. Create and Update take one catalog entry as YAML; Update
  // replaces the spec of the function `name`, which the spec must name.
  Result<FunctionRecord> CreateFunction(std::string_view tenant, std::string_view spec_yaml)
      EXCLUDES(mutex_);
  Result<FunctionRecord> GetFunction(std::string_view tenant, std::string_view name)
      EXCLUDES(mutex_);
  // The tenant's functions, by name; NotFound for an unknown tenant.
  Result<std::vector<FunctionRecord>> ListFunctions(std::string_view tenant) EXCLUDES(mutex_);
  Result<FunctionRecord> UpdateFunction(std::string_view tenant, std::string_view name,
                                        std::string_view spec_yaml) EXCLUDES(mutex_);
  Status DeleteFunction(std::string_view tenant, std::string_view name) EXCLUDES(mutex_);

  // SQLite's `PRAGMA data_version` on this registry's connection: it changes when another
  // connection (another process: `gshare tenant`) commits a change, never for this one's own.
  Result<std::int64_t> DataVersion() EXCLUDES(mutex_);

 private:
  struct CloseDatabase {
    void operator()(sqlite3* db) const;
  };
  using DatabasePtr = std::unique_ptr<sqlite3, CloseDatabase>;

  Registry(std::filesystem::path path, DatabasePtr db, RegistryOptions options);

  std::int64_t NowUnixMs() const;

  const std::filesystem::path path_;
  const RegistryOptions options_;
  Mutex mutex_;
  const DatabasePtr db_ PT_GUARDED_BY(mutex_);
};

}  // namespace gshare::serve
