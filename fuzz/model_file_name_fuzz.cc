// Fuzz target: the files API's file names (serve/model_files.h, ModelFileStore::CheckName), the
// rest of a `PUT /api/v1/files/{name}` path. A name it lets through must stay inside the tenant's
// folder once resolved, whatever its bytes: relative, no '.' or '..' part, no empty part, only the
// plain characters, within the lengths.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gshare/serve/model_files.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  const gshare::Status status = gshare::serve::ModelFileStore::CheckName(name);
  if (!status.ok()) {
    Check(status.code() == gshare::StatusCode::kInvalidArgument && !status.message().empty());
    return 0;
  }
  Check(!name.empty() && name.size() <= 1024 && name.front() != '/' && name.back() != '/');
  std::size_t parts = 0;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = name.find('/', start);
    const std::string_view part =
        std::string_view(name).substr(start, slash == std::string::npos ? slash : slash - start);
    ++parts;
    Check(!part.empty() && part.size() <= 255 && part.front() != '.');
    for (const char c : part) {
      Check((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '.' || c == '_' || c == '-');
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  Check(parts <= 8);
  // Resolved under a tenant's folder, it stays there.
  const std::filesystem::path folder = "/data/models/alpha";
  const std::string resolved = (folder / name).lexically_normal().string();
  Check(resolved.starts_with("/data/models/alpha/"));
  return 0;
}
