// The forward pass's products as plain loops (GSHARE_WITH_OPENBLAS=OFF): one thread, float
// accumulation in a fixed order, so each call is deterministic wherever its buffers lie.
#include <algorithm>
#include <array>

#include "examples/models/blas.h"
#include "examples/models/forward.h"

namespace gshare::examples {
namespace {

// Eight partial sums, so that the compiler may keep them in one vector register; the order of
// the additions is fixed by the code, not by the compiler.
float Dot(const float* x, const float* y, std::int64_t k) {
  constexpr std::int64_t kLanes = 8;
  std::array<float, kLanes> partial{};
  std::int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes) {
    for (std::int64_t lane = 0; lane < kLanes; ++lane) partial[lane] += x[i + lane] * y[i + lane];
  }
  float sum = 0.0F;
  for (float p : partial) sum += p;
  for (; i < k; ++i) sum += x[i] * y[i];
  return sum;
}

}  // namespace

void MatrixVector(std::int64_t n, std::int64_t k, const float* weight, const float* in,
                  float* out) {
  for (std::int64_t row = 0; row < n; ++row) out[row] = Dot(weight + row * k, in, k);
}

void MatrixMatrixTransposed(std::int64_t rows, std::int64_t n, std::int64_t k, const float* in,
                            const float* weight, float* out) {
  for (std::int64_t row = 0; row < rows; ++row) {
    for (std::int64_t j = 0; j < n; ++j) out[row * n + j] = Dot(in + row * k, weight + j * k, k);
  }
}

void MatrixMatrix(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
                  float* out) {
  for (std::int64_t row = 0; row < m; ++row) {
    float* y = out + row * n;
    std::fill(y, y + n, 0.0F);
    for (std::int64_t inner = 0; inner < k; ++inner) {
      const float scale = a[row * k + inner];
      const float* x = b + inner * n;
      for (std::int64_t j = 0; j < n; ++j) y[j] += scale * x[j];
    }
  }
}

// No thread pool to size: the loops always run on the caller's thread.
void UseSingleBlasThread() {}

int BlasThreads() { return 1; }

const char* BlasConfig() {
  return "no BLAS library (plain loops; built with GSHARE_WITH_OPENBLAS=OFF)";
}

}  // namespace gshare::examples
