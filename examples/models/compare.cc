#include "examples/models/compare.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace gshare::examples {

std::string OutputComparison::ToString() const {
  return fmt::format(
      "worst relative error {:.3g} at [{}, {}] (actual {}, reference {}, row scale "
      "{:.6g})",
      worst_relative_error, worst_row, worst_column, worst_actual, worst_reference,
      worst_row_scale);
}

Result<OutputComparison> CompareOutputs(std::span<const float> actual,
                                        std::span<const float> reference, std::int64_t columns,
                                        double rel_tol) {
  if (columns <= 0) return InvalidArgument(fmt::format("columns {} is not positive", columns));
  if (!std::isfinite(rel_tol) || rel_tol <= 0.0) {
    return InvalidArgument(
        fmt::format("relative tolerance {} is not finite and positive", rel_tol));
  }
  const auto width = static_cast<std::size_t>(columns);
  if (actual.size() != reference.size() || reference.size() % width != 0) {
    return InvalidArgument(fmt::format("{} actual and {} reference values do not form rows of {}",
                                       actual.size(), reference.size(), columns));
  }
  OutputComparison result;
  const std::size_t rows = reference.size() / width;
  for (std::size_t row = 0; row < rows; ++row) {
    const auto ref_row = reference.subspan(row * width, width);
    const auto act_row = actual.subspan(row * width, width);
    double scale = 0.0;
    for (std::size_t j = 0; j < width; ++j) {
      if (!std::isfinite(ref_row[j])) {
        return InvalidArgument(
            fmt::format("reference value {} at [{}, {}] is not finite", ref_row[j], row, j));
      }
      scale = std::max(scale, std::fabs(static_cast<double>(ref_row[j])));
    }
    for (std::size_t j = 0; j < width; ++j) {
      const double a = act_row[j];
      const double r = ref_row[j];
      double error = 0.0;
      if (!std::isfinite(a)) {
        error = std::numeric_limits<double>::infinity();
      } else if (a != r) {
        error = scale > 0.0 ? std::fabs(a - r) / scale : std::numeric_limits<double>::infinity();
      }
      if (error > result.worst_relative_error) {
        result.worst_relative_error = error;
        result.worst_row = static_cast<std::int64_t>(row);
        result.worst_column = static_cast<std::int64_t>(j);
        result.worst_actual = act_row[j];
        result.worst_reference = ref_row[j];
        result.worst_row_scale = scale;
      }
    }
  }
  result.within_tolerance = result.worst_relative_error <= rel_tol;
  return result;
}

}  // namespace gshare::examples
