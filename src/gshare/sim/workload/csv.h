// CsvFile: fast, allocation-free reading of simple comma-separated files.
//
// The whole file is read into memory once; rows are handed out as string_views into that buffer,
// so a row costs no allocation. Fields are split on commas and trimmed of spaces, tabs and CR;
// quoting is not supported (none of the trace formats quote fields). Blank lines are skipped but
// counted, so line() always names the file's own line number. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"

namespace gshare {

class CsvFile {
 public:
  // Reads `path`. NotFound when it cannot be opened, Io when reading fails.
  static Result<CsvFile> Open(const std::string& path);
  // A file whose content is `text` (tests, in-memory data); `path` names it in errors.
  static CsvFile FromText(std::string text, std::string path);

  // Moves to the next non-blank line and splits it into `fields` (cleared first). Returns false
  // at the end of the file. The views stay valid as long as this CsvFile lives.
  bool NextRow(std::vector<std::string_view>& fields);

  const std::string& path() const { return path_; }
  // 1-based line number of the row NextRow returned last.
  std::size_t line() const { return line_; }

  // "path:line: message" as InvalidArgument, for the row returned last.
  Status Error(std::string_view message) const;

 private:
  CsvFile(std::string text, std::string path) : text_(std::move(text)), path_(std::move(path)) {}

  std::string text_;
  std::string path_;
  std::size_t position_ = 0;
  std::size_t line_ = 0;
};

// Strict number parsing of a whole field (no trailing characters). False when it is not one.
bool ParseDouble(std::string_view text, double& value);
bool ParseInt64(std::string_view text, std::int64_t& value);

// The index of the header column called `name` (exact match), or -1.
int FindColumn(const std::vector<std::string_view>& header, std::string_view name);

}  // namespace gshare
