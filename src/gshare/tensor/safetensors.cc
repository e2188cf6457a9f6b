#include "gshare/tensor/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gshare/tensor/json_depth.h"
#include "gshare/tensor/mapped_file.h"

namespace gshare {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";

struct DtypeName {
  std::string_view name;
  DataType type;
};
constexpr std::array<DtypeName, 12> kDtypes = {{
    {"BOOL", DataType::kBool},
    {"U8", DataType::kUint8},
    {"I8", DataType::kInt8},
    {"U16", DataType::kUint16},
    {"I16", DataType::kInt16},
    {"U32", DataType::kUint32},
    {"I32", DataType::kInt32},
    {"U64", DataType::kUint64},
    {"I64", DataType::kInt64},
    {"F16", DataType::kFp16},
    {"F32", DataType::kFp32},
    {"F64", DataType::kFp64},
}};

Result<DataType> DtypeFromName(std::string_view name, const std::string& tensor) {
  for (const DtypeName& d : kDtypes) {
    if (d.name == name) return d.type;
  }
  return InvalidArgument(fmt::format(
      "tensor '{}': dtype '{}' is not supported (supported: BOOL, U8, I8, U16, I16, U32, I32, "
      "U64, I64, F16, F32, F64)",
      tensor, name.substr(0, 32)));
}

// A non-negative JSON integer that fits in int64, or nullopt.
std::optional<std::int64_t> NonNegativeInteger(const Json& value) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<std::int64_t>(v);
  }
  if (value.is_number_integer()) {
    const auto v = value.get<std::int64_t>();
    if (v >= 0) return v;
  }
  return std::nullopt;
}

struct Entry {
  std::string name;
  DataType type;
  std::vector<std::int64_t> shape;
  std::uint64_t begin;
  std::uint64_t end;
};

Result<Entry> ParseEntry(const std::string& name, const Json& value) {
  const std::string where = "tensor '" + name + "'";
  if (!value.is_object()) return InvalidArgument(where + ": entry is not an object");
  for (const auto& [key, unused] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return InvalidArgument(where + ": unknown field '" + key.substr(0, 32) + "'");
    }
  }
  const auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) {
    return InvalidArgument(where + ": 'dtype' is missing or not a string");
  }
  Entry entry{name, DataType::kUint8, {}, 0, 0};
  GSHARE_ASSIGN_OR_RETURN(entry.type, DtypeFromName(dtype->get_ref<const std::string&>(), name));
  const auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) {
    return InvalidArgument(where + ": 'shape' is missing or not an array");
  }
  if (shape->size() > Tensor::kMaxRank) {
    return InvalidArgument(fmt::format("{}: shape has {} dimensions (at most {})", where,
                                       shape->size(), Tensor::kMaxRank));
  }
  for (const Json& dim : *shape) {
    const auto d = NonNegativeInteger(dim);
    if (!d) return InvalidArgument(where + ": a shape dimension is not a non-negative integer");
    entry.shape.push_back(*d);
  }
  const auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2) {
    return InvalidArgument(where + ": 'data_offsets' is missing or not [begin, end]");
  }
  const auto begin = NonNegativeInteger((*offsets)[0]);
  const auto end = NonNegativeInteger((*offsets)[1]);
  if (!begin || !end) {
    return InvalidArgument(where + ": 'data_offsets' are not non-negative integers");
  }
  if (*begin > *end) {
    return InvalidArgument(
        fmt::format("{}: data_offsets [{}, {}) end before they begin", where, *begin, *end));
  }
  entry.begin = static_cast<std::uint64_t>(*begin);
  entry.end = static_cast<std::uint64_t>(*end);
  auto count = ElementCount(entry.shape);
  if (!count.ok()) return count.status().WithContext(where);
  auto bytes = FixedByteSize(entry.type, *count);
  if (!bytes.ok()) return bytes.status().WithContext(where);
  if (*bytes != entry.end - entry.begin) {
    return InvalidArgument(
        fmt::format("{}: {} of shape {} needs {} bytes, data_offsets [{}, {}) "
                    "hold {}",
                    where, dtype->get_ref<const std::string&>(), ShapeToString(entry.shape), *bytes,
                    entry.begin, entry.end, entry.end - entry.begin));
  }
  return entry;
}

