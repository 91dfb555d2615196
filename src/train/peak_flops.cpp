// Peak FLOP/s for MFU: the CPU sgemm ceiling with its per-machine cache, and GPU datasheet peaks.
#include "braid/train/peak_flops.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <omp.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "braid/core/error.h"
#include "braid/core/logging.h"
#include "ops/cpu/sgemm_backend.h"
#if BRAID_CPU_GEMM_ONEDNN
#include "ops/cpu/onednn_matmul.h"
#endif

namespace braid::train {
namespace {

namespace fs = std::filesystem;

// First field of each cache line; a change of the measuring method bumps it, so ceilings
// measured the old way are not reused.
constexpr const char* kCacheVersion = "braid-cpu-peak-v1";

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// When this process started, near enough: libbraid's static initialisation runs before main.
const double kProcessStart = unix_seconds();

// Measurements, each by a separate run, before a cached ceiling is used without measuring: one
// taken while other work shared the cores would be too low, and other runs are unlikely to
// meet the same load.
constexpr int kSamplesToTrust = 3;

std::string trim(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

// Tabs separate the cache's fields, so none may appear inside one.
std::string without_tabs(std::string s) {
  std::replace(s.begin(), s.end(), '\t', ' ');
  return s;
}

// The CPU's name with its family and model numbers: under a hypervisor the name can be as
// vague as "AMD EPYC", which several generations share.
std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name, family, model;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      if (!name.empty()) break;  // the end of the first processor's block
      continue;
    }
    const std::string field = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if (field == "model name" && name.empty()) name = value;
    if (field == "cpu family" && family.empty()) family = value;
    if (field == "model" && model.empty()) model = value;
  }
  if (name.empty()) return "unknown CPU";
  if (family.empty() || model.empty()) return without_tabs(name);
  return without_tabs(fmt::format("{} (family {}, model {})", name, family, model));
}

// Memory for one n x n matrix on a cache-line boundary, as framework allocators give.
struct AlignedMatrix {
  explicit AlignedMatrix(int n) {
    const size_t bytes = (static_cast<size_t>(n) * n * sizeof(float) + 63) / 64 * 64;
    data.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    BRAID_CHECK(data != nullptr, "cannot allocate a {}x{} matrix to measure the sgemm ceiling", n,
                n);
  }
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> data;
};

// Median rate of `reps` timed calls after one untimed call (thread-pool start-up, JIT code
// generation and first-touch page faults are not the ceiling).
double median_rate(const std::function<void()>& gemm, double flops, int reps) {
  gemm();
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    gemm();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(flops / std::max(s, 1e-9));
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];  // the upper median, as sgemm_ceiling.c takes it
}

struct CacheEntry {
  CpuPeakKey key;
  double flops = 0;        // the highest of the measurements
  int samples = 0;         // how many measurements `flops` is the highest of
  double measured_at = 0;  // the latest, in seconds since the Unix epoch
};

struct CacheFile {
  std::vector<CacheEntry> entries;
  // Lines of other versions of this cache (another braid build on the machine): not read, but
  // written back, so two builds do not wipe each other's ceilings.
  std::vector<std::string> other_versions;
};

bool is_other_version(const std::string& line, const std::string& first_field) {
  if (first_field == kCacheVersion || first_field.rfind("braid-cpu-peak-v", 0) != 0) return false;
  return std::all_of(line.begin(), line.end(), [](char ch) {
    return ch == '\t' || std::isprint(static_cast<unsigned char>(ch));
  });
}

