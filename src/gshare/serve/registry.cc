#include "gshare/serve/registry.h"

#include <sqlite3.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "gshare/model/catalog.h"
#include "gshare/serve/data_dir.h"

namespace gshare::serve {
namespace {

// The schema this build writes and reads (PRAGMA user_version).
constexpr int kSchemaVersion = 2;

constexpr const char* kSchema = R"sql(
CREATE TABLE tenants (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  key_hash BLOB NOT NULL,
  created_unix_ms INTEGER NOT NULL
);
CREATE TABLE functions (
  tenant_id INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  spec TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL,
  updated_unix_ms INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, name)
);
)sql";

// Version 2: a tenant's number (its uid's offset) from a counter that never goes back, so that a
// removed tenant's number, and with it its uid, is never given to another. Existing tenants keep
// the number they had (their row id), and the counter starts above every one of them. (Under
// version 1 the newest tenant's row id could be given again once it was removed: a tenant of a
// version-1 registry may share a number with one removed before the upgrade.) An older gshare
// writing the migrated file inserts number 0, which the unique index allows once.
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE tenants ADD COLUMN number INTEGER NOT NULL DEFAULT 0;
UPDATE tenants SET number = id;
CREATE UNIQUE INDEX tenants_by_number ON tenants(number);
CREATE TABLE counters (
  name TEXT PRIMARY KEY,
  next INTEGER NOT NULL
);
INSERT INTO counters (name, next)
  SELECT 'tenant_number', COALESCE(MAX(number), 0) + 1 FROM tenants;
)sql";

// A spec larger than this is refused before it is parsed.
constexpr std::size_t kMaxSpecBytes = 1 << 20;

// One operation on the connection: every SQLite result passes through Check, so that an error
// names the database file and the operation ("create function acme/resnet").
class Session {
 public:
  Session(sqlite3* db, const std::filesystem::path& path, std::string operation)
      : db_(db), path_(path), operation_(std::move(operation)) {}

  sqlite3* db() const { return db_; }

  Status Error(int rc, std::string_view step) const {
    const int primary = rc & 0xff;
    std::string message = fmt::format("{}: {}: {}: {}", path_.string(), operation_, step,
                                      db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
      return AlreadyExists(std::move(message));
    }
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
      return Unavailable(message + " (the database stayed locked by another connection)");
    }
    return IoError(std::move(message));
  }

  Status Check(int rc, std::string_view step) const {
    return rc == SQLITE_OK ? Status::Ok() : Error(rc, step);
  }

  Status Exec(const char* sql, std::string_view step) const {
    return Check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), step);
  }

  Status Failed(Status status) const {
    return Status(status.code(),
                  fmt::format("{}: {}: {}", path_.string(), operation_, status.message()));
  }

 private:
  sqlite3* db_;
  const std::filesystem::path& path_;
  std::string operation_;
};

// A prepared statement, finalized when it goes.
class Statement {
 public:
  static Result<Statement> Prepare(const Session& session, const char* sql) {
    sqlite3_stmt* raw = nullptr;
    const int rc = sqlite3_prepare_v2(session.db(), sql, -1, &raw, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(raw);
      return session.Error(rc, "prepare");
    }
    return Statement(session, raw);
  }
  Statement(Statement&& other) noexcept
      : session_(other.session_), stmt_(std::exchange(other.stmt_, nullptr)) {}
  Statement& operator=(Statement&&) = delete;
  // sqlite3_finalize repeats the last step's error, which Step has already reported.
  ~Statement() { sqlite3_finalize(stmt_); }

  Status Bind(int index, std::string_view text) {
    return session_->Check(sqlite3_bind_text(stmt_, index, text.data(),
                                             static_cast<int>(text.size()), SQLITE_TRANSIENT),
                           "bind");
  }
  Status Bind(int index, std::int64_t value) {
    return session_->Check(sqlite3_bind_int64(stmt_, index, value), "bind");
  }
  Status Bind(int index, const KeyHash& hash) {
    return session_->Check(sqlite3_bind_blob(stmt_, index, hash.data(),
                                             static_cast<int>(hash.size()), SQLITE_TRANSIENT),
                           "bind");
  }

