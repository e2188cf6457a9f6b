#include "gshare/serve/model_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gshare/serve/temp_dir_for_test.h"

namespace gshare::serve {
namespace {

// SHA-256 of "abc" and of nothing (FIPS 180-2's examples).
constexpr std::string_view kAbcSha256 =
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string ReadWhole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::size_t FilesIn(const std::filesystem::path& folder) {
  std::size_t count = 0;
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(folder, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_regular_file()) ++count;
  }
  return count;
}

class ModelFileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    Open(1000, 100);
  }
  void Open(std::uint64_t storage, std::uint64_t max_file) {
    store_.reset();
    ModelFileStoreOptions options;
    options.data_dir = dir_.path();
    options.tenant_storage_bytes = storage;
    options.max_file_bytes = max_file;
    auto store = ModelFileStore::Open(std::move(options));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }
  // Uploads `content` as `name` in `pieces` appends; the committed file or the error.
  Result<ModelFileStore::Committed> Put(const std::string& tenant, const std::string& name,
                                        std::string_view content, bool declared = true,
                                        std::size_t pieces = 3) {
    auto upload = store_->BeginUpload(
        tenant, name, declared ? std::optional<std::uint64_t>(content.size()) : std::nullopt);
    if (!upload.ok()) return upload.status();
    const std::size_t step = std::max<std::size_t>(1, content.size() / pieces);
    for (std::size_t at = 0; at < content.size(); at += step) {
      if (auto refusal = (*upload)->Append(content.substr(at, step))) {
        return Status(StatusCode::kCancelled, std::to_string(refusal->status));
      }
    }
    return store_->Commit(**upload);
  }

  TempDirForTest dir_;
  std::unique_ptr<ModelFileStore> store_;
};

TEST(ModelFileNameTest, PlainRelativeNamesOnly) {
  for (const std::string_view good :
       {"model.pt", "resnet18/model.pt", "a-b_c.1/D/e.safetensors", "x"}) {
    EXPECT_TRUE(ModelFileStore::CheckName(good).ok()) << good;
  }
  for (const std::string_view bad :
       {"", "/etc/passwd", "../alpha/model.pt", "a/../b", "a/./b", ".hidden", "a/.b", "a//b", "a/",
        "a b", "a\\b", "a%2Fb", "é", "a:b", "a/b/c/d/e/f/g/h/i"}) {
    const Status status = ModelFileStore::CheckName(bad);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_FALSE(status.message().empty());
  }
  EXPECT_FALSE(ModelFileStore::CheckName(std::string(256, 'a')).ok());
  EXPECT_TRUE(ModelFileStore::CheckName(std::string(255, 'a')).ok());
  EXPECT_FALSE(ModelFileStore::CheckName(std::string(200, 'a') + "/" + std::string(200, 'b') + "/" +
                                         std::string(200, 'c') + "/" + std::string(200, 'd') + "/" +
                                         std::string(200, 'e') + "/" + std::string(200, 'f'))
                   .ok());  // over 1024 in all
}

TEST_F(ModelFileStoreTest, AnUploadIsStoredWithItsDigestAndListed) {
  auto put = Put("alpha", "nets/abc.bin", "abc");
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_FALSE(put->replaced);
  EXPECT_EQ(put->info.name, "nets/abc.bin");
  EXPECT_EQ(put->info.size, 3u);
  EXPECT_EQ(put->info.sha256, kAbcSha256);
  EXPECT_EQ(ReadWhole(dir_.path() / "models/alpha/nets/abc.bin"), "abc");
  struct stat info {};
  ASSERT_EQ(::stat((dir_.path() / "models/alpha/nets/abc.bin").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);  // no reader group: the functions run as this uid
  EXPECT_EQ(FilesIn(dir_.path() / "uploads"), 0u);

  ASSERT_TRUE(Put("alpha", "empty", "").ok());
  auto listed = store_->List("alpha");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name, "empty");
  EXPECT_EQ((*listed)[0].sha256, kEmptySha256);
  EXPECT_EQ((*listed)[1].name, "nets/abc.bin");
  EXPECT_EQ((*listed)[1].sha256, kAbcSha256);
  EXPECT_EQ(store_->StoredBytes("alpha"), 3u);
  // Another tenant sees none of it.
  auto beta = store_->List("beta");
  ASSERT_TRUE(beta.ok());
  EXPECT_TRUE(beta->empty());
  EXPECT_EQ(store_->Find("beta", "nets/abc.bin").status().code(), StatusCode::kNotFound);
}