// Parses the header text, refusing duplicate names at the top level and duplicate fields in an
// entry (a plain parse would keep the last silently).
Result<Json> ParseHeaderJson(std::string_view text) {
  GSHARE_RETURN_IF_ERROR(CheckJsonNesting(text, 3).WithContext("safetensors header"));
  std::set<std::string> names;
  std::set<std::string> fields;
  std::string duplicate;
  const Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start && depth == 1) fields.clear();
    if (event == Json::parse_event_t::key && duplicate.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (depth == 1 && !names.insert(key).second) duplicate = "name '" + key + "'";
      if (depth == 2 && !fields.insert(key).second) duplicate = "field '" + key + "'";
    }
    return true;
  };
  Json header = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
  if (header.is_discarded()) return InvalidArgument("safetensors header is not valid JSON");
  if (!duplicate.empty()) {
    return InvalidArgument("safetensors header has a duplicate " + duplicate.substr(0, 80));
  }
  if (!header.is_object()) return InvalidArgument("safetensors header is not a JSON object");
  return header;
}

Result<SafetensorsFile> ParseUnguarded(std::span<const std::byte> file) {
  if (file.size() < 8) {
    return InvalidArgument(fmt::format(
        "safetensors file of {} bytes is shorter than its 8-byte header length", file.size()));
  }
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) {
    header_bytes =
        (header_bytes << 8) | std::to_integer<std::uint64_t>(file[static_cast<std::size_t>(i)]);
  }
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return InvalidArgument(fmt::format("safetensors header length {} exceeds the limit of {}",
                                       header_bytes, kMaxSafetensorsHeaderBytes));
  }
  if (header_bytes > file.size() - 8) {
    return InvalidArgument(
        fmt::format("safetensors header length {} runs past the end of the file ({} bytes)",
                    header_bytes, file.size()));
  }
  const auto header_size = static_cast<std::size_t>(header_bytes);
  const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), header_size);
  GSHARE_ASSIGN_OR_RETURN(const Json header, ParseHeaderJson(text));
  const std::span<const std::byte> buffer = file.subspan(8 + header_size);

  SafetensorsFile result;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      if (!value.is_object()) return InvalidArgument("__metadata__ is not an object");
      for (const auto& [key, text_value] : value.items()) {
        if (!text_value.is_string()) {
          return InvalidArgument("__metadata__ value '" + key.substr(0, 64) + "' is not a string");
        }
        result.metadata.emplace(key, text_value.get<std::string>());
      }
      continue;
    }
    if (name.empty()) return InvalidArgument("safetensors header has a tensor with an empty name");
    GSHARE_ASSIGN_OR_RETURN(Entry entry, ParseEntry(name, value));
    if (entry.end > buffer.size()) {
      return InvalidArgument(
          fmt::format("tensor '{}': data_offsets [{}, {}) run past the data buffer of {} bytes",
                      name, entry.begin, entry.end, buffer.size()));
    }
    entries.push_back(std::move(entry));
  }

  // Sorted by range, the entries must tile the buffer: each starts where the previous ended.
  std::vector<const Entry*> by_offset;
  by_offset.reserve(entries.size());
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  std::uint64_t covered = 0;
  for (const Entry* e : by_offset) {
    if (e->begin != covered) {
      return InvalidArgument(
          fmt::format("tensor '{}': data_offsets [{}, {}) {}", e->name, e->begin, e->end,
                      e->begin < covered ? "overlap another tensor" : "leave a gap before them"));
    }
    covered = e->end;
  }
  if (covered != buffer.size()) {
    return InvalidArgument(fmt::format(
        "safetensors data buffer has {} bytes but the tensors cover {}", buffer.size(), covered));
  }

  // nlohmann's object keeps keys sorted, so the tensors come out in name order.
  result.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    const auto bytes = buffer.subspan(static_cast<std::size_t>(e.begin),
                                      static_cast<std::size_t>(e.end - e.begin));
    GSHARE_ASSIGN_OR_RETURN(Tensor tensor,
                            Tensor::FromBytes(std::move(e.name), e.type, std::move(e.shape),
                                              std::vector<std::byte>(bytes.begin(), bytes.end())));
    result.tensors.push_back(std::move(tensor));
  }
  return result;
}

