#include "examples/models/weights.h"

#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "gshare/common/random.h"

namespace gshare::examples {
namespace {

constexpr std::uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;

// Symmetric in (-1, 1): s * 2^-24 with s = 2k + 1 - 2^24 odd, k the draw's top 24 bits. Exact.
float SymmetricUnit(Random& random) {
  const auto k = static_cast<std::int32_t>(random.NextU64() >> 40);
  const std::int32_t s = 2 * k + 1 - (1 << 24);
  return static_cast<float>(s) * 0x1.0p-24F;
}

// In [0, 1): k * 2^-24. Exact.
float UnitInterval(Random& random) {
  const auto k = static_cast<std::int32_t>(random.NextU64() >> 40);
  return static_cast<float>(k) * 0x1.0p-24F;
}

float BoundOf(const ParameterSpec& spec) {
  const double fan_in = static_cast<double>(spec.fan_in);
  return static_cast<float>(spec.is_bias ? 1.0 / std::sqrt(fan_in) : std::sqrt(6.0 / fan_in));
}

Status CheckValues(std::string_view what, std::span<const float> values, float bound) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    if (!std::isfinite(v) || std::fabs(v) > bound) {
      return InvalidArgument(
          fmt::format("{}: value {} at index {} is not finite or exceeds {}", what, v, i, bound));
    }
  }
  return Status::Ok();
}

std::uint64_t Fnv1aStep(std::uint64_t hash, unsigned char byte) {
  return (hash ^ byte) * kFnvPrime;
}

}  // namespace

std::vector<NamedArray> GenerateWeights(const ModelLayout& layout, std::uint64_t seed) {
  std::vector<NamedArray> arrays;
  arrays.reserve(layout.parameters.size());
  for (const ParameterSpec& spec : layout.parameters) {
    const auto* name_bytes = reinterpret_cast<const unsigned char*>(spec.name.data());
    Random random(seed ^ Fnv1a64({name_bytes, spec.name.size()}));
    const float bound = BoundOf(spec);
    NamedArray array{spec.name, spec.shape, {}};
    array.values.resize(static_cast<std::size_t>(spec.elements()));
    for (float& v : array.values) v = bound * SymmetricUnit(random);
    arrays.push_back(std::move(array));
  }
  return arrays;
}

Status PackWeightsInto(const ModelLayout& layout, std::span<const NamedArray> arrays,
                       std::span<float> block) {
  if (block.size() != static_cast<std::size_t>(layout.parameter_count())) {
    return InvalidArgument(fmt::format("model '{}': weight block holds {} floats, layout needs {}",
                                       layout.name, block.size(), layout.parameter_count()));
  }
  std::vector<bool> seen(layout.parameters.size(), false);
  for (const NamedArray& array : arrays) {
    auto index = layout.IndexOf(array.name);
    if (!index.ok()) return InvalidArgument(index.status().message());
    const ParameterSpec& spec = layout.parameters[*index];
    if (seen[*index]) {
      return InvalidArgument(
          fmt::format("model '{}': parameter '{}' given twice", layout.name, array.name));
    }
    seen[*index] = true;
    if (array.shape != spec.shape ||
        array.values.size() != static_cast<std::size_t>(spec.elements())) {
      return InvalidArgument(
          fmt::format("model '{}': parameter '{}' has shape [{}] ({} values), "
                      "expected [{}]",
                      layout.name, array.name, fmt::join(array.shape, ","), array.values.size(),
                      fmt::join(spec.shape, ",")));
    }
    GSHARE_RETURN_IF_ERROR(
        CheckValues(fmt::format("model '{}': parameter '{}'", layout.name, array.name),
                    array.values, kMaxWeightMagnitude));
    const auto offset = static_cast<std::size_t>(layout.OffsetOf(*index));
    std::memcpy(block.data() + offset, array.values.data(), array.values.size() * sizeof(float));
  }
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      return InvalidArgument(fmt::format("model '{}': parameter '{}' is missing", layout.name,
                                         layout.parameters[i].name));
    }
  }
  return Status::Ok();
}

Result<std::vector<float>> PackWeights(const ModelLayout& layout,
                                       std::span<const NamedArray> arrays) {
  std::vector<float> block(static_cast<std::size_t>(layout.parameter_count()));
  GSHARE_RETURN_IF_ERROR(PackWeightsInto(layout, arrays, block));
  return block;
}

Status ValidateWeights(const ModelLayout& layout, std::span<const float> block) {
  if (block.size() != static_cast<std::size_t>(layout.parameter_count())) {
    return InvalidArgument(fmt::format("model '{}': weight block holds {} floats, layout needs {}",
                                       layout.name, block.size(), layout.parameter_count()));
  }
  return CheckValues(fmt::format("model '{}' weights", layout.name), block, kMaxWeightMagnitude);
}

Status ValidateInputs(const ModelLayout& layout, std::span<const float> inputs,
                      std::int64_t batch) {
  if (batch < 1 || batch > kMaxBatch) {
    return InvalidArgument(
        fmt::format("model '{}': batch {} is outside [1, {}]", layout.name, batch, kMaxBatch));
  }
  const auto per_example = static_cast<std::size_t>(layout.input_elements());
  if (inputs.size() / per_example != static_cast<std::size_t>(batch) ||
      inputs.size() % per_example != 0) {
    return InvalidArgument(
        fmt::format("model '{}': {} input values for a batch of {} (expected {})", layout.name,
                    inputs.size(), batch, static_cast<std::size_t>(batch) * per_example));
  }
  return CheckValues(fmt::format("model '{}' input", layout.name), inputs, kMaxInputMagnitude);
}

std::vector<float> GenerateInputs(const ModelLayout& layout, std::int64_t batch,
                                  std::uint64_t seed) {
  Random random(seed);
  std::vector<float> inputs(static_cast<std::size_t>(batch > 0 ? batch : 0) *
                            static_cast<std::size_t>(layout.input_elements()));
  for (float& v : inputs) v = UnitInterval(random);
  return inputs;
}

std::uint64_t Fnv1a64(std::span<const unsigned char> bytes) {
  std::uint64_t hash = kFnvOffsetBasis;
  for (unsigned char b : bytes) hash = Fnv1aStep(hash, b);
  return hash;
}

std::uint64_t ChecksumFloats(std::span<const float> values) {
  std::uint64_t hash = kFnvOffsetBasis;
  for (float v : values) {
    const auto bits = std::bit_cast<std::uint32_t>(v);
    for (int shift = 0; shift < 32; shift += 8) {
      hash = Fnv1aStep(hash, static_cast<unsigned char>((bits >> shift) & 0xffU));
    }
  }
  return hash;
}

}  // namespace gshare::examples