TEST_F(ModelFileStoreTest, AReplacementIsWholeAndAChangeByHandIsHashedAgain) {
  ASSERT_TRUE(Put("alpha", "m.pt", "first version").ok());
  auto again = Put("alpha", "m.pt", "abc");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->replaced);
  EXPECT_EQ(ReadWhole(dir_.path() / "models/alpha/m.pt"), "abc");
  {
    std::ofstream by_hand(dir_.path() / "models/alpha/m.pt", std::ios::trunc);
    by_hand << "";
  }
  auto found = store_->Find("alpha", "m.pt");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->size, 0u);
  EXPECT_EQ(found->sha256, kEmptySha256);
}

TEST_F(ModelFileStoreTest, AnUploadDroppedBeforeItsCommitKeepsNothing) {
  {
    auto upload = store_->BeginUpload("alpha", "m.pt", 50);
    ASSERT_TRUE(upload.ok());
    EXPECT_EQ(store_->ReservedBytes("alpha"), 50u);
    EXPECT_FALSE((*upload)->Append("part of it"));
    EXPECT_EQ(FilesIn(dir_.path() / "uploads"), 1u);
  }
  EXPECT_EQ(FilesIn(dir_.path() / "uploads"), 0u);
  EXPECT_EQ(FilesIn(dir_.path() / "models"), 0u);
  EXPECT_EQ(store_->ReservedBytes("alpha"), 0u);
}

TEST_F(ModelFileStoreTest, TheFileLimitAndTheStorageQuotaRefuseAndKeepNothing) {
  // Declared past the file limit (100): refused before anything is written.
  EXPECT_EQ(store_->BeginUpload("alpha", "big", 101).status().code(), StatusCode::kOutOfRange);
  // Of unknown length, refused at the piece that crosses it.
  auto unknown = Put("alpha", "big", std::string(101, 'x'), /*declared=*/false, 2);
  EXPECT_EQ(unknown.status().message(), "413");
  // The quota (1000) counts what is stored and what is being uploaded.
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(Put("alpha", "f" + std::to_string(i), std::string(100, 'x')).ok());
  }
  auto held = store_->BeginUpload("alpha", "held", 60);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(store_->BeginUpload("alpha", "over", 50).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(Put("alpha", "over", std::string(50, 'x'), /*declared=*/false).status().message(),
            "429");
  // A replacement counts instead of the file it replaces.
  EXPECT_TRUE(Put("alpha", "f0", std::string(100, 'y')).ok());
  // Another tenant's quota is its own.
  EXPECT_TRUE(Put("beta", "f", std::string(100, 'x')).ok());
  held->reset();
  EXPECT_TRUE(Put("alpha", "last", std::string(100, 'z')).ok());
  EXPECT_EQ(store_->StoredBytes("alpha"), 1000u);
  EXPECT_EQ(FilesIn(dir_.path() / "uploads"), 0u);
  EXPECT_EQ(store_->Find("alpha", "over").status().code(), StatusCode::kNotFound);
}

TEST_F(ModelFileStoreTest, UploadsOfUnknownLengthShareTheQuotaAndTheCommitChecksItAgain) {
  Open(150, 100);
  auto first = store_->BeginUpload("alpha", "a", std::nullopt);
  auto second = store_->BeginUpload("alpha", "b", std::nullopt);
  ASSERT_TRUE(first.ok() && second.ok());
  // Each within the quota, the two together over it: the second is refused as it grows.
  EXPECT_FALSE((*first)->Append(std::string(100, 'a')));
  auto refused = (*second)->Append(std::string(100, 'b'));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 429);
  ASSERT_TRUE(store_->Commit(**first).ok());
  EXPECT_EQ(store_->StoredBytes("alpha"), 100u);
  // A file placed by hand meanwhile counts at the commit.
  auto third = store_->BeginUpload("alpha", "c", 40);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE((*third)->Append(std::string(40, 'c')));
  {
    std::ofstream by_hand(dir_.path() / "models/alpha/by-hand");
    by_hand << std::string(20, 'h');
  }
  EXPECT_EQ(store_->Commit(**third).status().code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "models/alpha/c"));
  EXPECT_EQ(FilesIn(dir_.path() / "uploads"), 1u);  // the second's, until it goes
  second->reset();
  EXPECT_EQ(FilesIn(dir_.path() / "uploads"), 0u);
}

