// The example models' weights as safetensors files: written by `gshare examples weights` from a
// seed (models/weights.h), read by the example functions and by the node's reference check.
#pragma once

#include <cstdint>
#include <filesystem>
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

// The model's weight block from `seed`, as a file written from it would give (the bundled
// runtimes' weights when a spec names no file).
Result<std::vector<float>> SeedExampleWeights(ModelKind kind, std::uint64_t seed);

// Writes, in `folder` (created when missing), mlp.safetensors and cnn.safetensors from the
// default seed where they are missing; returns the paths it wrote. The one helper for tools whose
// catalogs name those files (gshare node replay, gshare replay) and for benchmarks.
Result<std::vector<std::string>> EnsureExampleWeights(const std::filesystem::path& folder);

}  // namespace gshare::examples
