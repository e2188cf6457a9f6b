// ModelFileStore: the tenants' model files of `gshare serve`, as the files API (docs/serve.md,
// "Model files") uploads, lists and deletes them.
//
//   DATA_DIR/models/<tenant>/<name>   the files, which a spec's `model_files` name (relative to
//                                     the tenant's folder); readable by the tenant's functions
//   DATA_DIR/uploads/                 bodies on their way in (removed at open: a crash's leftovers)
//   DATA_DIR/digests/<tenant>/        each file's SHA-256 with the size, time and inode it was
//                                     taken at (a file changed by hand is hashed again), named
//                                     by the SHA-256 of the file's name
//
// uploads/ and models/ must be on one filesystem (a commit is a rename).
//
// A name is relative: at most 8 '/'-separated parts of letters, digits, '.', '_' and '-', none
// empty, none starting with '.', 255 bytes each, 1024 in all (so no "..", no absolute path, and no
// name the server's own files could take). No symbolic link is followed: folders are opened one
// part at a time with O_NOFOLLOW, and a link found where a file is expected is no file.
//
// An upload streams: BeginUpload opens a file under uploads/ and reserves the bytes the body
// declares against the tenant's storage quota (a body of unknown length reserves as it grows); the
// Upload, a net::BodySink, writes each piece there and hashes it; Commit syncs it, checks the quota
// again against what the folder holds then, gives it its mode (and group) and renames it into
// place, so a reader sees the old file or the new one, never a part. An Upload dropped before its
// Commit removes its file and gives its reservation back: an upload that fails keeps nothing.
//
// Ownership: where functions run as their tenants' uids (`reader_group` gives a gid), files are
// mode 0640 and the folders the store creates 0750, in the tenant's group; otherwise 0600 and
// 0700 (the functions run as the server's uid).
//
// Limits: a tenant's storage (bytes), its number of files, and its uploads in progress at once.
//
// Threading: every method is thread-safe. BeginUpload and Append are made for an io thread (no
// work beyond the piece at hand and a walk of the tenant's folder, at most max_files entries
// deep; a body of unknown length walks it again every 8 MiB); Commit (which syncs the file),
// List, Find, Delete and RemoveTenant may read or hash whole files and belong on a worker.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/net/body_sink.h"

namespace gshare::serve {

struct ModelFileStoreOptions {
  std::filesystem::path data_dir;  // absolute
  // What a tenant's files may take on disk in all (429 beyond); 0: no bound.
  std::uint64_t tenant_storage_bytes = 20ULL << 30;
  // The largest file (413 beyond).
  std::uint64_t max_file_bytes = 4ULL << 30;
  // Files a tenant may keep, and uploads it may have in progress at once (429 beyond); 0: none.
  std::uint64_t max_files = 10'000;
  std::size_t max_uploads = 8;
  // The group of `tenant`'s function processes, which must read its files; nullopt where they run
  // as the server's own uid. Unset: nullopt for every tenant.
  std::function<Result<std::optional<gid_t>>(const std::string& tenant)> reader_group{};
};

struct ModelFileInfo {
  std::string name;  // relative to the tenant's folder
  std::uint64_t size = 0;
  std::string sha256;  // lowercase hex
};

class ModelFileStore;

// A body on its way to a tenant's file (BeginUpload). Append runs on the connection's io thread;
// the rest of the Upload is the store's.
class ModelFileUpload final : public net::BodySink {
 public:
  ~ModelFileUpload() override;
  ModelFileUpload(const ModelFileUpload&) = delete;
  ModelFileUpload& operator=(const ModelFileUpload&) = delete;

  // Writes and hashes `bytes`: 413 past the file limit, 429 past the tenant's storage, 500 when
  // the disk refuses (its reason logged, not told).
  std::optional<net::HttpResponse> Append(std::string_view bytes) override;

  const std::string& tenant() const { return tenant_; }
  const std::string& name() const { return name_; }
  std::uint64_t written() const { return written_; }

 private:
  friend class ModelFileStore;
  struct Hash;
  ModelFileUpload(ModelFileStore& store, std::string tenant, std::string name, int fd,
                  std::filesystem::path temp, std::uint64_t reserved, std::unique_ptr<Hash> hash);

