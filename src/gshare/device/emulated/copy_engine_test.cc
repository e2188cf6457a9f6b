#include "gshare/device/emulated/copy_engine.h"
#include "gshare/device/emulated/copy_calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gshare/common/random.h"

namespace gshare {
namespace {

TEST(CopyEngineTest, CopiesEveryByteAtAnyAlignmentAndSize) {
  const std::size_t capacity = (3 << 20) + 8192;
  std::vector<unsigned char> source(capacity);
  Random random(17);
  for (auto& b : source) b = static_cast<unsigned char>(random.NextU64());
  std::vector<unsigned char> destination(capacity);
  const std::size_t sizes[] = {
      0,      1, 63, 4096, (1 << 20) - 1, 1 << 20, (1 << 20) + 12345, (2 << 20) + 16384 * 3 + 77,
      3 << 20};
  const std::size_t offsets[] = {0, 1, 13, 64, 4095};
  for (std::size_t size : sizes) {
    for (std::size_t source_offset : offsets) {
      for (std::size_t destination_offset : offsets) {
        if (size + std::max(source_offset, destination_offset) > capacity) continue;
        std::memset(destination.data(), 0, capacity);
        CopyEngineCopy(destination.data() + destination_offset, source.data() + source_offset,
                       size);
        ASSERT_EQ(std::memcmp(destination.data() + destination_offset,
                              source.data() + source_offset, size),
                  0)
            << "size " << size << ", offsets " << source_offset << "/" << destination_offset;
        // Nothing around the destination range is touched.
        for (std::size_t i = 0; i < destination_offset; ++i) ASSERT_EQ(destination[i], 0);
        for (std::size_t i = destination_offset + size;
             i < std::min(capacity, destination_offset + size + 4096); ++i) {
          ASSERT_EQ(destination[i], 0);
        }
      }
    }
  }
  const std::string kind = CopyEngineKind();
  EXPECT_TRUE(kind == "avx512" || kind == "avx2" || kind == "memcpy") << kind;
}

TEST(CopyEngineTest, EitherRoutineCopiesEveryByteAndTheActiveOneIsTheSetOne) {
  const std::size_t size = (2 << 20) + 4096 + 3;
  std::vector<unsigned char> source(size);
  Random random(5);
  for (auto& b : source) b = static_cast<unsigned char>(random.NextU64());
  for (const CopyRoutine routine : {CopyRoutine::kStreaming, CopyRoutine::kMemcpy}) {
    std::vector<unsigned char> destination(size, 0);
    CopyEngineCopyWith(routine, destination.data(), source.data() + 1, size - 1);
    EXPECT_EQ(std::memcmp(destination.data(), source.data() + 1, size - 1), 0)
        << CopyRoutineName(routine);
    EXPECT_EQ(destination[size - 1], 0);
  }
  const CopyRoutine before = ActiveCopyRoutine();
  SetCopyRoutine(CopyRoutine::kMemcpy);
  EXPECT_EQ(ActiveCopyRoutine(), CopyRoutine::kMemcpy);
  SetCopyRoutine(CopyRoutine::kStreaming);
  EXPECT_EQ(ActiveCopyRoutine(), CopyRoutine::kStreaming);
  SetCopyRoutine(before);
}

TEST(CopyCalibrationTest, MeasuresEveryRoutineOnEveryThreadCountAndKeepsTheFastest) {
  const CopyRoutine before = ActiveCopyRoutine();
  auto calibration = CalibrateCopies(
      {.bytes = 2 << 20, .rounds = 1, .threads = {2, 1, 2}, .piece_bytes = 1 << 19});
  ASSERT_TRUE(calibration.ok()) << calibration.status().ToString();
  // Each thread count once, each routine the CPU has (streaming only with AVX2).
  const std::size_t routines = std::string(CopyEngineKind()) == "memcpy" ? 1 : 2;
  ASSERT_EQ(calibration->trials.size(), 2 * routines);
  const auto& best = calibration->best;
  bool found = false;
  for (const auto& trial : calibration->trials) {
    EXPECT_TRUE(std::isfinite(trial.gbps) && trial.gbps > 0) << trial.gbps;
    found = found || (trial.routine == best.routine && trial.threads == best.threads &&
                      trial.gbps == best.gbps);
    // Nothing on as many threads or fewer beats the choice; more threads beat it by under 5%.
    if (trial.threads <= best.threads) {
      EXPECT_LE(trial.gbps, best.gbps);
    } else {
      EXPECT_LE(trial.gbps, best.gbps * 1.05);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(calibration->Summary().rfind(CopyRoutineName(best.routine), 0), 0u)
      << calibration->Summary();
  EXPECT_EQ(ActiveCopyRoutine(), before) << "measuring changes no setting";
}

TEST(CopyCalibrationTest, RefusesOptionsOutOfRange) {
  EXPECT_EQ(CalibrateCopies({.bytes = 4096}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CalibrateCopies({.bytes = 1 << 20, .rounds = 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CalibrateCopies({.bytes = 1 << 20, .rounds = 1, .threads = {}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CalibrateCopies({.bytes = 1 << 20, .rounds = 1, .threads = {0}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CalibrateCopies({.bytes = 1 << 20, .rounds = 1, .threads = {1}, .piece_bytes = 0})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gshare
