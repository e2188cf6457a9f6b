#include "gshare/device/emulated/copy_calibration.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <cstring>
#include <exception>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gshare/common/clock.h"

namespace gshare {
namespace {

// An anonymous private mapping, faulted in, unmapped when it goes.
class ScratchBuffer {
 public:
  static Result<ScratchBuffer> Make(std::uint64_t bytes) {
    void* mapped =
        ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) {
      return Internal(fmt::format("copy calibration: cannot map {}: {}", FormatBytes(bytes),
                                  std::strerror(errno)));
    }
    std::memset(mapped, 0x5a, bytes);
    return ScratchBuffer(static_cast<std::byte*>(mapped), bytes);
  }
  ScratchBuffer(ScratchBuffer&& other) noexcept
      : bytes_(std::exchange(other.bytes_, nullptr)), size_(other.size_) {}
  ScratchBuffer& operator=(ScratchBuffer&&) = delete;
  ~ScratchBuffer() {
    if (bytes_ != nullptr) ::munmap(bytes_, size_);
  }
  std::byte* data() const { return bytes_; }

 private:
  ScratchBuffer(std::byte* bytes, std::uint64_t size) : bytes_(bytes), size_(size) {}
  std::byte* bytes_;
  std::uint64_t size_;
};

// The median rate of `rounds` timed copies of `bytes` on `threads` threads with `routine`.
Result<double> MeasureTrial(CopyRoutine routine, int threads, std::byte* destination,
                            const std::byte* source, std::uint64_t bytes, int rounds,
                            std::uint64_t piece_bytes) {
  const auto count = static_cast<std::uint64_t>(threads);
  const std::uint64_t part = (bytes / count + 4095) / 4096 * 4096;
  const int total_rounds = rounds + 1;  // the first is untimed
  std::barrier sync(threads + 1);
  std::atomic<bool> abandoned{false};
  std::vector<std::thread> workers;
  try {
    for (int i = 0; i < threads; ++i) {
      workers.emplace_back([&, i] {
        const std::uint64_t begin = std::min(bytes, static_cast<std::uint64_t>(i) * part);
        const std::uint64_t end = std::min(bytes, begin + part);
        for (int round = 0; round < total_rounds; ++round) {
          sync.arrive_and_wait();
          if (abandoned.load()) return;
          for (std::uint64_t at = begin; at < end; at += piece_bytes) {
            const std::uint64_t n = std::min(piece_bytes, end - at);
            CopyEngineCopyWith(routine, destination + at, source + at, n);
          }
          sync.arrive_and_wait();
        }
      });
    }
  } catch (const std::exception& e) {
    // The threads started wait at the first barrier: stand in for those that never started, let
    // the others through to see that the trial is abandoned, and join them.
    for (std::size_t missing = workers.size(); missing < count; ++missing) sync.arrive_and_drop();
    abandoned.store(true);
    sync.arrive_and_wait();
    for (auto& worker : workers) worker.join();
    return Internal(fmt::format("copy calibration: cannot start a thread: {}", e.what()));
  }
  const SteadyClock& clock = SteadyClock::Shared();
  std::vector<double> rates;
  for (int round = 0; round < total_rounds; ++round) {
    const TimePoint begin = clock.Now();
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    const double seconds = ToSeconds(clock.Now() - begin);
    if (round > 0) rates.push_back(static_cast<double>(bytes) / std::max(seconds, 1e-9) / 1e9);
  }
  for (auto& worker : workers) worker.join();
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

std::string CopyCalibration::Summary() const {
  std::string others;
  for (const Trial& trial : trials) {
    if (trial.routine == best.routine && trial.threads == best.threads) continue;
    others += fmt::format("{}{} {:.1f} GB/s on {}", others.empty() ? "" : ", ",
                          CopyRoutineName(trial.routine), trial.gbps, trial.threads);
  }
  return fmt::format("{} on {} thread{}, {:.1f} GB/s ({})", CopyRoutineName(best.routine),
                     best.threads, best.threads == 1 ? "" : "s", best.gbps, others);
}

// Twice the last-level cache, from 32 to 256 MiB.
static std::uint64_t DefaultBytes() {
  const long cache = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (cache <= 0) return 256 * kMiB;  // unknown: large enough for most caches
  const std::uint64_t twice = 2 * static_cast<std::uint64_t>(cache);
  return std::clamp<std::uint64_t>(twice, 32 * kMiB, 256 * kMiB) / kMiB * kMiB;
}

Result<CopyCalibration> CalibrateCopies(const CopyCalibrationOptions& given) {
  CopyCalibrationOptions options = given;
  if (options.bytes == 0) options.bytes = DefaultBytes();
  if (options.bytes < kMiB || options.rounds < 1 || options.rounds > 64 ||
      options.threads.empty() || options.piece_bytes < 4096) {
    return InvalidArgument("copy calibration: at least 1 MiB, 1 to 64 rounds and a thread count");
  }
  for (const int threads : options.threads) {
    if (threads < 1 || threads > 64) {
      return InvalidArgument(fmt::format("copy calibration: {} threads (1 to 64)", threads));
    }
  }
  GSHARE_ASSIGN_OR_RETURN(ScratchBuffer source, ScratchBuffer::Make(options.bytes));
  GSHARE_ASSIGN_OR_RETURN(ScratchBuffer destination, ScratchBuffer::Make(options.bytes));
  CopyCalibration calibration;
  std::vector<CopyRoutine> routines = {CopyRoutine::kMemcpy};
  if (std::string_view(CopyEngineKind()) != "memcpy") {
    routines.insert(routines.begin(), CopyRoutine::kStreaming);
  }
  std::vector<int> counts = options.threads;
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  for (const int count : counts) {
    for (const CopyRoutine routine : routines) {
      GSHARE_ASSIGN_OR_RETURN(double gbps,
                              MeasureTrial(routine, count, destination.data(), source.data(),
                                           options.bytes, options.rounds, options.piece_bytes));
      calibration.trials.push_back({routine, count, gbps});
      // More threads must beat fewer by 5%: on a loaded or small machine the difference is noise.
      const CopyCalibration::Trial& best = calibration.best;
      const bool better =
          best.gbps == 0 || (count == best.threads ? gbps > best.gbps : gbps > best.gbps * 1.05);
      if (better) calibration.best = calibration.trials.back();
    }
  }
  return calibration;
}

}  // namespace gshare
