#include "gshare/sim/workload/csv.h"

#include <fmt/format.h>
#include <charconv>
#include <cmath>
#include <fstream>

namespace gshare {
namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\r')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

Result<CsvFile> CsvFile::Open(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("{}: cannot open the file", path));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return IoError(fmt::format("{}: cannot read the file size", path));
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<std::size_t>(size), '\0');
  if (size > 0 && !in.read(text.data(), size)) {
    return IoError(fmt::format("{}: read failed", path));
  }
  return CsvFile(std::move(text), path);
}

CsvFile CsvFile::FromText(std::string text, std::string path) {
  return CsvFile(std::move(text), std::move(path));
}

bool CsvFile::NextRow(std::vector<std::string_view>& fields) {
  fields.clear();
  const std::string_view all(text_);
  while (position_ < all.size()) {
    std::size_t end = all.find('\n', position_);
    if (end == std::string_view::npos) end = all.size();
    const std::string_view line = Trim(all.substr(position_, end - position_));
    position_ = end + 1;
    ++line_;
    if (line.empty()) continue;
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = line.find(',', start);
      if (comma == std::string_view::npos) {
        fields.push_back(Trim(line.substr(start)));
        break;
      }
      fields.push_back(Trim(line.substr(start, comma - start)));
      start = comma + 1;
    }
    return true;
  }
  return false;
}

Status CsvFile::Error(std::string_view message) const {
  return InvalidArgument(fmt::format("{}:{}: {}", path_, line_, message));
}

bool ParseDouble(std::string_view text, double& value) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && error == std::errc() && end == text.data() + text.size() &&
         std::isfinite(value);
}

bool ParseInt64(std::string_view text, std::int64_t& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

int FindColumn(const std::vector<std::string_view>& header, std::string_view name) {
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace gshare