  // True when a row is ready, false when the statement is done.
  Result<bool> Step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return session_->Error(sqlite3_extended_errcode(session_->db()), "step");
  }
  // Runs a statement that returns no rows.
  Status Run() {
    auto row = Step();
    if (!row.ok()) return row.status();
    if (*row) return Internal("a statement meant to return nothing returned a row");
    return Status::Ok();
  }

  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::int64_t Integer(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string Text(int column) const {
    const auto* text = sqlite3_column_text(stmt_, column);
    const int size = sqlite3_column_bytes(stmt_, column);
    if (text == nullptr) return {};
    return std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(size));
  }
  Result<KeyHash> Hash(int column) const {
    const void* blob = sqlite3_column_blob(stmt_, column);
    const int size = sqlite3_column_bytes(stmt_, column);
    if (blob == nullptr || size != static_cast<int>(kKeyHashBytes)) {
      return session_->Failed(
          IoError(fmt::format("a stored key hash is {} bytes, not {}", size, kKeyHashBytes)));
    }
    KeyHash hash;
    std::memcpy(hash.data(), blob, hash.size());
    return hash;
  }

 private:
  Statement(const Session& session, sqlite3_stmt* stmt) : session_(&session), stmt_(stmt) {}

  const Session* session_;
  sqlite3_stmt* stmt_;
};

// BEGIN IMMEDIATE: takes the write lock at once, so two processes never deadlock upgrading a
// read to a write; rolled back unless committed.
class Transaction {
 public:
  static Result<Transaction> Begin(const Session& session) {
    GSHARE_RETURN_IF_ERROR(session.Exec("BEGIN IMMEDIATE", "begin"));
    return Transaction(session);
  }
  Transaction(Transaction&& other) noexcept
      : session_(other.session_), open_(std::exchange(other.open_, false)) {}
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction() {
    // A failed rollback leaves SQLite to roll back when the connection next writes or closes.
    if (open_) sqlite3_exec(session_->db(), "ROLLBACK", nullptr, nullptr, nullptr);
  }

  Status Commit() {
    GSHARE_RETURN_IF_ERROR(session_->Exec("COMMIT", "commit"));
    open_ = false;
    return Status::Ok();
  }

 private:
  explicit Transaction(const Session& session) : session_(&session), open_(true) {}

  const Session* session_;
  bool open_;
};

// Parses and checks a spec for `tenant`'s namespace: the catalog's validator, then the tenant.
Result<FunctionSpec> ValidateSpec(std::string_view tenant, std::string_view spec_yaml) {
  if (spec_yaml.size() > kMaxSpecBytes) {
    return InvalidArgument(
        fmt::format("the function spec is {} bytes; at most {}", spec_yaml.size(), kMaxSpecBytes));
  }
  GSHARE_ASSIGN_OR_RETURN(FunctionSpec spec, ParseFunctionEntry(spec_yaml, "spec", tenant));
  if (spec.tenant != tenant) {
    return InvalidArgument(
        fmt::format("spec: function ({}): tenant: '{}' is not this namespace's "
                    "tenant '{}'",
                    spec.name, spec.tenant, tenant));
  }
  return spec;
}

}  // namespace

Status ValidateTenantName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTenantNameBytes) {
    return InvalidArgument(
        fmt::format("a tenant name has 1 to {} characters", kMaxTenantNameBytes));
  }
  if (!std::isalnum(static_cast<unsigned char>(name.front()))) {
    return InvalidArgument("a tenant name starts with a letter or a digit");
  }
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return InvalidArgument(
          "a tenant name has only letters, digits, '_', '-' and '.' (it is used in URLs)");
    }
  }
  return Status::Ok();
}

void Registry::CloseDatabase::operator()(sqlite3* db) const { sqlite3_close_v2(db); }

Registry::Registry(std::filesystem::path path, DatabasePtr db, RegistryOptions options)
    : path_(std::move(path)), options_(std::move(options)), db_(std::move(db)) {}

Registry::~Registry() = default;

