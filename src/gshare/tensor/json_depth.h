// A bound on JSON nesting, checked on the raw text before any parser builds a tree from it, so
// that no input can drive a recursive walk (or the parser) arbitrarily deep.
#pragma once

#include <cstddef>
#include <string_view>

#include "gshare/common/status.h"

namespace gshare {

// InvalidArgument when arrays and objects in `text` nest deeper than `max_depth` (a flat object
// has depth 1). Brackets inside strings do not count. Malformed JSON is left to the parser: this
// only measures.
Status CheckJsonNesting(std::string_view text, std::size_t max_depth);

}  // namespace gshare