// The entries of a cache file; nullopt (with `problem` set) when any line does not parse, since
// a file damaged in one place may be damaged in others. A missing file is an empty cache.
std::optional<CacheFile> read_cache(const std::string& file, std::string* problem) {
  CacheFile cache;
  std::vector<CacheEntry>& entries = cache.entries;
  std::error_code ec;
  if (!fs::exists(file, ec)) return cache;
  std::ifstream in(file);
  if (!in) {
    *problem = "cannot be read";
    return std::nullopt;
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::stringstream split(line);
    for (std::string f; std::getline(split, f, '\t');) fields.push_back(f);
    auto bad = [&](const std::string& why) {
      *problem = fmt::format("line {} {}", number, why);
      return std::nullopt;
    };
    if (!fields.empty() && is_other_version(line, fields[0])) {
      cache.other_versions.push_back(line);
      continue;
    }
    if (fields.size() != 7 || fields[0] != kCacheVersion)
      return bad(fmt::format(
          "is not \"{}<TAB>cpu<TAB>threads<TAB>sgemm<TAB>FLOP/s<TAB>samples<TAB>measured at\"",
          kCacheVersion));
    CacheEntry e;
    e.key.cpu = fields[1];
    e.key.sgemm = fields[3];
    char* end = nullptr;
    errno = 0;
    const long threads = std::strtol(fields[2].c_str(), &end, 10);
    if (fields[2].empty() || *end != '\0' || errno != 0 || threads < 1 || threads > 1 << 20)
      return bad(fmt::format("has thread count \"{}\"", fields[2]));
    e.key.threads = static_cast<int>(threads);
    errno = 0;
    e.flops = std::strtod(fields[4].c_str(), &end);
    // Anything outside 1 MFLOP/s .. 1 EFLOP/s is no CPU's sgemm rate.
    if (fields[4].empty() || *end != '\0' || errno != 0 || !std::isfinite(e.flops) ||
        e.flops < 1e6 || e.flops > 1e18)
      return bad(fmt::format("has FLOP/s \"{}\"", fields[4]));
    errno = 0;
    const long samples = std::strtol(fields[5].c_str(), &end, 10);
    if (fields[5].empty() || *end != '\0' || errno != 0 || samples < 1 || samples > 1 << 20)
      return bad(fmt::format("has sample count \"{}\"", fields[5]));
    e.samples = static_cast<int>(samples);
    errno = 0;
    e.measured_at = std::strtod(fields[6].c_str(), &end);
    if (fields[6].empty() || *end != '\0' || errno != 0 || !std::isfinite(e.measured_at) ||
        e.measured_at < 0)
      return bad(fmt::format("has measurement time \"{}\"", fields[6]));
    if (e.key.cpu.empty() || e.key.sgemm.empty()) return bad("has an empty cpu or sgemm field");
    entries.push_back(e);
  }
  return cache;
}

// Replaces the file in one rename, so a reader never sees half of it. "" when written, else why
// not.
std::string write_cache(const std::string& file, const std::vector<CacheEntry>& entries,
                        const std::vector<std::string>& other_versions) {
  const std::string tmp = fmt::format("{}.tmp.{}", file, static_cast<long>(getpid()));
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return fmt::format("cannot create {}", tmp);
    out << "# braid CPU sgemm ceilings, the MFU peak (src/train/peak_flops.cpp): cpu, OpenMP "
           "threads, sgemm library, FLOP/s (the highest of `samples` runs), samples, last "
           "measured (Unix time).\n"
           "# Delete a line, or run with BRAID_REMEASURE_PEAK=1, to measure it again.\n";
    for (const std::string& line : other_versions) out << line << "\n";
    for (const CacheEntry& e : entries)
      out << fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\n", kCacheVersion, e.key.cpu, e.key.threads,
                         e.key.sgemm, e.flops, e.samples, e.measured_at);
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return fmt::format("cannot write {}", tmp);
    }
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return fmt::format("cannot replace {}: {}", file, ec.message());
  }
  return "";
}

// An exclusive flock held for the object's lifetime; a no-op when the lock file cannot be made
// (the measurement then simply is not serialised).
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_CREAT | O_RDWR, 0644)) {
    if (fd_ >= 0) {
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

std::vector<std::string> upper_tokens(std::string_view name) {
  std::vector<std::string> tokens;
  std::string current;
  for (char ch : name) {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      current += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    } else if (!current.empty()) {
      tokens.push_back(current);
      current.clear();
    }
  }
  if (!current.empty()) tokens.push_back(current);
  return tokens;
}

// One row of the GPU table, rates in TFLOP/s, dense.
struct GpuPart {
  const char* part;
  const char* family;   // a word of the CUDA device name: "H100"
  const char* variant;  // a further word that picks this row, or nullptr for the family's default
  int cc_major, cc_minor;
  double fp32, tf32, bf16;
  const char* datasheet;
};

// From NVIDIA's product datasheets, named in each row (the H100 one in its SXM/PCIe and its
// SXM/NVL revisions). The H100, H200 and L4 datasheets give tensor-core rates only with 2:4
// structured sparsity (their footnote *), so the dense rates here are half of those; the A100,
// A10, L40 and L40S datasheets give a dense column, used as it is. fp32 is the CUDA-core
// (non-tensor) rate. Names as cudaDeviceProp::name spells them, e.g. "NVIDIA H100 80GB HBM3"
// (SXM5), "NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA A100-SXM4-80GB".
constexpr GpuPart kGpuParts[] = {
    {"H100 SXM", "H100", nullptr, 9, 0, 67, 989.0 / 2, 1979.0 / 2,
     "NVIDIA H100 Tensor Core GPU datasheet"},
    {"H100 PCIe", "H100", "PCIE", 9, 0, 51, 756.0 / 2, 1513.0 / 2,
     "NVIDIA H100 Tensor Core GPU datasheet"},
    {"H100 NVL", "H100", "NVL", 9, 0, 60, 835.0 / 2, 1671.0 / 2,
     "NVIDIA H100 Tensor Core GPU datasheet"},
    {"H200 SXM", "H200", nullptr, 9, 0, 67, 989.0 / 2, 1979.0 / 2,
     "NVIDIA H200 Tensor Core GPU datasheet"},
    {"H200 NVL", "H200", "NVL", 9, 0, 60, 835.0 / 2, 1671.0 / 2,
     "NVIDIA H200 Tensor Core GPU datasheet"},
    // SXM4 and PCIe, 40 and 80 GB: the A100 datasheet gives them one rate.
    {"A100", "A100", nullptr, 8, 0, 19.5, 156, 312, "NVIDIA A100 Tensor Core GPU datasheet"},
    {"L40S", "L40S", nullptr, 8, 9, 91.6, 183, 362.05, "NVIDIA L40S GPU datasheet"},
    {"L40", "L40", nullptr, 8, 9, 90.5, 90.5, 181.05, "NVIDIA L40 GPU datasheet"},
    {"L4", "L4", nullptr, 8, 9, 30.3, 120.0 / 2, 242.0 / 2, "NVIDIA L4 Tensor Core GPU datasheet"},
    {"A10", "A10", nullptr, 8, 6, 31.2, 62.5, 125, "NVIDIA A10 Tensor Core GPU datasheet"},
};

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::tf32:
      return "tf32";
    case Precision::bf16:
      return "bf16";
  }
  return "?";
}

}  // namespace

