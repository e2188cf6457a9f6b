// Small statistics the benchmark commands share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace gshare::cli {

// The median of `values` (the mean of the two middle ones for an even count); 0 for none.
inline double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace gshare::cli
