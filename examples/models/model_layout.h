// The example models' architectures and weight layouts.
//
// Two image classifiers of clearly different sizes, both producing 10 logits per example:
//
//   "mlp"  input [1,28,28] (read flattened, row-major, as 784 values)
//          fc1 784 -> 2048, ReLU; fc2 2048 -> 2048, ReLU; fc3 2048 -> 10
//          5,824,522 parameters, 23,298,088 bytes of float32
//   "cnn"  input [3,32,32] (channels, rows, columns)
//          conv1 3 -> 32, ReLU, max-pool 2x2   -> [32,16,16]
//          conv2 32 -> 64, ReLU, max-pool 2x2  -> [64,8,8]
//          conv3 64 -> 128, ReLU, max-pool 2x2 -> [128,4,4], flattened (c, y, x) to 2048
//          fc1 2048 -> 512, ReLU; fc2 512 -> 10
//          every convolution 3x3, stride 1, zero padding 1; 1,147,466 parameters, 4,589,864 bytes
//
// A model's weights are one contiguous block of float32: its parameter arrays, each row-major,
// one after the other in the order of `ModelLayout::parameters` (the PyTorch conventions: a linear
// weight is [out, in], a convolution weight [out, in, 3, 3]). Every part of the system that
// touches weights (generator, files, the function's device memory, the forward pass, the
// reference) reads this one description.
//
// The layouts are immutable values built once; the accessors are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gshare/common/status.h"

namespace gshare::examples {

enum class ModelKind { kMlp, kCnn };

// The largest batch that the forward pass, the reference and ValidateInputs accept (keeps every
// size far from overflow).
inline constexpr std::int64_t kMaxBatch = 4096;

// The dimensions of the architectures above, named once.
struct MlpDims {
  static constexpr std::int64_t kInput = 28 * 28;
  static constexpr std::int64_t kHidden = 2048;
  static constexpr std::int64_t kClasses = 10;
};
struct CnnDims {
  static constexpr std::int64_t kInputChannels = 3;
  static constexpr std::int64_t kInputSize = 32;  // rows = columns
  static constexpr std::int64_t kConv1Channels = 32;
  static constexpr std::int64_t kConv2Channels = 64;
  static constexpr std::int64_t kConv3Channels = 128;
  static constexpr std::int64_t kKernel = 3;  // 3x3, stride 1, zero padding 1: size preserved
  static constexpr std::int64_t kFeatures = kConv3Channels * (kInputSize / 8) * (kInputSize / 8);
  static constexpr std::int64_t kHidden = 512;
  static constexpr std::int64_t kClasses = 10;
};

// One named parameter array. `fan_in` is the number of inputs that feed one output of its layer
// (in_features, or in_channels * 3 * 3); the weight generator scales by it.
struct ParameterSpec {
  std::string name;                 // "fc1.weight", "conv2.bias"
  std::vector<std::int64_t> shape;  // row-major
  std::int64_t fan_in = 0;
  bool is_bias = false;

  std::int64_t elements() const;
};

struct ModelLayout {
  ModelKind kind;
  std::string name;                       // "mlp", "cnn"
  std::vector<std::int64_t> input_shape;  // one example, without the batch dimension
  std::int64_t classes = 0;               // logits per example
  std::vector<ParameterSpec> parameters;  // in weight-block order

  std::int64_t input_elements() const;  // per example
  std::int64_t parameter_count() const;
  std::int64_t weight_bytes() const { return parameter_count() * 4; }
  // Index of the named parameter in `parameters`, or NotFound.
  Result<std::size_t> IndexOf(std::string_view parameter_name) const;
  // Offset, in floats, of parameters[index] in the weight block. Precondition: index in range.
  std::int64_t OffsetOf(std::size_t index) const;
};

const ModelLayout& MlpLayout();
const ModelLayout& CnnLayout();
const ModelLayout& LayoutOf(ModelKind kind);

std::string_view ModelKindName(ModelKind kind);                 // "mlp", "cnn"
Result<ModelKind> ParseModelKind(std::string_view model_name);  // the inverse; InvalidArgument

}  // namespace gshare::examples
