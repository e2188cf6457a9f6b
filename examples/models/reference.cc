#include "examples/models/reference.h"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

#include "examples/models/weights.h"

namespace gshare::examples {
namespace {

using Index = std::int64_t;
using Activations = std::vector<double>;

// A named parameter array of the block, located through the layout.
const float* Parameter(const ModelLayout& layout, std::span<const float> weights,
                       std::string_view name) {
  const auto index = layout.IndexOf(name);
  assert(index.ok() && "the reference names a parameter its layout lacks");
  return weights.data() + layout.OffsetOf(index.ok() ? *index : 0);
}

// One example: y[o] = sum_i w[o, i] * x[i] + b[o], optionally ReLU. Four partial sums (i mod 4)
// let the compiler keep them in one vector register; the order is fixed, so results are too.
Activations Dense(const Activations& x, const float* w, const float* b, Index out, bool relu) {
  const auto in = static_cast<Index>(x.size());
  Activations y(static_cast<std::size_t>(out));
  for (Index o = 0; o < out; ++o) {
    const float* row = w + o * in;
    double partial[4] = {0.0, 0.0, 0.0, 0.0};
    Index i = 0;
    for (; i + 4 <= in; i += 4) {
      for (Index lane = 0; lane < 4; ++lane) {
        partial[lane] += static_cast<double>(row[i + lane]) * x[i + lane];
      }
    }
    double sum = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    for (; i < in; ++i) sum += static_cast<double>(row[i]) * x[i];
    sum += b[o];
    y[o] = relu ? std::max(sum, 0.0) : sum;
  }
  return y;
}

// One example, [c, size, size] -> [out, size/2, size/2]: 3x3 convolution with zero padding 1,
// bias, ReLU, then the maximum of each 2x2 block.
Activations ConvBlock(const Activations& x, Index channels, Index size, const float* w,
                      const float* b, Index out) {
  Activations conv(static_cast<std::size_t>(out * size * size));
  for (Index o = 0; o < out; ++o) {
    double* plane = conv.data() + o * size * size;
    std::fill(plane, plane + size * size, static_cast<double>(b[o]));
    for (Index c = 0; c < channels; ++c) {
      const double* in = x.data() + c * size * size;
      for (Index ky = 0; ky < 3; ++ky) {
        for (Index kx = 0; kx < 3; ++kx) {
          const double weight = w[((o * channels + c) * 3 + ky) * 3 + kx];
          // Output columns whose source column xx + kx - 1 lies inside the input.
          const Index x_begin = kx == 0 ? 1 : 0;
          const Index x_end = kx == 2 ? size - 1 : size;
          for (Index y = 0; y < size; ++y) {
            const Index sy = y + ky - 1;
            if (sy < 0 || sy >= size) continue;
            double* out_row = plane + y * size;
            const double* in_row = in + sy * size + (kx - 1);
            for (Index xx = x_begin; xx < x_end; ++xx) out_row[xx] += weight * in_row[xx];
          }
        }
      }
    }
  }
  const Index half = size / 2;
  Activations pooled(static_cast<std::size_t>(out * half * half));
  for (Index o = 0; o < out; ++o) {
    for (Index y = 0; y < half; ++y) {
      for (Index xx = 0; xx < half; ++xx) {
        double m = 0.0;  // ReLU: the maximum of the block and zero
        for (Index dy = 0; dy < 2; ++dy) {
          for (Index dx = 0; dx < 2; ++dx) {
            m = std::max(m, conv[(o * size + 2 * y + dy) * size + 2 * xx + dx]);
          }
        }
        pooled[(o * half + y) * half + xx] = m;
      }
    }
  }
  return pooled;
}

Activations MlpExample(std::span<const float> w, const Activations& x) {
  const ModelLayout& l = MlpLayout();
  Activations h1 =
      Dense(x, Parameter(l, w, "fc1.weight"), Parameter(l, w, "fc1.bias"), MlpDims::kHidden, true);
  Activations h2 =
      Dense(h1, Parameter(l, w, "fc2.weight"), Parameter(l, w, "fc2.bias"), MlpDims::kHidden, true);
  return Dense(h2, Parameter(l, w, "fc3.weight"), Parameter(l, w, "fc3.bias"), MlpDims::kClasses,
               false);
}

Activations CnnExample(std::span<const float> w, const Activations& x) {
  using D = CnnDims;
  const ModelLayout& l = CnnLayout();
  Activations a = ConvBlock(x, D::kInputChannels, D::kInputSize, Parameter(l, w, "conv1.weight"),
                            Parameter(l, w, "conv1.bias"), D::kConv1Channels);
  a = ConvBlock(a, D::kConv1Channels, D::kInputSize / 2, Parameter(l, w, "conv2.weight"),
                Parameter(l, w, "conv2.bias"), D::kConv2Channels);
  a = ConvBlock(a, D::kConv2Channels, D::kInputSize / 4, Parameter(l, w, "conv3.weight"),
                Parameter(l, w, "conv3.bias"), D::kConv3Channels);
  a = Dense(a, Parameter(l, w, "fc1.weight"), Parameter(l, w, "fc1.bias"), D::kHidden, true);
  return Dense(a, Parameter(l, w, "fc2.weight"), Parameter(l, w, "fc2.bias"), D::kClasses, false);
}

}  // namespace

Result<std::vector<float>> ReferenceForward(ModelKind kind, std::span<const float> weights,
                                            std::span<const float> inputs, std::int64_t batch) {
  const ModelLayout& layout = LayoutOf(kind);
  if (batch < 1 || batch > kMaxBatch) {
    return InvalidArgument(
        fmt::format("model '{}': batch {} is outside [1, {}]", layout.name, batch, kMaxBatch));
  }
  if (weights.size() != static_cast<std::size_t>(layout.parameter_count())) {
    return InvalidArgument(fmt::format("model '{}': weight block holds {} floats, layout needs {}",
                                       layout.name, weights.size(), layout.parameter_count()));
  }
  GSHARE_RETURN_IF_ERROR(ValidateInputs(layout, inputs, batch));
  const auto per_example = static_cast<std::size_t>(layout.input_elements());
  std::vector<float> logits;
  logits.reserve(static_cast<std::size_t>(batch * layout.classes));
  for (std::size_t i = 0; i < static_cast<std::size_t>(batch); ++i) {
    const auto example = inputs.subspan(i * per_example, per_example);
    const Activations x(example.begin(), example.end());
    const Activations y = kind == ModelKind::kMlp ? MlpExample(weights, x) : CnnExample(weights, x);
    for (double v : y) logits.push_back(static_cast<float>(v));
  }
  return logits;
}

}  // namespace gshare::examples
