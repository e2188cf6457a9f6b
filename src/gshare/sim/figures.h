// Files and figures of the reports: text files written whole, and gnuplot scripts rendered to PNG
// where gnuplot is installed. Shared by the reports of `gshare sim` and `gshare compare`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "gshare/common/status.h"

namespace gshare {

// Writes `content` to `path`, replacing the file. IoError naming the path when it cannot.
Status WriteTextFile(const std::filesystem::path& path, const std::string& content);

// Whether a `gnuplot` command is on the PATH.
bool HaveGnuplot();

// Runs gnuplot on each of `scripts` (file names in `dir`) with `dir` as the working directory, so
// that their `set output` lands there. IoError naming the script when gnuplot fails on one.
Status RenderGnuplot(const std::filesystem::path& dir, const std::vector<std::string>& scripts);

}  // namespace gshare