TEST_F(ModelFileStoreTest, NoLinkIsFollowed) {
  const auto outside = dir_.path() / "outside";
  std::filesystem::create_directories(outside);
  {
    std::ofstream secret(outside / "secret");
    secret << "server's";
  }
  std::filesystem::create_directories(dir_.path() / "models/alpha");
  std::filesystem::create_directory_symlink(outside, dir_.path() / "models/alpha/link");
  std::filesystem::create_symlink(outside / "secret", dir_.path() / "models/alpha/secret");
  // Neither listed nor found nor deleted through.
  auto listed = store_->List("alpha");
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  EXPECT_EQ(store_->Find("alpha", "secret").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Find("alpha", "link/secret").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Delete("alpha", "link/secret").code(), StatusCode::kNotFound);
  // An upload through the folder link is refused; one onto the file link replaces the link.
  auto through = Put("alpha", "link/new", "abc");
  EXPECT_EQ(through.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(outside / "new"));
  ASSERT_TRUE(Put("alpha", "secret", "abc").ok());
  EXPECT_EQ(ReadWhole(outside / "secret"), "server's");
  EXPECT_FALSE(std::filesystem::is_symlink(dir_.path() / "models/alpha/secret"));
}

TEST_F(ModelFileStoreTest, ALongNameKeepsItsDigestAndLimitsCountFilesAndUploads) {
  const std::string long_name = std::string(250, 'a') + "/" + std::string(250, 'b');
  ASSERT_TRUE(Put("alpha", long_name, "abc").ok());
  EXPECT_EQ(FilesIn(dir_.path() / "digests" / "alpha"), 1u);  // kept, so not hashed again
  auto found = store_->Find("alpha", long_name);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->sha256, kAbcSha256);

  ModelFileStoreOptions options;
  options.data_dir = dir_.path();
  options.max_files = 2;
  options.max_uploads = 1;
  auto limited = ModelFileStore::Open(std::move(options));
  ASSERT_TRUE(limited.ok());
  store_ = std::move(limited).value();
  auto second = Put("alpha", "second", "abc");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(store_->BeginUpload("alpha", "third", 1).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(Put("alpha", "second", "abcd").ok());  // a replacement adds no file
  auto held = store_->BeginUpload("alpha", "second", 1);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(store_->BeginUpload("alpha", "second", 1).status().code(),
            StatusCode::kResourceExhausted);  // one upload at a time
  EXPECT_TRUE(store_->BeginUpload("beta", "x", 1).ok());
  held->reset();
  EXPECT_TRUE(store_->BeginUpload("alpha", "second", 1).ok());
}

TEST_F(ModelFileStoreTest, DeleteRemovesTheFileAndAFolderIsNoFile) {
  ASSERT_TRUE(Put("alpha", "nets/a.pt", "abc").ok());
  EXPECT_EQ(Put("alpha", "nets", "abc").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Put("alpha", "nets/a.pt/b", "abc").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Delete("alpha", "nets").code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->Delete("alpha", "nets/a.pt").ok());
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "models/alpha/nets/a.pt"));
  // The folder it left empty went with it: the name is free for a file.
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "models/alpha/nets"));
  ASSERT_TRUE(Put("alpha", "nets", "abc").ok());
  EXPECT_TRUE(store_->Delete("alpha", "nets").ok());
  EXPECT_EQ(store_->Delete("alpha", "nets/a.pt").code(), StatusCode::kNotFound);
  EXPECT_EQ(FilesIn(dir_.path() / "digests"), 0u);
  ASSERT_TRUE(Put("alpha", "x", "abc").ok());
  store_->RemoveTenant("alpha");
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "models/alpha"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "digests/alpha"));
  EXPECT_EQ(store_->BeginUpload("..", "x", 1).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ModelFileStoreTest, AReaderGroupGetsTheFilesAndFoldersItNeeds) {
  // Our own group: chown to it needs no privilege.
  ModelFileStoreOptions options;
  options.data_dir = dir_.path();
  options.reader_group = [](const std::string&) -> Result<std::optional<gid_t>> {
    return std::optional<gid_t>(::getegid());
  };
  auto store = ModelFileStore::Open(std::move(options));
  ASSERT_TRUE(store.ok());
  auto upload = (*store)->BeginUpload("alpha", "nets/m.pt", 3);
  ASSERT_TRUE(upload.ok());
  EXPECT_FALSE((*upload)->Append("abc"));
  ASSERT_TRUE((*store)->Commit(**upload).ok());
  struct stat info {};
  ASSERT_EQ(::stat((dir_.path() / "models/alpha/nets/m.pt").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0640u);
  ASSERT_EQ(::stat((dir_.path() / "models/alpha/nets").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0750u);
  EXPECT_EQ(info.st_gid, ::getegid());
}

TEST_F(ModelFileStoreTest, OpeningRemovesWhatACrashLeftHalfUploaded) {
  {
    std::ofstream left(dir_.path() / "uploads" / "123-0");
    left << "partial";
  }
  Open(1000, 100);
  EXPECT_EQ(FilesIn(dir_.path() / "uploads"), 0u);
}

}  // namespace
}  // namespace gshare::serve
