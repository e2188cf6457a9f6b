// Deterministic weights and inputs for the example models, and the checks on loaded weights.
//
// Weights come from a seed, never from a download. Parameter array `name` of a model draws from
// its own stream, gshare::Random (xoshiro256**, seeded by SplitMix64; common/random.h) seeded
// with `seed ^ Fnv1a64(name)`, so arrays do not depend on one another's sizes. Each value takes
// the top 24 bits k of one 64-bit draw, forms the odd integer s = 2k + 1 - 2^24 (|s| < 2^24, exact
// in float), u = s * 2^-24 in (-1, 1), and returns float(bound) * u (one IEEE float product). The
// bound is He/Kaiming-uniform for weights, sqrt(6 / fan_in), which keeps the variance of ReLU
// activations roughly constant from layer to layer, and 1 / sqrt(fan_in) for biases. Only integer
// arithmetic, exact conversions, a correctly rounded sqrt and one rounded product are involved, so
// a seed gives identical bytes on every IEEE-754 machine and compiler.
//
// Inputs are drawn the same way (stream seeded with the seed itself), uniform in [0, 1) as
// k * 2^-24: image pixels scaled to the unit interval.
//
// All functions are pure and thread-safe; errors are returned as Status, never thrown.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "examples/models/model_layout.h"
#include "gshare/common/status.h"

namespace gshare::examples {

// The bound on every weight and bias that ValidateWeights accepts. Generated values stay below
// 0.5. With |w| <= 1 and inputs within kMaxInputMagnitude, every activation of both models stays
// below 1e20, so outputs are finite.
inline constexpr float kMaxWeightMagnitude = 1.0F;
// The bound on input values that the forward pass and the reference accept (finite, |x| <= it).
inline constexpr float kMaxInputMagnitude = 1.0e4F;

struct NamedArray {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // row-major, shape's product long
};

// Every parameter array of `layout`, in layout order, filled from `seed` as described above.
std::vector<NamedArray> GenerateWeights(const ModelLayout& layout, std::uint64_t seed);

// Lays `arrays` out into one weight block in layout order. The arrays must match the layout's
// names and shapes (in any order); each is checked with ValidateWeights. InvalidArgument names
// the first mismatch (missing, unknown, duplicate, wrong shape, non-finite or too large).
Result<std::vector<float>> PackWeights(const ModelLayout& layout,
                                       std::span<const NamedArray> arrays);
// The same, into caller memory (the function's device memory): `block` must hold exactly
// layout.parameter_count() floats. On error `block` may be partly written.
Status PackWeightsInto(const ModelLayout& layout, std::span<const NamedArray> arrays,
                       std::span<float> block);

// Checks a weight block once, at load: size equal to the layout's, every value finite and within
// kMaxWeightMagnitude. The forward pass does not check its weights on every call.
Status ValidateWeights(const ModelLayout& layout, std::span<const float> block);

// Checks a batch of inputs: `inputs.size()` is batch * input_elements, every value finite and
// within kMaxInputMagnitude. A batch outside [1, kMaxBatch] is InvalidArgument.
Status ValidateInputs(const ModelLayout& layout, std::span<const float> inputs, std::int64_t batch);

// `batch` examples for `layout`, uniform in [0, 1), from `seed`. Precondition: batch >= 0.
std::vector<float> GenerateInputs(const ModelLayout& layout, std::int64_t batch,
                                  std::uint64_t seed);

// 64-bit FNV-1a of a byte string (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
std::uint64_t Fnv1a64(std::span<const unsigned char> bytes);
// FNV-1a over the floats' IEEE-754 bit patterns, each as 4 little-endian bytes: the checksum of a
// weight block as it lies in memory or a file on a little-endian machine.
std::uint64_t ChecksumFloats(std::span<const float> values);

}  // namespace gshare::examples
