// Conversions between IEEE 754 binary16 (FP16) and double, independent of the host's support for
// half precision. Pure functions: safe from any thread.
#pragma once

#include <optional>

#include "gshare/tensor/data_type.h"

namespace gshare {

// The exact value of `h` (every half is a double); infinities and NaN map to their doubles.
double HalfToDouble(Half h);

// `value` rounded to the nearest half, ties to even (one rounding, straight from double, so no
// double-rounding error). nullopt when `value` is NaN or infinite, or rounds beyond the largest
// half (|value| >= 65520): a finite input never silently becomes an infinity.
std::optional<Half> DoubleToHalf(double value);

}  // namespace gshare
