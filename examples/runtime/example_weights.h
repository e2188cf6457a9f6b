// The example models' weights as safetensors files: written by `gshare examples weights` from a
// seed (models/weights.h), read by the example functions and by the node's reference check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "examples/models/model_layout.h"
#include "examples/models/weights.h"
#include "gshare/common/status.h"

namespace gshare::examples {

// The seed the bundled catalog's weights come from.
inline constexpr std::uint64_t kDefaultWeightSeed = 1;

// Writes the weights of `kind` from `seed` to `path` (float32 tensors named as the layout's
// parameters; metadata: model, seed).
Status WriteExampleWeights(ModelKind kind, std::uint64_t seed, const std::string& path);

// Reads `path` and returns the model's weight block (layout order), checked against the layout
// (names, shapes, float32, finite, bounded). Errors name the file.
Result<std::vector<float>> LoadExampleWeights(ModelKind kind, const std::string& path);

}  // namespace gshare::examples