  ModelFileStore& store_;
  const std::string tenant_;
  const std::string name_;
  int fd_;  // the file under uploads/, or -1 once committed
  const std::filesystem::path temp_;
  std::uint64_t reserved_;  // of the tenant's storage, given back when the upload ends
  std::uint64_t written_ = 0;
  std::unique_ptr<Hash> hash_;
};

class ModelFileStore {
 public:
  // Creates uploads/ and digests/ where missing and empties uploads/.
  static Result<std::unique_ptr<ModelFileStore>> Open(ModelFileStoreOptions options);
  ModelFileStore(const ModelFileStore&) = delete;
  ModelFileStore& operator=(const ModelFileStore&) = delete;

  // InvalidArgument, with the rule it breaks, for a name that is not as the file's comment says.
  static Status CheckName(std::string_view name);

  const ModelFileStoreOptions& options() const { return options_; }
  // Where `tenant`'s file `name` lives (whether or not it exists): what a spec's model_files
  // resolve to.
  std::filesystem::path PathOf(const std::string& tenant, const std::string& name) const;

  // Starts an upload of `name` into `tenant`'s folder, of `declared` bytes (nullopt: unknown
  // until it ends). InvalidArgument for a bad name, OutOfRange past the file limit,
  // ResourceExhausted past the tenant's storage (counting its files but the one replaced, and the
  // uploads in progress), an I/O error when the file cannot be made.
  Result<std::shared_ptr<ModelFileUpload>> BeginUpload(const std::string& tenant,
                                                       const std::string& name,
                                                       std::optional<std::uint64_t> declared)
      EXCLUDES(mutex_);
  // Puts the upload in place (replacing a file of that name) and says what it holds, with
  // whether a file was replaced. ResourceExhausted past the storage quota, FailedPrecondition where
  // a folder stands at the name (or a file where the name needs a folder); the upload is spent
  // either way.
  struct Committed {
    ModelFileInfo info;
    bool replaced = false;
  };
  Result<Committed> Commit(ModelFileUpload& upload) EXCLUDES(mutex_);

  // `tenant`'s files by name (none when its folder does not exist), hashing those whose digest
  // is missing or stale; the bytes they take.
  Result<std::vector<ModelFileInfo>> List(const std::string& tenant);
  // One file; NotFound when there is none of that name.
  Result<ModelFileInfo> Find(const std::string& tenant, const std::string& name);
  // Removes one file (NotFound when there is none) and its digest.
  Status Delete(const std::string& tenant, const std::string& name);
  // Removes the tenant's folder and digests (a removed tenant).
  void RemoveTenant(const std::string& tenant);

  // What `tenant`'s files take on disk, and what its uploads in progress have reserved.
  std::uint64_t StoredBytes(const std::string& tenant) const;
  std::uint64_t ReservedBytes(const std::string& tenant) const EXCLUDES(mutex_);

 private:
  friend class ModelFileUpload;
  explicit ModelFileStore(ModelFileStoreOptions options);

  // Reserves `bytes` more of `tenant`'s storage for an upload, given that its folder holds
  // `stored` bytes not counting the file it replaces; false past the quota.
  bool Reserve(const std::string& tenant, std::uint64_t stored, std::uint64_t bytes)
      EXCLUDES(mutex_);
  void Release(const std::string& tenant, std::uint64_t bytes) EXCLUDES(mutex_);
  // What `tenant`'s files take on disk and how many there are (a walk of its folder), all of them
  // or all but its file `name`.
  struct Usage {
    std::uint64_t bytes = 0;
    std::uint64_t files = 0;
  };
  Usage UsageOf(const std::string& tenant) const;
  Usage UsageBesides(const std::string& tenant, const std::string& name) const;
  // Counts an upload of `tenant` in progress; false at max_uploads.
  bool BeginUploadCount(const std::string& tenant) EXCLUDES(mutex_);
  void EndUpload(const std::string& tenant) EXCLUDES(mutex_);
  // InvalidArgument for a tenant's name that is no single plain part (it names a folder).
  static Status CheckTenant(std::string_view tenant);
  // A file (its name passed CheckName) with its digest: the stored one where it still matches
  // the file's size, time and inode, or a new one (then stored).
  Result<ModelFileInfo> Describe(const std::string& tenant, const std::string& name);
  Status WriteDigest(const std::string& tenant, const std::string& name, std::string_view sha256);
  std::filesystem::path DigestPath(const std::string& tenant, const std::string& name) const;

  const ModelFileStoreOptions options_;
  mutable Mutex mutex_;
  std::map<std::string, std::uint64_t> reserved_ GUARDED_BY(mutex_);
  std::map<std::string, std::size_t> uploads_ GUARDED_BY(mutex_);
  std::uint64_t next_upload_ GUARDED_BY(mutex_) = 0;
};

}  // namespace gshare::serve
