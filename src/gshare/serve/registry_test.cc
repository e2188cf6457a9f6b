#include "gshare/serve/registry.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fmt/format.h>
#include <sqlite3.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gshare/serve/temp_dir_for_test.h"

namespace gshare::serve {
namespace {

KeyHash HashOf(std::uint8_t fill) {
  KeyHash hash;
  hash.fill(fill);
  return hash;
}

std::string Spec(std::string_view name, std::string_view extra = "") {
  return fmt::format("name: {}\nmodel_size: 10Mi\nexec_latency: 2ms\n{}", name, extra);
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    data_dir_ = dir_.path() / "data";
    Reopen();
  }

  void Reopen() {
    registry_.reset();
    RegistryOptions options;
    options.now_unix_ms = [this] { return ++now_ms_; };
    auto opened = Registry::Open(data_dir_, options);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    registry_ = std::move(opened).value();
  }

  TempDirForTest dir_;
  std::filesystem::path data_dir_;
  std::atomic<std::int64_t> now_ms_{1'700'000'000'000};
  std::unique_ptr<Registry> registry_;
};

TEST_F(RegistryTest, CreatesTheDataDirectoryPrivateAndTheDatabaseInWalMode) {
  EXPECT_TRUE(std::filesystem::is_directory(data_dir_));
  const auto perms = std::filesystem::status(data_dir_).permissions();
  EXPECT_EQ(perms & std::filesystem::perms::all, std::filesystem::perms::owner_all);
  EXPECT_TRUE(std::filesystem::exists(data_dir_ / "gshare.db"));
  ASSERT_TRUE(registry_->AddTenant("acme", HashOf(1)).ok());
  EXPECT_TRUE(std::filesystem::exists(data_dir_ / "gshare.db-wal"));
}

TEST_F(RegistryTest, RestartKeepsTenantsAndFunctions) {
  ASSERT_TRUE(registry_->AddTenant("acme", HashOf(1)).ok());
  ASSERT_TRUE(registry_->AddTenant("globex", HashOf(2)).ok());
  auto created = registry_->CreateFunction("acme", Spec("resnet", "slo: 50ms\n"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_TRUE(registry_->CreateFunction("globex", Spec("bert")).ok());
  Reopen();

  auto tenants = registry_->ListTenants();
  ASSERT_TRUE(tenants.ok()) << tenants.status().ToString();
  ASSERT_EQ(tenants->size(), 2u);
  EXPECT_EQ((*tenants)[0].name, "acme");
  EXPECT_EQ((*tenants)[0].key_hash, HashOf(1));
  EXPECT_EQ((*tenants)[0].function_count, 1);
  EXPECT_EQ((*tenants)[1].name, "globex");
  EXPECT_EQ((*tenants)[1].key_hash, HashOf(2));

  auto resnet = registry_->GetFunction("acme", "resnet");
  ASSERT_TRUE(resnet.ok()) << resnet.status().ToString();
  EXPECT_EQ(resnet->spec_yaml, created->spec_yaml);
  EXPECT_EQ(resnet->created_unix_ms, created->created_unix_ms);
  // The stored spec is the canonical entry, its tenant filled in.
  EXPECT_NE(resnet->spec_yaml.find("tenant: acme\n"), std::string::npos) << resnet->spec_yaml;
  EXPECT_NE(resnet->spec_yaml.find("slo: 50ms\n"), std::string::npos) << resnet->spec_yaml;
  EXPECT_TRUE(registry_->GetFunction("globex", "bert").ok());
}

TEST_F(RegistryTest, InvalidSpecIsInvalidArgumentAndWritesNothing) {
  ASSERT_TRUE(registry_->AddTenant("acme", HashOf(1)).ok());
  const std::vector<std::string> invalid = {
      "",
      "name: [",
      "- a\n- b\n",
      "name: f\nmodel_size: 10Mi\n",                                   // no exec_latency
      "name: f\nmodel_size: 10Mi\nexec_latency: 2ms\nmax_batch: 0\n",  // out of range
      Spec("f", "tenant: globex\n"),                                   // another tenant
      Spec("f", "working_dir: relative/dir\nruntime: mlp\n"),          // nothing to resolve it by
      std::string(2 << 20, 'x'),                                       // too large
  };
  for (const auto& spec : invalid) {
    auto created = registry_->CreateFunction("acme", spec);
    ASSERT_FALSE(created.ok()) << spec;
    EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument) << created.status().ToString();
  }
  auto tenant_error = registry_->CreateFunction("acme", Spec("f", "tenant: globex\n"));
  EXPECT_NE(tenant_error.status().message().find("'globex'"), std::string::npos)
      << tenant_error.status().message();
  auto functions = registry_->ListFunctions("acme");
  ASSERT_TRUE(functions.ok());
  EXPECT_TRUE(functions->empty());

  // An invalid update leaves the old spec in place.
  auto created = registry_->CreateFunction("acme", Spec("f"));
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(registry_->UpdateFunction("acme", "f", "name: f\nmodel_size: x\n").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->UpdateFunction("acme", "f", Spec("g")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->GetFunction("acme", "f")->spec_yaml, created->spec_yaml);
}

TEST_F(RegistryTest, DuplicatesAreAlreadyExists) {
  ASSERT_TRUE(registry_->AddTenant("acme", HashOf(1)).ok());
  ASSERT_TRUE(registry_->AddTenant("globex", HashOf(2)).ok());
  const Status tenant = registry_->AddTenant("acme", HashOf(3));
  EXPECT_EQ(tenant.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(tenant.message(), "tenant 'acme' already exists");
  ASSERT_TRUE(registry_->CreateFunction("acme", Spec("f")).ok());
  auto again = registry_->CreateFunction("acme", Spec("f", "slo: 1s\n"));
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(again.status().message(), "function 'f' already exists in tenant 'acme'");
  // The same name in another tenant's namespace is another function.
  EXPECT_TRUE(registry_->CreateFunction("globex", Spec("f")).ok());
}

TEST_F(RegistryTest, UnknownNamesAreNotFound) {
  EXPECT_EQ(registry_->RemoveTenant("acme").code(), StatusCode::kNotFound);
  EXPECT_EQ(registry_->SetTenantKeyHash("acme", HashOf(1)).code(), StatusCode::kNotFound);
  EXPECT_EQ(registry_->GetTenant("acme").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(registry_->CreateFunction("acme", Spec("f")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(registry_->ListFunctions("acme").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(registry_->AddTenant("acme", HashOf(1)).ok());
  EXPECT_EQ(registry_->GetFunction("acme", "f").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(registry_->UpdateFunction("acme", "f", Spec("f")).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(registry_->DeleteFunction("acme", "f").code(), StatusCode::kNotFound);
}

TEST_F(RegistryTest, TenantNamesAreChecked) {
  for (const char* bad : {"", "-acme", "a b", "a/b", "ünï", "x\n"}) {
    EXPECT_EQ(registry_->AddTenant(bad, HashOf(1)).code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(registry_->AddTenant(std::string(65, 'a'), HashOf(1)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry_->AddTenant(std::string(64, 'a'), HashOf(1)).ok());
  EXPECT_TRUE(registry_->AddTenant("team-1.prod_eu", HashOf(1)).ok());
}

TEST_F(RegistryTest, OneTenantNeverSeesOrTouchesAnothersFunctions) {
  ASSERT_TRUE(registry_->AddTenant("a", HashOf(1)).ok());
  ASSERT_TRUE(registry_->AddTenant("b", HashOf(2)).ok());
  auto b_secret = registry_->CreateFunction("b", Spec("secret", "slo: 9s\n"));
  ASSERT_TRUE(b_secret.ok());

  // A sees nothing of B's, and gets the same answer as for a name nobody uses.
  auto list = registry_->ListFunctions("a");
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  const auto get = registry_->GetFunction("a", "secret");
  EXPECT_EQ(get.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(get.status().message(), "function 'secret' does not exist in tenant 'a'");
  EXPECT_EQ(registry_->UpdateFunction("a", "secret", Spec("secret")).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(registry_->DeleteFunction("a", "secret").code(), StatusCode::kNotFound);
  // A's function of the same name is its own.
  ASSERT_TRUE(registry_->CreateFunction("a", Spec("secret")).ok());
  ASSERT_TRUE(registry_->UpdateFunction("a", "secret", Spec("secret", "slo: 1s\n")).ok());
  ASSERT_TRUE(registry_->DeleteFunction("a", "secret").ok());

  auto b_after = registry_->GetFunction("b", "secret");
  ASSERT_TRUE(b_after.ok());
  EXPECT_EQ(b_after->spec_yaml, b_secret->spec_yaml);
  EXPECT_EQ(b_after->updated_unix_ms, b_secret->updated_unix_ms);
}

TEST_F(RegistryTest, UpdateKeepsCreatedAndAdvancesUpdated) {
  ASSERT_TRUE(registry_->AddTenant("acme", HashOf(1)).ok());
  auto created = registry_->CreateFunction("acme", Spec("f"));
  ASSERT_TRUE(created.ok());
  auto updated = registry_->UpdateFunction("acme", "f", Spec("f", "max_batch: 4\n"));
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ(updated->created_unix_ms, created->created_unix_ms);
  EXPECT_GT(updated->updated_unix_ms, created->updated_unix_ms);
  auto read = registry_->GetFunction("acme", "f");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->spec_yaml, updated->spec_yaml);
  EXPECT_NE(read->spec_yaml.find("max_batch: 4\n"), std::string::npos);
  EXPECT_EQ(read->updated_unix_ms, updated->updated_unix_ms);
}

TEST_F(RegistryTest, RemovingATenantRemovesItsFunctionsOnly) {
  ASSERT_TRUE(registry_->AddTenant("a", HashOf(1)).ok());
  ASSERT_TRUE(registry_->AddTenant("b", HashOf(2)).ok());
  for (const char* name : {"f", "g", "h"}) {
    ASSERT_TRUE(registry_->CreateFunction("a", Spec(name)).ok());
  }
  ASSERT_TRUE(registry_->CreateFunction("b", Spec("f")).ok());
  ASSERT_TRUE(registry_->RemoveTenant("a").ok());
  EXPECT_EQ(registry_->ListFunctions("a").status().code(), StatusCode::kNotFound);
  // A tenant of the same name later starts empty: nothing of the old one is left over.
  ASSERT_TRUE(registry_->AddTenant("a", HashOf(3)).ok());
  auto fresh = registry_->ListFunctions("a");
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->empty());
  auto b = registry_->ListFunctions("b");
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), 1u);
  EXPECT_EQ((*b)[0].name, "f");
}

TEST_F(RegistryTest, KeyRotationReplacesTheHash) {
  ASSERT_TRUE(registry_->AddTenant("acme", HashOf(1)).ok());
  ASSERT_TRUE(registry_->SetTenantKeyHash("acme", HashOf(7)).ok());
  Reopen();
  auto tenant = registry_->GetTenant("acme");
  ASSERT_TRUE(tenant.ok());
  EXPECT_EQ(tenant->key_hash, HashOf(7));
}

TEST_F(RegistryTest, ConcurrentCreatesLandExactlyOnce) {
  ASSERT_TRUE(registry_->AddTenant("acme", HashOf(1)).ok());
  ASSERT_TRUE(registry_->AddTenant("globex", HashOf(2)).ok());
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  std::atomic<int> created{0};
  std::atomic<int> duplicates{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  // Each thread creates its own names and every thread also races for the same shared names;
  // a second registry on the same file stands in for another process.
  auto other = Registry::Open(data_dir_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  for (int t = 0; t < kThreads; ++t) {
    Registry& registry = t % 2 == 0 ? *registry_ : **other;
    threads.emplace_back([&registry, t, &created, &duplicates, &failures] {
      const std::string tenant = t % 3 == 0 ? "globex" : "acme";
      for (int i = 0; i < kPerThread; ++i) {
        for (const std::string& name :
             {fmt::format("own-{}-{}", t, i), fmt::format("shared-{}", i)}) {
          auto result = registry.CreateFunction(tenant, Spec(name));
          if (result.ok()) {
            ++created;
          } else if (result.status().code() == StatusCode::kAlreadyExists) {
            ++duplicates;
          } else {
            ++failures;
            ADD_FAILURE() << result.status().ToString();
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  auto acme = registry_->ListFunctions("acme");
  auto globex = registry_->ListFunctions("globex");
  ASSERT_TRUE(acme.ok() && globex.ok());
  // Own names: every one once. Shared names: once per tenant that raced for them.
  const int own = kThreads * kPerThread;
  EXPECT_EQ(static_cast<int>(acme->size() + globex->size()), own + 2 * kPerThread);
  EXPECT_EQ(created.load(), own + 2 * kPerThread);
  EXPECT_EQ(duplicates.load(), kThreads * kPerThread - 2 * kPerThread);
  std::set<std::string> names;
  for (const auto& f : *acme) EXPECT_TRUE(names.insert("acme/" + f.name).second);
  for (const auto& f : *globex) EXPECT_TRUE(names.insert("globex/" + f.name).second);
}

// A tenant's number is never given again, not even the newest one's once it is removed (SQLite's
// row ids would be), and it survives a restart.
TEST_F(RegistryTest, TenantNumbersAreNeverReused) {
  ASSERT_TRUE(registry_->AddTenant("a", HashOf(1)).ok());
  ASSERT_TRUE(registry_->AddTenant("b", HashOf(2)).ok());
  EXPECT_EQ(registry_->GetTenant("a")->number, 1);
  EXPECT_EQ(registry_->GetTenant("b")->number, 2);
  ASSERT_TRUE(registry_->RemoveTenant("b").ok());
  ASSERT_TRUE(registry_->AddTenant("c", HashOf(3)).ok());
  EXPECT_EQ(registry_->GetTenant("c")->number, 3);
  ASSERT_TRUE(registry_->RemoveTenant("c").ok());
  Reopen();
  ASSERT_TRUE(registry_->AddTenant("b", HashOf(4)).ok());  // the name again: a new number
  EXPECT_EQ(registry_->GetTenant("b")->number, 4);
  EXPECT_EQ(registry_->GetTenant("a")->number, 1);
}

// A registry written by schema version 1 (tenant numbers were row ids): its tenants keep their
// numbers, and the counter starts above them.
TEST_F(RegistryTest, AVersionOneRegistryKeepsItsTenantsNumbers) {
  registry_.reset();
  const std::filesystem::path old_dir = dir_.path() / "old";
  std::filesystem::create_directories(old_dir);
  ::chmod(old_dir.c_str(), 0700);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((old_dir / "gshare.db").c_str(), &db), SQLITE_OK);
  const char* v1 = R"sql(
PRAGMA journal_mode=WAL;
CREATE TABLE tenants (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, key_hash BLOB NOT NULL,
                      created_unix_ms INTEGER NOT NULL);
CREATE TABLE functions (tenant_id INTEGER NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        name TEXT NOT NULL, spec TEXT NOT NULL, created_unix_ms INTEGER NOT NULL,
                        updated_unix_ms INTEGER NOT NULL, PRIMARY KEY (tenant_id, name));
INSERT INTO tenants VALUES (1, 'first', zeroblob(32), 1), (7, 'seventh', zeroblob(32), 2);
PRAGMA user_version=1;
)sql";
  ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  auto opened = Registry::Open(old_dir);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Registry& old = **opened;
  EXPECT_EQ(old.GetTenant("first")->number, 1);
  EXPECT_EQ(old.GetTenant("seventh")->number, 7);
  ASSERT_TRUE(old.AddTenant("new", HashOf(5)).ok());
  EXPECT_EQ(old.GetTenant("new")->number, 8);
}

}  // namespace
}  // namespace gshare::serve