CpuPeakKey current_cpu_peak_key() {
  return {cpu_description(), omp_get_max_threads(), ops::cpu::sgemm_library()};
}

CpuCeiling measure_cpu_sgemm_ceiling(int n, int reps, int rounds) {
  BRAID_CHECK(n > 0 && reps > 0 && rounds > 0,
              "the sgemm ceiling needs a size, repetitions and rounds > 0, got {}, {}, {}", n, reps,
              rounds);
  AlignedMatrix a(n), b(n), c(n);
  const size_t count = static_cast<size_t>(n) * n;
  // The values of sgemm_ceiling.c: its generator, in [-0.5, 0.5).
  uint32_t seed = 1;
  for (size_t i = 0; i < count; ++i) {
    seed = seed * 1103515245u + 12345u;
    a.data[i] = static_cast<float>((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    b.data[i] = static_cast<float>((seed >> 4) & 0xffff) / 65536.0f - 0.5f;
    c.data[i] = 0.0f;
  }
  const double flops = 2.0 * n * n * static_cast<double>(n);
  struct Path {
    std::string name;
    std::function<void()> gemm;
  };
  std::vector<Path> paths;
  paths.push_back({fmt::format("{} sgemm", ops::cpu::sgemm_library()), [&] {
                     ops::cpu::row_major_sgemm(false, false, n, n, n, 1.0f, a.data.get(), n,
                                               b.data.get(), n, 0.0f, c.data.get(), n);
                   }});
#if BRAID_CPU_GEMM_ONEDNN
  // braid sends the forward product of short-batch linear layers to the matmul primitive,
  // so its rate bounds what training can reach as much as sgemm's does.
  paths.push_back({"oneDNN matmul primitive", [&] {
                     ops::cpu::onednn_matmul(n, n, n, a.data.get(), n, b.data.get(), n, 0.0f,
                                             c.data.get(), n);
                   }});
#endif
  // The highest median of the rounds counts: other load on the machine only ever lowers it.
  CpuCeiling best;
  for (int round = 0; round < rounds; ++round) {
    for (const Path& p : paths) {
      const double rate = median_rate(p.gemm, flops, reps);
      if (rate > best.flops) {
        best.flops = rate;
        best.path = fmt::format("{} {}^3, median of {}{}", p.name, n, reps,
                                rounds > 1 ? fmt::format(", best of {} rounds", rounds) : "");
      }
    }
  }
  return best;
}

CpuPeakCache cpu_peak_cache_from_env() {
  CpuPeakCache cache;
  auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  if (const auto file = env("BRAID_PEAK_CACHE")) {
    cache.file = *file == "off" ? "" : *file;
  } else if (const auto xdg = env("XDG_CACHE_HOME"); xdg && fs::path(*xdg).is_absolute()) {
    // The XDG base-directory spec ignores a relative XDG_CACHE_HOME.
    cache.file = (fs::path(*xdg) / "braid" / "cpu_peak_flops.txt").string();
  } else if (const auto home = env("HOME"); home && !home->empty()) {
    cache.file = (fs::path(*home) / ".cache" / "braid" / "cpu_peak_flops.txt").string();
  }
  const auto remeasure = env("BRAID_REMEASURE_PEAK");
  if (remeasure && !remeasure->empty() && *remeasure != "0") cache.ignore_before = kProcessStart;
  cache.job_start = kProcessStart;
  return cache;
}

PeakFlops cpu_peak_flops(const CpuPeakKey& key, const CpuPeakCache& cache,
                         const std::function<CpuCeiling()>& measure) {
  const std::string what =
      fmt::format("sgemm ceiling on {} thread{}", key.threads, key.threads == 1 ? "" : "s");
  if (cache.file.empty()) {
    const CpuCeiling c = measure();
    return {c.flops, fmt::format("{}, measured now ({}; no cache)", what, c.path)};
  }
  std::error_code ec;
  const fs::path parent = fs::path(cache.file).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  FileLock lock(cache.file + ".lock");
  std::string problem;
  const auto read = read_cache(cache.file, &problem);
  if (!read)
    log().warn("peak FLOP/s cache {} {}: not trusted, measuring again", cache.file, problem);
  const CacheEntry* earlier = nullptr;
  if (read) {
    for (const CacheEntry& e : read->entries)
      if (e.key == key && e.measured_at >= cache.ignore_before) earlier = &e;
  }
  // This job's own measurement (another rank's, or an earlier Trainer's in this process) is
  // used as it is; an older one once enough runs have measured.
  if (earlier && (earlier->samples >= kSamplesToTrust || earlier->measured_at >= cache.job_start))
    return {earlier->flops, fmt::format("{}, cached from {}", what, cache.file)};
  const CpuCeiling c = measure();
  CacheEntry updated{key, c.flops, 1, unix_seconds()};
  if (earlier) {
    updated.flops = std::max(earlier->flops, c.flops);
    updated.samples = earlier->samples + 1;
  }
  const std::string measured =
      updated.samples == 1
          ? fmt::format("{}, measured now ({})", what, c.path)
          : fmt::format("{}, the highest of {} runs' measurements (now: {:.1f} GFLOP/s, {})", what,
                        updated.samples, c.flops / 1e9, c.path);
  std::vector<CacheEntry> kept;
  if (read) {
    for (const CacheEntry& e : read->entries)
      if (!(e.key == key)) kept.push_back(e);
  }
  kept.push_back(updated);
  const std::string failed =
      write_cache(cache.file, kept, read ? read->other_versions : std::vector<std::string>{});
  if (!failed.empty()) {
    log().warn("peak FLOP/s cache not written: {}", failed);
    return {updated.flops, fmt::format("{}; not cached: {}", measured, failed)};
  }
  return {updated.flops, fmt::format("{}, saved to {}", measured, cache.file)};
}

std::optional<GpuPeak> gpu_dense_peak(std::string_view device_name, int cc_major, int cc_minor,
                                      Precision precision) {
  const std::vector<std::string> tokens = upper_tokens(device_name);
  auto has = [&](const char* word) {
    return std::find(tokens.begin(), tokens.end(), word) != tokens.end();
  };
  // A row whose variant word is in the name wins over the family's default row.
  const GpuPart* found = nullptr;
  for (const GpuPart& p : kGpuParts) {
    if (!has(p.family)) continue;
    if (p.variant != nullptr && has(p.variant)) {
      found = &p;
      break;
    }
    if (p.variant == nullptr && found == nullptr) found = &p;
  }
  if (found == nullptr || found->cc_major != cc_major || found->cc_minor != cc_minor)
    return std::nullopt;
  const double tflops = precision == Precision::fp32   ? found->fp32
                        : precision == Precision::tf32 ? found->tf32
                                                       : found->bf16;
  return GpuPeak{fmt::format("{} {} dense", found->part, precision_name(precision)), tflops * 1e12,
                 found->datasheet};
}

std::optional<PeakFlops> gpu_peak_flops(std::string_view device_name, int cc_major, int cc_minor,
                                        Precision precision) {
  const auto peak = gpu_dense_peak(device_name, cc_major, cc_minor, precision);
  if (!peak) return std::nullopt;
  return PeakFlops{peak->flops, fmt::format("device table: {} ({})", peak->part, peak->datasheet)};
}

PeakFlops resolve_peak_flops(double configured) {
  if (configured > 0) return {configured, "training.peak_flops in the config"};
  return cpu_peak_flops(current_cpu_peak_key(), cpu_peak_cache_from_env(),
                        [] { return measure_cpu_sgemm_ceiling(); });
}

std::string peak_exceeded_warning(double mfu, double peak_flops, bool configured) {
  return fmt::format(
      "MFU {:.1f}% is above 100%: this run does more than the peak of {:.1f} GFLOP/s per rank, "
      "so the peak is too low{}",
      100.0 * mfu, peak_flops / 1e9,
      configured ? "; raise training.peak_flops"
                 : " (measured while other work shared the cores?); run once with "
                   "BRAID_REMEASURE_PEAK=1 on a quiet machine, or set training.peak_flops");
}

}  // namespace braid::train