// Closes a file descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() { Close(); }
  int Close() {
    const int rc = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

}  // namespace

const Tensor* SafetensorsFile::Find(std::string_view name) const {
  const auto it =
      std::lower_bound(tensors.begin(), tensors.end(), name,
                       [](const Tensor& t, std::string_view n) { return t.name() < n; });
  if (it == tensors.end() || it->name() != name) return nullptr;
  return &*it;
}

Result<std::string_view> SafetensorsDtypeName(DataType type) {
  for (const DtypeName& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return InvalidArgument(
      fmt::format("{} tensors cannot be stored in safetensors", DataTypeName(type)));
}

Result<SafetensorsFile> ParseSafetensors(std::span<const std::byte> file) {
  try {
    return ParseUnguarded(file);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory reading a safetensors file");
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("safetensors: ") + e.what());
  }
}

Result<SafetensorsFile> ReadSafetensorsFile(const std::string& path) {
  GSHARE_ASSIGN_OR_RETURN(const MappedFile file, MappedFile::Open(path));
  auto parsed = ParseSafetensors(file.bytes());
  if (!parsed.ok()) return parsed.status().WithContext(path);
  return parsed;
}

Result<std::vector<std::byte>> SerializeSafetensors(
    std::span<const Tensor> tensors, const std::map<std::string, std::string>& metadata) {
  std::vector<const Tensor*> sorted;
  sorted.reserve(tensors.size());
  for (const Tensor& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const Tensor* a, const Tensor* b) { return a->name() < b->name(); });
  try {
    Json header = Json::object();
    std::size_t offset = 0;
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      const Tensor& t = *sorted[i];
      if (t.name().empty()) return InvalidArgument("a tensor has an empty name");
      if (t.name() == kMetadataKey) {
        return InvalidArgument("'__metadata__' is reserved and cannot name a tensor");
      }
      if (i > 0 && sorted[i - 1]->name() == t.name()) {
        return InvalidArgument("two tensors are named '" + t.name() + "'");
      }
      auto dtype = SafetensorsDtypeName(t.datatype());
      if (!dtype.ok()) return dtype.status().WithContext("tensor '" + t.name() + "'");
      const std::size_t size = t.raw_bytes().size();
      if (offset > std::numeric_limits<std::size_t>::max() - size) {
        return InvalidArgument("tensors too large for one file");
      }
      header[t.name()] = {{"dtype", std::string(*dtype)},
                          {"shape", t.shape()},
                          {"data_offsets", {offset, offset + size}}};
      offset += size;
    }
    if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
    std::string text = header.dump();  // throws on names that are not valid UTF-8
    text.append((8 - text.size() % 8) % 8, ' ');
    if (text.size() > kMaxSafetensorsHeaderBytes) {
      return InvalidArgument("safetensors header would exceed its limit");
    }
    std::vector<std::byte> out;
    out.reserve(8 + text.size() + offset);
    std::uint64_t length = text.size();
    for (int i = 0; i < 8; ++i) {
      out.push_back(static_cast<std::byte>(length & 0xffu));
      length >>= 8;
    }
    for (char c : text) out.push_back(static_cast<std::byte>(c));
    for (const Tensor* t : sorted)
      out.insert(out.end(), t->raw_bytes().begin(), t->raw_bytes().end());
    return out;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("safetensors header: ") + e.what());
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory writing a safetensors file");
  }
}

Status WriteSafetensorsFile(const std::string& path, std::span<const Tensor> tensors,
                            const std::map<std::string, std::string>& metadata) {
  GSHARE_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes,
                          SerializeSafetensors(tensors, metadata));
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(temporary + ": " + std::strerror(errno));
  FdCloser closer(fd);
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string message = temporary + ": " + std::strerror(errno);
      ::unlink(temporary.c_str());
      return IoError(message);
    }
    written += static_cast<std::size_t>(n);
  }
  if (closer.Close() != 0 || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string message = path + ": " + std::strerror(errno);
    ::unlink(temporary.c_str());
    return IoError(message);
  }
  return Status::Ok();
}

}  // namespace gshare
