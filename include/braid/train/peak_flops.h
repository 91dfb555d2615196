// The peak FLOP/s an MFU is measured against: a declared value, the CPU's sgemm ceiling
// (measured warm by the first runs on a machine and cached), or a GPU's datasheet peak.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace braid::train {

// A peak and where it came from, for the start-up log line.
struct PeakFlops {
  double flops = 0;    // FLOP/s of one rank
  std::string source;  // "measured ...", "cached from <file>", "config ...", "device table ..."
};

// ---- CPU: the sgemm ceiling ----------------------------------------------------------------

// What a CPU ceiling depends on; one cache entry per distinct key.
struct CpuPeakKey {
  std::string cpu;    // "AMD EPYC (family 25, model 17)" from /proc/cpuinfo
  int threads = 1;    // OpenMP threads the GEMMs ran on
  std::string sgemm;  // ops::cpu::sgemm_library(), e.g. "oneDNN 2.6.3"
  bool operator==(const CpuPeakKey&) const = default;
};

// This machine, the calling thread's OpenMP thread count and the linked GEMM library.
CpuPeakKey current_cpu_peak_key();

// The ceiling benchmarks/cpu_vs_torch.sh judges training against (benchmarks/sgemm_ceiling.c):
// for each GEMM braid calls (the library's sgemm, and oneDNN's matmul primitive where braid
// uses it), one untimed n^3 product, then `reps` timed ones; the median rate of the fastest.
// Like the script, which measures before and after its runs, it takes the higher median of
// `rounds`: load from other work only ever lowers it. Runs on the calling thread's OpenMP
// thread count (about 2 s a round on one thread of a 100 GFLOP/s core). `path` names the GEMM
// that won.
struct CpuCeiling {
  double flops = 0;
  std::string path;
};
CpuCeiling measure_cpu_sgemm_ceiling(int n = 1024, int reps = 50, int rounds = 2);

// Where the CPU ceiling is cached and which entries to trust.
struct CpuPeakCache {
  // The cache file; "" keeps no cache (measure every time).
  std::string file;
  // Entries measured before this time (seconds since the Unix epoch) are measured again and
  // replaced. BRAID_REMEASURE_PEAK sets it to when this process started, so the first rank of
  // a job on a machine measures and the job's later ranks there use what it wrote.
  double ignore_before = 0;
  // Entries measured at or after this time are this job's own (ranks started together, or an
  // earlier Trainer in this process) and used as they are. Older ones are measured again by
  // each run, keeping the highest, until 3 runs have measured: one measurement may have met
  // other load. cpu_peak_cache_from_env sets it to when this process started.
  double job_start = 0;
};

// From the environment: BRAID_PEAK_CACHE names the file ("" or "off": no cache), else
// $XDG_CACHE_HOME/braid/cpu_peak_flops.txt, else ~/.cache/braid/cpu_peak_flops.txt;
// BRAID_REMEASURE_PEAK=1 re-measures (see ignore_before).
CpuPeakCache cpu_peak_cache_from_env();

// The ceiling for `key`: the cache's entry, or `measure()` saved to the cache (the highest of the
// runs' measurements, see job_start). Processes on one machine take turns under a lock on
// "<file>.lock", so ranks started together measure one at a time (a ceiling measured while
// other ranks share the cores would be too low) and the later ones read what the first wrote;
// without a cache every rank measures its own. A cache file that does not parse is ignored and
// rewritten, never trusted; a cache that cannot be written is reported in `source`.
PeakFlops cpu_peak_flops(const CpuPeakKey& key, const CpuPeakCache& cache,
                         const std::function<CpuCeiling()>& measure);

// ---- GPU: datasheet peaks ------------------------------------------------------------------

enum class Precision { fp32, tf32, bf16 };

struct GpuPeak {
  std::string part;       // the row and precision, "H100 SXM bf16 dense"
  double flops = 0;       // dense FLOP/s at the precision asked for
  std::string datasheet;  // the NVIDIA document the number comes from
};

// The dense (no 2:4 sparsity) peak of an NVIDIA data-centre GPU, looked up by the name CUDA
// reports (cudaDeviceProp::name, e.g. "NVIDIA H100 80GB HBM3") and its compute capability;
// fp32 is the CUDA-core rate, tf32 and bf16 the tensor-core rates. nullopt for a part not in
// the table or a name whose compute capability does not match it: set training.peak_flops.
std::optional<GpuPeak> gpu_dense_peak(std::string_view device_name, int cc_major, int cc_minor,
                                      Precision precision);

// The same as a PeakFlops whose source names the table row and its datasheet, for the log.
std::optional<PeakFlops> gpu_peak_flops(std::string_view device_name, int cc_major, int cc_minor,
                                        Precision precision);

// ---- the Trainer's choice ------------------------------------------------------------------

// `configured` (training.peak_flops) when > 0; otherwise the CPU ceiling through the cache the
// environment names (cpu_peak_cache_from_env).
PeakFlops resolve_peak_flops(double configured);

// The warning for a step whose MFU is above 1: the peak is below what the run achieves (most
// likely a ceiling measured while other work shared the cores), with how to correct it.
std::string peak_exceeded_warning(double mfu, double peak_flops, bool configured);

}  // namespace braid::train