std::int64_t Registry::NowUnixMs() const {
  if (options_.now_unix_ms) return options_.now_unix_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<std::unique_ptr<Registry>> Registry::Open(const std::filesystem::path& data_dir,
                                                 RegistryOptions options) {
  GSHARE_RETURN_IF_ERROR(EnsureDataDir(data_dir));
  std::filesystem::path path = data_dir / kRegistryFileName;
  sqlite3* raw = nullptr;
  const int opened =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  DatabasePtr db(raw);
  Session session(db.get(), path, "open");
  if (opened != SQLITE_OK) {
    if (db == nullptr) return IoError(fmt::format("{}: open: out of memory", path.string()));
    return session.Error(opened, "sqlite3_open_v2");
  }
  GSHARE_RETURN_IF_ERROR(session.Check(sqlite3_extended_result_codes(db.get(), 1), "result codes"));
  const auto busy_ms = options.busy_timeout.count();
  GSHARE_RETURN_IF_ERROR(session.Check(
      sqlite3_busy_timeout(db.get(), static_cast<int>(std::clamp<std::int64_t>(
                                         busy_ms, 0, std::numeric_limits<int>::max()))),
      "busy timeout"));
  {
    GSHARE_ASSIGN_OR_RETURN(auto wal, Statement::Prepare(session, "PRAGMA journal_mode=WAL"));
    GSHARE_ASSIGN_OR_RETURN(const bool row, wal.Step());
    const std::string mode = row ? wal.Text(0) : "";
    if (mode != "wal") {
      return session.Failed(
          IoError(fmt::format("journal_mode: the database is in '{}' mode, not WAL", mode)));
    }
  }
  GSHARE_RETURN_IF_ERROR(session.Exec("PRAGMA foreign_keys=ON", "foreign keys"));
  {
    GSHARE_ASSIGN_OR_RETURN(auto transaction, Transaction::Begin(session));
    GSHARE_ASSIGN_OR_RETURN(auto version_query, Statement::Prepare(session, "PRAGMA user_version"));
    GSHARE_ASSIGN_OR_RETURN(const bool row, version_query.Step());
    const std::int64_t version = row ? version_query.Integer(0) : 0;
    if (version > kSchemaVersion) {
      return session.Failed(FailedPrecondition(fmt::format(
          "schema version {} is newer than this gshare's ({})", version, kSchemaVersion)));
    }
    if (version == 0) {
      GSHARE_RETURN_IF_ERROR(session.Exec(kSchema, "create schema"));
    }
    if (version < 2) {
      GSHARE_RETURN_IF_ERROR(session.Exec(kSchemaV2, "schema version 2: tenant numbers"));
      GSHARE_RETURN_IF_ERROR(session.Exec("PRAGMA user_version=2", "set schema version"));
    }
    GSHARE_RETURN_IF_ERROR(transaction.Commit());
  }
  return std::unique_ptr<Registry>(
      new Registry(std::move(path), std::move(db), std::move(options)));
}

Status Registry::AddTenant(std::string_view name, const KeyHash& key_hash) {
  GSHARE_RETURN_IF_ERROR(ValidateTenantName(name));
  const std::int64_t now = NowUnixMs();
  MutexLock lock(mutex_);
  Session session(db_.get(), path_, fmt::format("add tenant {}", name));
  GSHARE_ASSIGN_OR_RETURN(auto transaction, Transaction::Begin(session));
  GSHARE_ASSIGN_OR_RETURN(
      auto next,
      Statement::Prepare(session, "SELECT next FROM counters WHERE name = 'tenant_number'"));
  GSHARE_ASSIGN_OR_RETURN(const bool counted, next.Step());
  if (!counted) return session.Failed(Internal("the tenant number counter is missing"));
  const std::int64_t number = next.Integer(0);
  GSHARE_ASSIGN_OR_RETURN(
      auto insert,
      Statement::Prepare(session,
                         "INSERT INTO tenants (name, key_hash, created_unix_ms, number) VALUES "
                         "(?1, ?2, ?3, ?4)"));
  GSHARE_RETURN_IF_ERROR(insert.Bind(1, name));
  GSHARE_RETURN_IF_ERROR(insert.Bind(2, key_hash));
  GSHARE_RETURN_IF_ERROR(insert.Bind(3, now));
  GSHARE_RETURN_IF_ERROR(insert.Bind(4, number));
  const Status inserted = insert.Run();
  if (inserted.code() == StatusCode::kAlreadyExists) {
    return AlreadyExists(fmt::format("tenant '{}' already exists", name));
  }
  GSHARE_RETURN_IF_ERROR(inserted);
  GSHARE_ASSIGN_OR_RETURN(
      auto advance,
      Statement::Prepare(session,
                         "UPDATE counters SET next = next + 1 WHERE name = 'tenant_number'"));
  GSHARE_RETURN_IF_ERROR(advance.Run());
  return transaction.Commit();
}

Status Registry::RemoveTenant(std::string_view name) {
  MutexLock lock(mutex_);
  Session session(db_.get(), path_, fmt::format("remove tenant {}", name));
  GSHARE_ASSIGN_OR_RETURN(auto transaction, Transaction::Begin(session));
  GSHARE_ASSIGN_OR_RETURN(auto find,
                          Statement::Prepare(session, "SELECT id FROM tenants WHERE name = ?1"));
  GSHARE_RETURN_IF_ERROR(find.Bind(1, name));
  GSHARE_ASSIGN_OR_RETURN(const bool found, find.Step());
  if (!found) return NotFound(fmt::format("tenant '{}' does not exist", name));
  const std::int64_t id = find.Integer(0);
  GSHARE_ASSIGN_OR_RETURN(
      auto functions, Statement::Prepare(session, "DELETE FROM functions WHERE tenant_id = ?1"));
  GSHARE_RETURN_IF_ERROR(functions.Bind(1, id));
  GSHARE_RETURN_IF_ERROR(functions.Run());
  GSHARE_ASSIGN_OR_RETURN(auto tenant,
                          Statement::Prepare(session, "DELETE FROM tenants WHERE id = ?1"));
  GSHARE_RETURN_IF_ERROR(tenant.Bind(1, id));
  GSHARE_RETURN_IF_ERROR(tenant.Run());
  return transaction.Commit();
}

Status Registry::SetTenantKeyHash(std::string_view name, const KeyHash& key_hash) {
  MutexLock lock(mutex_);
  Session session(db_.get(), path_, fmt::format("set the key of tenant {}", name));
  GSHARE_ASSIGN_OR_RETURN(
      auto update, Statement::Prepare(session, "UPDATE tenants SET key_hash = ?1 WHERE name = ?2"));
  GSHARE_RETURN_IF_ERROR(update.Bind(1, key_hash));
  GSHARE_RETURN_IF_ERROR(update.Bind(2, name));
  GSHARE_RETURN_IF_ERROR(update.Run());
  if (sqlite3_changes(db_.get()) == 0) {
    return NotFound(fmt::format("tenant '{}' does not exist", name));
  }
  return Status::Ok();
}

namespace {

constexpr const char* kTenantColumns =
    "SELECT t.name, t.key_hash, t.created_unix_ms, "
    "(SELECT COUNT(*) FROM functions f WHERE f.tenant_id = t.id), t.number FROM tenants t ";

Result<TenantRecord> ReadTenant(const Statement& row) {
  TenantRecord tenant;
  tenant.name = row.Text(0);
  GSHARE_ASSIGN_OR_RETURN(tenant.key_hash, row.Hash(1));
  tenant.created_unix_ms = row.Integer(2);
  tenant.function_count = row.Integer(3);
  tenant.number = row.Integer(4);
  return tenant;
}

}  // namespace

Result<TenantRecord> Registry::GetTenant(std::string_view name) {
  MutexLock lock(mutex_);
  Session session(db_.get(), path_, fmt::format("get tenant {}", name));
  GSHARE_ASSIGN_OR_RETURN(
      auto query,
      Statement::Prepare(session, fmt::format("{}WHERE t.name = ?1", kTenantColumns).c_str()));
  GSHARE_RETURN_IF_ERROR(query.Bind(1, name));
  GSHARE_ASSIGN_OR_RETURN(const bool found, query.Step());
  if (!found) return NotFound(fmt::format("tenant '{}' does not exist", name));
  return ReadTenant(query);
}

Result<std::vector<TenantRecord>> Registry::ListTenants() {
  MutexLock lock(mutex_);
  Session session(db_.get(), path_, "list tenants");
  GSHARE_ASSIGN_OR_RETURN(
      auto query,
      Statement::Prepare(session, fmt::format("{}ORDER BY t.name", kTenantColumns).c_str()));
  std::vector<TenantRecord> tenants;
  while (true) {
    GSHARE_ASSIGN_OR_RETURN(const bool row, query.Step());
    if (!row) break;
    GSHARE_ASSIGN_OR_RETURN(TenantRecord tenant, ReadTenant(query));
    tenants.push_back(std::move(tenant));
  }
  return tenants;
}

Result<FunctionRecord> Registry::CreateFunction(std::string_view tenant,
                                                std::string_view spec_yaml) {
  GSHARE_ASSIGN_OR_RETURN(const FunctionSpec spec, ValidateSpec(tenant, spec_yaml));
  FunctionRecord record{std::string(tenant), spec.name, FunctionSpecToYaml(spec), NowUnixMs(), 0};
  record.updated_unix_ms = record.created_unix_ms;
  MutexLock lock(mutex_);
  Session session(db_.get(), path_, fmt::format("create function {}/{}", tenant, spec.name));
  GSHARE_ASSIGN_OR_RETURN(
      auto insert, Statement::Prepare(
                       session,
                       "INSERT INTO functions (tenant_id, name, spec, created_unix_ms, "
                       "updated_unix_ms) SELECT id, ?1, ?2, ?3, ?3 FROM tenants WHERE name = ?4"));
  GSHARE_RETURN_IF_ERROR(insert.Bind(1, record.name));
  GSHARE_RETURN_IF_ERROR(insert.Bind(2, record.spec_yaml));
  GSHARE_RETURN_IF_ERROR(insert.Bind(3, record.created_unix_ms));
  GSHARE_RETURN_IF_ERROR(insert.Bind(4, tenant));
  const Status inserted = insert.Run();
  if (inserted.code() == StatusCode::kAlreadyExists) {
    return AlreadyExists(
        fmt::format("function '{}' already exists in tenant '{}'", record.name, tenant));
  }
  GSHARE_RETURN_IF_ERROR(inserted);
  if (sqlite3_changes(db_.get()) == 0) {
    return NotFound(fmt::format("tenant '{}' does not exist", tenant));
  }
  return record;
}

namespace {

constexpr const char* kFunctionColumns =
    "SELECT f.name, f.spec, f.created_unix_ms, f.updated_unix_ms FROM functions f "
    "JOIN tenants t ON f.tenant_id = t.id ";

FunctionRecord ReadFunction(std::string_view tenant, const Statement& row) {
  return FunctionRecord{std::string(tenant), row.Text(0), row.Text(1), row.Integer(2),
                        row.Integer(3)};
}

Status FunctionNotFound(std::string_view tenant, std::string_view name) {
  return NotFound(fmt::format("function '{}' does not exist in tenant '{}'", name, tenant));
}

}  // namespace

Result<FunctionRecord> Registry::GetFunction(std::string_view tenant, std::string_view name) {
  MutexLock lock(mutex_);
  Session session(db_.get(), path_, fmt::format("get function {}/{}", tenant, name));
  GSHARE_ASSIGN_OR_RETURN(
      auto query,
      Statement::Prepare(
          session, fmt::format("{}WHERE t.name = ?1 AND f.name = ?2", kFunctionColumns).c_str()));
  GSHARE_RETURN_IF_ERROR(query.Bind(1, tenant));
  GSHARE_RETURN_IF_ERROR(query.Bind(2, name));
  GSHARE_ASSIGN_OR_RETURN(const bool found, query.Step());
  if (!found) return FunctionNotFound(tenant, name);
  return ReadFunction(tenant, query);
}

Result<std::vector<FunctionRecord>> Registry::ListFunctions(std::string_view tenant) {
  MutexLock lock(mutex_);
  Session session(db_.get(), path_, fmt::format("list functions of {}", tenant));
  // A LEFT JOIN from the tenant tells an unknown tenant (no row) from one without functions (one
  // row of NULLs) in one consistent read.
  GSHARE_ASSIGN_OR_RETURN(
      auto query,
      Statement::Prepare(session,
                         "SELECT f.name, f.spec, f.created_unix_ms, f.updated_unix_ms FROM tenants "
                         "t LEFT JOIN functions f ON f.tenant_id = t.id WHERE t.name = ?1 "
                         "ORDER BY f.name"));
  GSHARE_RETURN_IF_ERROR(query.Bind(1, tenant));
  std::vector<FunctionRecord> functions;
  bool tenant_found = false;
  while (true) {
    GSHARE_ASSIGN_OR_RETURN(const bool row, query.Step());
    if (!row) break;
    tenant_found = true;
    if (query.IsNull(0)) continue;
    functions.push_back(ReadFunction(tenant, query));
  }
  if (!tenant_found) return NotFound(fmt::format("tenant '{}' does not exist", tenant));
  return functions;
}

Result<FunctionRecord> Registry::UpdateFunction(std::string_view tenant, std::string_view name,
                                                std::string_view spec_yaml) {
  GSHARE_ASSIGN_OR_RETURN(const FunctionSpec spec, ValidateSpec(tenant, spec_yaml));
  if (spec.name != name) {
    return InvalidArgument(
        fmt::format("spec: name: '{}' is not the function being updated, '{}'", spec.name, name));
  }
  FunctionRecord record{std::string(tenant), spec.name, FunctionSpecToYaml(spec), 0, NowUnixMs()};
  MutexLock lock(mutex_);
  Session session(db_.get(), path_, fmt::format("update function {}/{}", tenant, name));
  GSHARE_ASSIGN_OR_RETURN(
      auto update,
      Statement::Prepare(session,
                         "UPDATE functions SET spec = ?1, updated_unix_ms = ?2 WHERE name = ?3 AND "
                         "tenant_id = (SELECT id FROM tenants WHERE name = ?4) "
                         "RETURNING created_unix_ms"));
  GSHARE_RETURN_IF_ERROR(update.Bind(1, record.spec_yaml));
  GSHARE_RETURN_IF_ERROR(update.Bind(2, record.updated_unix_ms));
  GSHARE_RETURN_IF_ERROR(update.Bind(3, name));
  GSHARE_RETURN_IF_ERROR(update.Bind(4, tenant));
  GSHARE_ASSIGN_OR_RETURN(const bool found, update.Step());
  if (!found) return FunctionNotFound(tenant, name);
  record.created_unix_ms = update.Integer(0);
  // Stepping to the end completes the statement (its change is applied by the first step).
  GSHARE_ASSIGN_OR_RETURN(const bool more, update.Step());
  if (more) return session.Failed(Internal("one function's update returned two rows"));
  return record;
}

Status Registry::DeleteFunction(std::string_view tenant, std::string_view name) {
  MutexLock lock(mutex_);
  Session session(db_.get(), path_, fmt::format("delete function {}/{}", tenant, name));
  GSHARE_ASSIGN_OR_RETURN(
      auto remove, Statement::Prepare(session,
                                      "DELETE FROM functions WHERE name = ?1 AND "
                                      "tenant_id = (SELECT id FROM tenants WHERE name = ?2)"));
  GSHARE_RETURN_IF_ERROR(remove.Bind(1, name));
  GSHARE_RETURN_IF_ERROR(remove.Bind(2, tenant));
  GSHARE_RETURN_IF_ERROR(remove.Run());
  if (sqlite3_changes(db_.get()) == 0) return FunctionNotFound(tenant, name);
  return Status::Ok();
}

Result<std::int64_t> Registry::DataVersion() {
  MutexLock lock(mutex_);
  Session session(db_.get(), path_, "read the data version");
  GSHARE_ASSIGN_OR_RETURN(auto query, Statement::Prepare(session, "PRAGMA data_version"));
  GSHARE_ASSIGN_OR_RETURN(const bool row, query.Step());
  if (!row) return session.Failed(Internal("PRAGMA data_version returned no row"));
  return query.Integer(0);
}

}  // namespace gshare::serve
