// Comparing a function's logits with the reference's.
//
// The rule: an output row passes when every element satisfies
//     |actual - reference| <= rel_tol * max_j |reference_row[j]|,
// that is, the error is measured against the largest magnitude in that example's reference
// logits, not against the element's own value. A logit near zero has a rounding error of the size
// of its row's terms, not of its own value, so a purely element-wise relative test would fail
// correct outputs; and what a classifier's logits mean (softmax, argmax) is unchanged by errors
// small next to the row's range. A row whose reference is all zeros must match exactly; a
// non-finite actual value always fails.
//
// Pure and thread-safe. Errors (InvalidArgument): sizes differ or are not a multiple of
// `columns`, columns <= 0, rel_tol not finite and positive, a non-finite reference value.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "gshare/common/status.h"

namespace gshare::examples {

inline constexpr double kDefaultRelativeTolerance = 1e-4;

struct OutputComparison {
  bool within_tolerance = true;
  // max over elements of |actual - reference| / row scale (infinite for a non-finite actual or a
  // mismatch in an all-zero row); within_tolerance is worst_relative_error <= rel_tol.
  double worst_relative_error = 0.0;
  // Where the worst element lies, and its values (row 0, column 0 when all match exactly).
  std::int64_t worst_row = 0;
  std::int64_t worst_column = 0;
  float worst_actual = 0.0F;
  float worst_reference = 0.0F;
  double worst_row_scale = 0.0;  // max |reference| of the worst element's row

  // "worst relative error 3.1e-07 at [2, 7] (actual 0.0012, reference 0.0011, row scale 4.2)".
  std::string ToString() const;
};

// Compares row-major [rows, columns] outputs by the rule above.
Result<OutputComparison> CompareOutputs(std::span<const float> actual,
                                        std::span<const float> reference, std::int64_t columns,
                                        double rel_tol = kDefaultRelativeTolerance);

}  // namespace gshare::examples
