#include "gshare/serve/api_keys.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "gshare/serve/data_dir.h"
#include "gshare/serve/temp_dir_for_test.h"

namespace gshare::serve {
namespace {

std::filesystem::perms Mode(const std::filesystem::path& path) {
  return std::filesystem::status(path).permissions() & std::filesystem::perms::mask;
}

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ApiKeyTest, KeysAreRandomBase64UrlWithThePrefix) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto key = GenerateApiKey();
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    ASSERT_EQ(key->size(), kApiKeyPrefix.size() + 43);  // 256 bits in unpadded base64url
    EXPECT_EQ(key->substr(0, 4), "gsk_");
    for (const char c : key->substr(4)) {
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') << *key;
    }
    EXPECT_TRUE(seen.insert(*key).second);
  }
}

TEST(ApiKeyTest, HashIsHmacSha256UnderTheSecret) {
  // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?".
  const KeyHash hash = ServerSecret::FromBytes("Jefe").Hash("what do ya want for nothing?");
  const std::uint8_t expected[] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                   0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                   0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  EXPECT_TRUE(std::equal(hash.begin(), hash.end(), std::begin(expected)));
  EXPECT_FALSE(
      KeyHashesEqual(hash, ServerSecret::FromBytes("Jeff").Hash("what do ya want for nothing?")));
  EXPECT_TRUE(KeyHashesEqual(hash, hash));
}

TEST(ServerSecretTest, CreatedOnceWithMode0600AndStable) {
  TempDirForTest dir;
  ASSERT_FALSE(dir.path().empty());
  const auto data = dir.path() / "data";
  auto first = ServerSecret::LoadOrCreate(data);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const auto path = data / kServerSecretFileName;
  EXPECT_EQ(Mode(path), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(ReadText(path).size(), kServerSecretBytes);
  auto second = ServerSecret::LoadOrCreate(data);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->Hash("k"), second->Hash("k"));
  // No temporary file is left behind.
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(data)) ++files;
  EXPECT_EQ(files, 1);
}

TEST(ServerSecretTest, RefusesAFileOthersCanRead) {
  TempDirForTest dir;
  ASSERT_FALSE(dir.path().empty());
  ASSERT_TRUE(ServerSecret::LoadOrCreate(dir.path()).ok());
  const auto path = dir.path() / kServerSecretFileName;
  for (const mode_t mode : {0644, 0640, 0604, 0602}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    auto loaded = ServerSecret::LoadOrCreate(dir.path());
    ASSERT_FALSE(loaded.ok()) << std::oct << mode;
    EXPECT_EQ(loaded.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(loaded.status().message().find("chmod 600"), std::string::npos)
        << loaded.status().message();
  }
  ASSERT_EQ(::chmod(path.c_str(), 0400), 0);
  EXPECT_TRUE(ServerSecret::LoadOrCreate(dir.path()).ok());
}

TEST(ServerSecretTest, RefusesAWrongSizeOrASymlink) {
  TempDirForTest dir;
  ASSERT_FALSE(dir.path().empty());
  const auto path = dir.path() / kServerSecretFileName;
  ASSERT_TRUE(CreatePrivateFileOnce(path, "short").ok());
  auto short_secret = ServerSecret::LoadOrCreate(dir.path());
  EXPECT_EQ(short_secret.status().code(), StatusCode::kInvalidArgument);
  std::filesystem::remove(path);
  ASSERT_TRUE(CreatePrivateFileOnce(dir.path() / "elsewhere", std::string(32, 'x')).ok());
  std::filesystem::create_symlink(dir.path() / "elsewhere", path);
  EXPECT_EQ(ServerSecret::LoadOrCreate(dir.path()).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(AdminKeyTest, GeneratedOnceWithMode0600AndStableAcrossRestarts) {
  TempDirForTest dir;
  ASSERT_FALSE(dir.path().empty());
  auto first = LoadOrCreateAdminKey(dir.path());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->generated);
  EXPECT_EQ(first->key.substr(0, 4), "gsk_");
  const auto path = dir.path() / kAdminKeyFileName;
  EXPECT_EQ(Mode(path), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(ReadText(path), first->key + "\n");
  auto second = LoadOrCreateAdminKey(dir.path());
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->generated);
  EXPECT_EQ(second->key, first->key);
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  EXPECT_EQ(LoadOrCreateAdminKey(dir.path()).status().code(), StatusCode::kFailedPrecondition);
}

TEST(AdminKeyTest, GivenByFile) {
  TempDirForTest dir;
  ASSERT_FALSE(dir.path().empty());
  const auto file = dir.path() / "my.key";
  ASSERT_TRUE(CreatePrivateFileOnce(file, "  operator-chosen-admin-key\n").ok());
  auto key = LoadOrCreateAdminKey(dir.path() / "data", file);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->key, "operator-chosen-admin-key");
  EXPECT_FALSE(key->generated);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "data" / kAdminKeyFileName));
  const auto weak = dir.path() / "weak.key";
  ASSERT_TRUE(CreatePrivateFileOnce(weak, "short\n").ok());
  EXPECT_EQ(LoadOrCreateAdminKey(dir.path(), weak).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadOrCreateAdminKey(dir.path(), dir.path() / "none.key").status().code(),
            StatusCode::kNotFound);
}

class TenantKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    Reopen();
  }
  void Reopen() {
    keys_.reset();
    registry_.reset();
    auto registry = Registry::Open(dir_.path());
    ASSERT_TRUE(registry.ok()) << registry.status().ToString();
    registry_ = std::move(registry).value();
    auto secret = ServerSecret::LoadOrCreate(dir_.path());
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    auto keys = TenantKeys::Open(*registry_, std::move(secret).value());
    ASSERT_TRUE(keys.ok()) << keys.status().ToString();
    keys_ = std::move(keys).value();
  }

  TempDirForTest dir_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<TenantKeys> keys_;
};

TEST_F(TenantKeysTest, ARightKeyMapsToItsTenantAndAWrongOneToNone) {
  auto acme = keys_->AddTenant("acme");
  auto globex = keys_->AddTenant("globex");
  ASSERT_TRUE(acme.ok() && globex.ok());
  EXPECT_EQ(keys_->Authenticate(*acme), "acme");
  EXPECT_EQ(keys_->Authenticate(*globex), "globex");
  std::string altered = *acme;
  altered.back() = altered.back() == 'A' ? 'B' : 'A';
  EXPECT_EQ(keys_->Authenticate(altered), std::nullopt);
  EXPECT_EQ(keys_->Authenticate(""), std::nullopt);
  EXPECT_EQ(keys_->Authenticate(*acme + "x"), std::nullopt);
  EXPECT_EQ(keys_->Authenticate(std::string(10'000, 'k')), std::nullopt);
  // Only the hash is stored.
  auto stored = registry_->GetTenant("acme");
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(KeyHashesEqual(stored->key_hash, keys_->secret().Hash(*acme)));
  // A duplicate name is refused and changes nothing.
  EXPECT_EQ(keys_->AddTenant("acme").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(keys_->Authenticate(*acme), "acme");
  // Keys survive a restart: the index is rebuilt from the registry.
  Reopen();
  EXPECT_EQ(keys_->Authenticate(*acme), "acme");
  EXPECT_EQ(keys_->Authenticate(*globex), "globex");
}

TEST_F(TenantKeysTest, ARotatedKeyStopsWorkingAtOnce) {
  auto old_key = keys_->AddTenant("acme");
  ASSERT_TRUE(old_key.ok());
  auto new_key = keys_->RotateKey("acme");
  ASSERT_TRUE(new_key.ok()) << new_key.status().ToString();
  EXPECT_NE(*new_key, *old_key);
  EXPECT_EQ(keys_->Authenticate(*old_key), std::nullopt);
  EXPECT_EQ(keys_->Authenticate(*new_key), "acme");
  Reopen();
  EXPECT_EQ(keys_->Authenticate(*old_key), std::nullopt);
  EXPECT_EQ(keys_->Authenticate(*new_key), "acme");
  EXPECT_EQ(keys_->RotateKey("nobody").status().code(), StatusCode::kNotFound);
}

TEST_F(TenantKeysTest, RemovalForgetsTheKeyAndReloadSeesOtherProcesses) {
  auto key = keys_->AddTenant("acme");
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(keys_->RemoveTenant("acme").ok());
  EXPECT_EQ(keys_->Authenticate(*key), std::nullopt);
  EXPECT_EQ(keys_->RemoveTenant("acme").code(), StatusCode::kNotFound);

  // Another process (here another registry and index on the same data directory) adds a tenant;
  // this index sees it after Reload.
  auto other_registry = Registry::Open(dir_.path());
  ASSERT_TRUE(other_registry.ok());
  auto other_secret = ServerSecret::LoadOrCreate(dir_.path());
  ASSERT_TRUE(other_secret.ok());
  auto other = TenantKeys::Open(**other_registry, std::move(other_secret).value());
  ASSERT_TRUE(other.ok());
  auto globex = (*other)->AddTenant("globex");
  ASSERT_TRUE(globex.ok());
  EXPECT_EQ(keys_->Authenticate(*globex), std::nullopt);
  ASSERT_TRUE(keys_->Reload().ok());
  EXPECT_EQ(keys_->Authenticate(*globex), "globex");
}

TEST_F(TenantKeysTest, MatchesComparesAgainstAGivenHash) {
  const KeyHash admin = keys_->secret().Hash("the-admin-key-of-this-test");
  EXPECT_TRUE(keys_->Matches("the-admin-key-of-this-test", admin));
  EXPECT_FALSE(keys_->Matches("the-admin-key-of-this-tesT", admin));
  EXPECT_FALSE(keys_->Matches("", admin));
}

}  // namespace
}  // namespace gshare::serve
