#include "examples/models/forward.h"

#include <algorithm>
#include <array>
#include <cassert>

#include <fmt/format.h>

#include "examples/models/blas.h"
#include "examples/models/weights.h"

namespace gshare::examples {
namespace {

using Index = std::int64_t;

// The weight block cut into its parameter arrays, in layout order. No allocation.
template <std::size_t N>
std::array<const float*, N> SplitWeights(const ModelLayout& layout, std::span<const float> block) {
  assert(layout.parameters.size() == N && "the forward pass and the layout disagree");
  std::array<const float*, N> parts{};
  std::size_t offset = 0;
  for (std::size_t i = 0; i < N && i < layout.parameters.size(); ++i) {
    parts[i] = block.data() + offset;
    offset += static_cast<std::size_t>(layout.parameters[i].elements());
  }
  return parts;
}

// out[batch, n] = relu?(in[batch, k] * weight[n, k]^T + bias[n]).
void Linear(const float* in, Index batch, Index k, const float* weight, const float* bias, Index n,
            bool relu, float* out) {
  if (batch == 1) {
    // A matrix-vector product reads the weights once; sgemm would first pack all of them.
    MatrixVector(n, k, weight, in, out);
  } else {
    MatrixMatrixTransposed(batch, n, k, in, weight, out);
  }
  for (Index row = 0; row < batch; ++row) {
    float* y = out + row * n;
    for (Index j = 0; j < n; ++j) {
      const float v = y[j] + bias[j];
      y[j] = relu ? std::max(v, 0.0F) : v;
    }
  }
}

// 3x3, stride 1, zero padding 1, then bias, ReLU and 2x2 max-pool:
// in [channels, size, size] -> pooled [out_channels, size/2, size/2].
// col holds channels*9 x size*size floats, conv holds out_channels x size*size floats.
void ConvReluPool(const float* in, Index channels, Index size, const float* weight,
                  const float* bias, Index out_channels, float* col, float* conv, float* pooled) {
  const Index k = CnnDims::kKernel;
  const Index pixels = size * size;
  // im2col: row (c, ky, kx) holds the input shifted by (ky - 1, kx - 1), zeros outside.
  for (Index c = 0; c < channels; ++c) {
    for (Index ky = 0; ky < k; ++ky) {
      for (Index kx = 0; kx < k; ++kx) {
        float* row = col + ((c * k + ky) * k + kx) * pixels;
        for (Index y = 0; y < size; ++y) {
          const Index sy = y + ky - 1;
          for (Index x = 0; x < size; ++x) {
            const Index sx = x + kx - 1;
            const bool inside = sy >= 0 && sy < size && sx >= 0 && sx < size;
            row[y * size + x] = inside ? in[(c * size + sy) * size + sx] : 0.0F;
          }
        }
      }
    }
  }
  const Index depth = channels * k * k;
  MatrixMatrix(out_channels, pixels, depth, weight, col, conv);
  // max(a_i) + b == max(a_i + b) exactly (rounding is monotone), and ReLU commutes with max.
  const Index half = size / 2;
  for (Index o = 0; o < out_channels; ++o) {
    const float* plane = conv + o * pixels;
    for (Index y = 0; y < half; ++y) {
      for (Index x = 0; x < half; ++x) {
        const float* p = plane + (2 * y) * size + 2 * x;
        const float m = std::max(std::max(p[0], p[1]), std::max(p[size], p[size + 1]));
        pooled[(o * half + y) * half + x] = std::max(m + bias[o], 0.0F);
      }
    }
  }
}

// The CNN workspace: per-example scratch (reused for each example) then per-batch activations.
struct CnnScratch {
  using D = CnnDims;
  static constexpr Index kSize1 = D::kInputSize, kSize2 = kSize1 / 2, kSize3 = kSize2 / 2;
  static constexpr Index kCol =
      std::max({D::kInputChannels * 9 * kSize1 * kSize1, D::kConv1Channels * 9 * kSize2* kSize2,
                D::kConv2Channels * 9 * kSize3* kSize3});
  static constexpr Index kConv =
      std::max({D::kConv1Channels * kSize1 * kSize1, D::kConv2Channels* kSize2* kSize2,
                D::kConv3Channels* kSize3* kSize3});
  static constexpr Index kPooled1 = D::kConv1Channels * kSize2 * kSize2;
  static constexpr Index kPooled2 = D::kConv2Channels * kSize3 * kSize3;
  static constexpr Index kFixed = kCol + kConv + kPooled1 + kPooled2;
  static constexpr Index kPerExample = D::kFeatures + D::kHidden;
};

// The MLP workspace: two hidden activations per example.
struct MlpScratch {
  static constexpr Index kFixed = 0;
  static constexpr Index kPerExample = 2 * MlpDims::kHidden;
};

void MlpForward(std::span<const float> weights, const float* inputs, Index batch, float* workspace,
                float* logits) {
  using D = MlpDims;
  const auto w = SplitWeights<6>(MlpLayout(), weights);
  float* hidden1 = workspace;
  float* hidden2 = workspace + batch * D::kHidden;
  Linear(inputs, batch, D::kInput, w[0], w[1], D::kHidden, true, hidden1);
  Linear(hidden1, batch, D::kHidden, w[2], w[3], D::kHidden, true, hidden2);
  Linear(hidden2, batch, D::kHidden, w[4], w[5], D::kClasses, false, logits);
}

void CnnForward(std::span<const float> weights, const float* inputs, Index batch, float* workspace,
                float* logits) {
  using D = CnnDims;
  using S = CnnScratch;
  const auto w = SplitWeights<10>(CnnLayout(), weights);
  float* col = workspace;
  float* conv = col + S::kCol;
  float* pooled1 = conv + S::kConv;
  float* pooled2 = pooled1 + S::kPooled1;
  float* features = pooled2 + S::kPooled2;
  float* hidden = features + batch * D::kFeatures;
  const Index input_elements = D::kInputChannels * D::kInputSize * D::kInputSize;
  for (Index i = 0; i < batch; ++i) {
    ConvReluPool(inputs + i * input_elements, D::kInputChannels, S::kSize1, w[0], w[1],
                 D::kConv1Channels, col, conv, pooled1);
    ConvReluPool(pooled1, D::kConv1Channels, S::kSize2, w[2], w[3], D::kConv2Channels, col, conv,
                 pooled2);
    ConvReluPool(pooled2, D::kConv2Channels, S::kSize3, w[4], w[5], D::kConv3Channels, col, conv,
                 features + i * D::kFeatures);
  }
  Linear(features, batch, D::kFeatures, w[6], w[7], D::kHidden, true, hidden);
  Linear(hidden, batch, D::kHidden, w[8], w[9], D::kClasses, false, logits);
}

Status CheckBatch(ModelKind kind, std::int64_t batch) {
  if (batch < 1 || batch > kMaxBatch) {
    return InvalidArgument(fmt::format("model '{}': batch {} is outside [1, {}]",
                                       ModelKindName(kind), batch, kMaxBatch));
  }
  return Status::Ok();
}

}  // namespace

Result<std::size_t> WorkspaceFloats(ModelKind kind, std::int64_t batch) {
  GSHARE_RETURN_IF_ERROR(CheckBatch(kind, batch));
  const Index floats = kind == ModelKind::kMlp
                           ? MlpScratch::kFixed + batch * MlpScratch::kPerExample
                           : CnnScratch::kFixed + batch * CnnScratch::kPerExample;
  return static_cast<std::size_t>(floats);
}

Result<std::size_t> WorkspaceBytes(ModelKind kind, std::int64_t batch) {
  GSHARE_ASSIGN_OR_RETURN(const std::size_t floats, WorkspaceFloats(kind, batch));
  return floats * sizeof(float);
}

Status Forward(ModelKind kind, std::span<const float> weights, std::span<const float> inputs,
               std::int64_t batch, std::span<float> workspace, std::span<float> logits) {
  const ModelLayout& layout = LayoutOf(kind);
  GSHARE_ASSIGN_OR_RETURN(const std::size_t workspace_floats, WorkspaceFloats(kind, batch));
  if (weights.size() != static_cast<std::size_t>(layout.parameter_count())) {
    return InvalidArgument(fmt::format("model '{}': weight block holds {} floats, layout needs {}",
                                       layout.name, weights.size(), layout.parameter_count()));
  }
  GSHARE_RETURN_IF_ERROR(ValidateInputs(layout, inputs, batch));
  if (workspace.size() < workspace_floats) {
    return InvalidArgument(fmt::format("model '{}': workspace of {} floats, batch {} needs {}",
                                       layout.name, workspace.size(), batch, workspace_floats));
  }
  const auto logit_count = static_cast<std::size_t>(batch * layout.classes);
  if (logits.size() != logit_count) {
    return InvalidArgument(fmt::format("model '{}': {} logits for a batch of {} (expected {})",
                                       layout.name, logits.size(), batch, logit_count));
  }
  if (kind == ModelKind::kMlp) {
    MlpForward(weights, inputs.data(), batch, workspace.data(), logits.data());
  } else {
    CnnForward(weights, inputs.data(), batch, workspace.data(), logits.data());
  }
  return Status::Ok();
}

}  // namespace gshare::examples
