// The parse limits the KServe fuzz targets run with: small, so that large shapes are refused
// quickly and each input stays cheap.
#pragma once

#include "gshare/protocol/kserve_json.h"

inline gshare::ParseLimits SmallParseLimits() {
  gshare::ParseLimits limits;
  limits.max_text_bytes = 1 << 20;
  limits.max_tensor_bytes = 1 << 20;
  limits.max_elements = 1 << 16;
  limits.max_tensors = 64;
  limits.max_depth = 16;
  return limits;
}
