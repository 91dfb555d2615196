// Tests for the MFU peak: the GPU datasheet table, the CPU ceiling's cache (hits, keys, corrupt
// files, re-measuring, concurrent processes), and a tiny-config run whose MFU stays below 100%.
#include "braid/train/peak_flops.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "braid/data/token_shard.h"
#include "braid/train/config.h"
#include "braid/train/trainer.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

// ---- GPU table ---------------------------------------------------------------------------

struct GpuCase {
  std::string name;  // as cudaDeviceProp::name spells it
  int major, minor;
  Precision precision;
  std::string part;
  double tflops;
};

TEST(GpuPeak, DatasheetRatesByNameAndComputeCapability) {
  const std::vector<GpuCase> cases = {
      {"NVIDIA H100 80GB HBM3", 9, 0, Precision::bf16, "H100 SXM bf16 dense", 989.5},
      {"NVIDIA H100 80GB HBM3", 9, 0, Precision::tf32, "H100 SXM tf32 dense", 494.5},
      {"NVIDIA H100 80GB HBM3", 9, 0, Precision::fp32, "H100 SXM fp32 dense", 67},
      {"NVIDIA H100 PCIe", 9, 0, Precision::bf16, "H100 PCIe bf16 dense", 756.5},
      {"NVIDIA H100 PCIe", 9, 0, Precision::tf32, "H100 PCIe tf32 dense", 378},
      {"NVIDIA H100 NVL", 9, 0, Precision::fp32, "H100 NVL fp32 dense", 60},
      {"NVIDIA H200", 9, 0, Precision::bf16, "H200 SXM bf16 dense", 989.5},
      {"NVIDIA H200 NVL", 9, 0, Precision::bf16, "H200 NVL bf16 dense", 835.5},
      {"NVIDIA A100-SXM4-80GB", 8, 0, Precision::tf32, "A100 tf32 dense", 156},
      {"NVIDIA A100-PCIE-40GB", 8, 0, Precision::bf16, "A100 bf16 dense", 312},
      {"NVIDIA A100 80GB PCIe", 8, 0, Precision::fp32, "A100 fp32 dense", 19.5},
      {"NVIDIA L40S", 8, 9, Precision::bf16, "L40S bf16 dense", 362.05},
      {"NVIDIA L40S", 8, 9, Precision::tf32, "L40S tf32 dense", 183},
      // L40 and L4 are prefixes of L40S and L40: whole words decide.
      {"NVIDIA L40", 8, 9, Precision::bf16, "L40 bf16 dense", 181.05},
      {"NVIDIA L4", 8, 9, Precision::bf16, "L4 bf16 dense", 121},
      {"NVIDIA A10", 8, 6, Precision::tf32, "A10 tf32 dense", 62.5},
  };
  for (const GpuCase& c : cases) {
    const auto peak = gpu_dense_peak(c.name, c.major, c.minor, c.precision);
    ASSERT_TRUE(peak.has_value()) << c.name;
    EXPECT_EQ(peak->part, c.part) << c.name;
    EXPECT_DOUBLE_EQ(peak->flops, c.tflops * 1e12) << c.name << " " << c.part;
    EXPECT_NE(peak->datasheet.find("datasheet"), std::string::npos) << c.name;
  }
}

TEST(GpuPeak, UnknownPartsAndMismatchedCapabilityHaveNoPeak) {
  EXPECT_FALSE(gpu_dense_peak("NVIDIA GeForce RTX 4090", 8, 9, Precision::bf16).has_value());
  EXPECT_FALSE(gpu_dense_peak("NVIDIA GH200 480GB", 9, 0, Precision::bf16).has_value());
  EXPECT_FALSE(gpu_dense_peak("", 9, 0, Precision::bf16).has_value());
  // The name says H100, the device says Ampere: trust neither.
  EXPECT_FALSE(gpu_dense_peak("NVIDIA H100 80GB HBM3", 8, 0, Precision::bf16).has_value());
  EXPECT_FALSE(gpu_dense_peak("NVIDIA L40S", 9, 0, Precision::bf16).has_value());
}

TEST(GpuPeak, SourceNamesTheTableRowAndDatasheet) {
  const auto peak = gpu_peak_flops("NVIDIA H200", 9, 0, Precision::bf16);
  ASSERT_TRUE(peak.has_value());
  EXPECT_DOUBLE_EQ(peak->flops, 989.5e12);
  EXPECT_EQ(peak->source,
            "device table: H200 SXM bf16 dense (NVIDIA H200 Tensor Core GPU datasheet)");
  EXPECT_FALSE(gpu_peak_flops("NVIDIA T4", 7, 5, Precision::fp32).has_value());
}

// ---- CPU ceiling cache ---------------------------------------------------------------------

// Sets an environment variable for the test's lifetime, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

class PeakCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("braid_peak_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    cache_.file = (dir_ / "sub" / "cpu_peak_flops.txt").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A stand-in for the seconds-long real measurement; counts its calls.
  CpuCeiling measure() {
    ++measured_;
    return {rate_, "test gemm"};
  }
  PeakFlops peak(const CpuPeakKey& key) {
    return cpu_peak_flops(key, cache_, [this] { return measure(); });
  }
  void write(const std::string& text) {
    fs::create_directories(fs::path(cache_.file).parent_path());
    std::ofstream(cache_.file) << text;
  }

  fs::path dir_;
  CpuPeakCache cache_;
  CpuPeakKey key_{"Test CPU (family 1, model 2)", 2, "TestBLAS 1.0"};
  double rate_ = 1.234567891e11;
  int measured_ = 0;
};

TEST_F(PeakCacheTest, MeasuresOnceThenReadsTheCache) {
  const PeakFlops first = peak(key_);
  EXPECT_EQ(measured_, 1);
  EXPECT_EQ(first.flops, rate_);
  EXPECT_NE(first.source.find("sgemm ceiling on 2 threads, measured now (test gemm), saved to " +
                              cache_.file),
            std::string::npos)
      << first.source;
  ASSERT_TRUE(fs::exists(cache_.file));

  rate_ = 1;  // a second measurement would return this
  const PeakFlops second = peak(key_);
  EXPECT_EQ(measured_, 1) << "the cached ceiling is used";
  EXPECT_EQ(second.flops, 1.234567891e11) << "the cache keeps every digit";
  EXPECT_EQ(second.source, "sgemm ceiling on 2 threads, cached from " + cache_.file);
}

TEST_F(PeakCacheTest, EachPartOfTheKeyHasItsOwnEntry) {
  peak(key_);
  CpuPeakKey other_threads = key_, other_cpu = key_, other_sgemm = key_;
  other_threads.threads = 1;
  other_cpu.cpu = "Other CPU";
  other_sgemm.sgemm = "OtherBLAS";
  for (const CpuPeakKey& k : {other_threads, other_cpu, other_sgemm}) peak(k);
  EXPECT_EQ(measured_, 4);
  // All four are kept: none is measured again.
  for (const CpuPeakKey& k : {key_, other_threads, other_cpu, other_sgemm}) peak(k);
  EXPECT_EQ(measured_, 4);
}

TEST_F(PeakCacheTest, CorruptCacheIsMeasuredAgainAndRewritten) {
  const std::string good = "braid-cpu-peak-v1\tTest CPU (family 1, model 2)\t2\tTestBLAS 1.0\t";
  const std::vector<std::string> corrupt = {
      good + "5e10\t3\t0\n" + "braid-cpu-peak-v1\ttruncated",  // one good line, one cut short
      good + "not-a-number\t3\t0\n",
      good + "nan\t3\t0\n",
      good + "-5e10\t3\t0\n",
      good + "1e300\t3\t0\n",
      good + "5e10x\t3\t0\n",
      good + "5e10\t3\t0\textra\n",
      good + "5e10\t3\tyesterday\n",
      good + "5e10\t0\t0\n",
      good + "5e10\t0\n",
      "braid-cpu-peak-v1\tTest CPU (family 1, model 2)\t0\tTestBLAS 1.0\t5e10\t3\t0\n",
      "braid-cpu-peak-v1\tTest CPU (family 1, model 2)\ttwo\tTestBLAS 1.0\t5e10\t3\t0\n",
      std::string("\177ELF\2\1\1\0\0garbage", 16),
  };
  for (const std::string& text : corrupt) {
    write(text);
    measured_ = 0;
    const PeakFlops p = peak(key_);
    EXPECT_EQ(measured_, 1) << "trusted a corrupt cache: " << text;
    EXPECT_EQ(p.flops, rate_) << text;
    // Rewritten: the next call reads it.
    peak(key_);
    EXPECT_EQ(measured_, 1) << "not rewritten after: " << text;
  }
  // The same line, well formed, is trusted.
  write(good + "5e10\t3\t0\n");
  measured_ = 0;
  EXPECT_EQ(peak(key_).flops, 5e10);
  EXPECT_EQ(measured_, 0);
}

// Another braid build's cache lines (another version) are neither read nor wiped.
TEST_F(PeakCacheTest, OtherVersionsLinesAreKeptButNotRead) {
  const std::string other = "braid-cpu-peak-v0\tTest CPU (family 1, model 2)\t2\t5e10";
  write(other + "\n");
  EXPECT_EQ(peak(key_).flops, rate_);
  EXPECT_EQ(measured_, 1) << "a line of another version is not this version's ceiling";
  std::ifstream in(cache_.file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(other + "\n"), std::string::npos) << text.str();
  peak(key_);
  EXPECT_EQ(measured_, 1);
}

// Each later run measures again, keeping the highest, until three have: one measurement may have
// met other load, and the cache must not keep a ceiling below what the machine does.
TEST_F(PeakCacheTest, LaterRunsMeasureUntilThreeHaveThenKeepTheHighest) {
  cache_.job_start = 1e18;  // every call is a new run: nothing it finds is its own
  const std::vector<double> rates = {1.0e11, 0.6e11, 1.2e11};
  for (size_t run = 0; run < rates.size(); ++run) {
    rate_ = rates[run];
    const PeakFlops p = peak(key_);
    EXPECT_EQ(measured_, static_cast<int>(run + 1));
    EXPECT_EQ(p.flops, run < 2 ? 1.0e11 : 1.2e11) << "run " << run + 1;
    if (run > 0)
      EXPECT_NE(p.source.find(fmt::format("the highest of {} runs' measurements", run + 1)),
                std::string::npos)
          << p.source;
  }
  rate_ = 5e11;
  const PeakFlops cached = peak(key_);
  EXPECT_EQ(measured_, 3) << "three runs measured: the fourth uses the cache";
  EXPECT_EQ(cached.flops, 1.2e11);
  EXPECT_NE(cached.source.find("cached from"), std::string::npos) << cached.source;
}

// BRAID_REMEASURE_PEAK: what was cached before this run is dropped, not merged (the user asked
// for a new measurement), and the job's own new measurement is then used by its other ranks.
TEST_F(PeakCacheTest, RemeasureReplacesEntriesFromBeforeItsStart) {
  peak(key_);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  cache_.ignore_before = now + 1;
  rate_ = 0.5e11;
  EXPECT_EQ(peak(key_).flops, 0.5e11);
  EXPECT_EQ(measured_, 2);
  cache_.ignore_before = now;
  cache_.job_start = now;
  EXPECT_EQ(peak(key_).flops, 0.5e11);
  EXPECT_EQ(measured_, 2);
}

TEST_F(PeakCacheTest, WithoutACacheEveryCallMeasures) {
  cache_.file = "";
  const PeakFlops p = peak(key_);
  peak(key_);
  EXPECT_EQ(measured_, 2);
  EXPECT_NE(p.source.find("no cache"), std::string::npos) << p.source;
}

TEST_F(PeakCacheTest, UnwritableCacheStillGivesThePeak) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "a_file") << "not a folder";
  cache_.file = (dir_ / "a_file" / "cpu_peak_flops.txt").string();
  const PeakFlops p = peak(key_);
  EXPECT_EQ(p.flops, rate_);
  EXPECT_NE(p.source.find("not cached"), std::string::npos) << p.source;
}

// Ranks of one job on one machine: one measures, the others wait for it and read its result,
// so no measurement shares the cores with another.
TEST_F(PeakCacheTest, ConcurrentCallersMeasureOneAtATime) {
  std::atomic<int> inside{0}, most_inside{0}, calls{0};
  auto slow_measure = [&] {
    const int now = ++inside;
    most_inside = std::max(most_inside.load(), now);
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    --inside;
    return CpuCeiling{3e10, "slow"};
  };
  std::vector<std::thread> ranks;
  std::vector<double> got(4);
  for (int r = 0; r < 4; ++r)
    ranks.emplace_back([&, r] { got[r] = cpu_peak_flops(key_, cache_, slow_measure).flops; });
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(most_inside.load(), 1);
  for (double g : got) EXPECT_EQ(g, 3e10);
}

TEST(PeakCacheEnv, FileAndRemeasureFromTheEnvironment) {
  {
    ScopedEnv file("BRAID_PEAK_CACHE", "/tmp/x/peak.txt"), again("BRAID_REMEASURE_PEAK", nullptr);
    const CpuPeakCache c = cpu_peak_cache_from_env();
    EXPECT_EQ(c.file, "/tmp/x/peak.txt");
    EXPECT_EQ(c.ignore_before, 0);
    EXPECT_GT(c.job_start, 0);
  }
  {
    ScopedEnv file("BRAID_PEAK_CACHE", "off");
    EXPECT_EQ(cpu_peak_cache_from_env().file, "");
  }
  {
    ScopedEnv file("BRAID_PEAK_CACHE", nullptr), xdg("XDG_CACHE_HOME", "/var/cache/me"),
        again("BRAID_REMEASURE_PEAK", "1");
    const CpuPeakCache c = cpu_peak_cache_from_env();
    EXPECT_EQ(c.file, "/var/cache/me/braid/cpu_peak_flops.txt");
    EXPECT_GT(c.ignore_before, 0);
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    EXPECT_LE(c.ignore_before, now) << "when the process started, not later";
  }
  {
    // A relative XDG_CACHE_HOME is ignored, as the XDG spec says.
    ScopedEnv file("BRAID_PEAK_CACHE", nullptr), xdg("XDG_CACHE_HOME", "rel"),
        home("HOME", "/home/me"), again("BRAID_REMEASURE_PEAK", "0");
    const CpuPeakCache c = cpu_peak_cache_from_env();
    EXPECT_EQ(c.file, "/home/me/.cache/braid/cpu_peak_flops.txt");
    EXPECT_EQ(c.ignore_before, 0);
  }
}

TEST(CpuCeiling, MeasuresAWarmMedian) {
  const CpuCeiling c = measure_cpu_sgemm_ceiling(128, 5, 2);
  EXPECT_GT(c.flops, 1e8);
  EXPECT_NE(c.path.find("128^3, median of 5, best of 2 rounds"), std::string::npos) << c.path;
  EXPECT_NE(current_cpu_peak_key().sgemm, "");
  EXPECT_GE(current_cpu_peak_key().threads, 1);
}

TEST(ResolvePeak, ConfiguredPeakIsUsedAsIs) {
  const PeakFlops p = resolve_peak_flops(2.5e11);
  EXPECT_EQ(p.flops, 2.5e11);
  EXPECT_EQ(p.source, "training.peak_flops in the config");
}

TEST(ResolvePeak, WarningSaysHowToFixThePeak) {
  const std::string measured = peak_exceeded_warning(1.12, 1e11, false);
  EXPECT_NE(measured.find("MFU 112.0% is above 100%"), std::string::npos) << measured;
  EXPECT_NE(measured.find("100.0 GFLOP/s per rank"), std::string::npos) << measured;
  EXPECT_NE(measured.find("BRAID_REMEASURE_PEAK=1"), std::string::npos) << measured;
  const std::string configured = peak_exceeded_warning(1.12, 1e11, true);
  EXPECT_NE(configured.find("raise training.peak_flops"), std::string::npos) << configured;
}

// ---- MFU of the tiny config ------------------------------------------------------------------

fs::path repository_root() {
#ifdef BRAID_FIXTURE_DIR
  return fs::path(BRAID_FIXTURE_DIR).parent_path().parent_path();
#else
  return fs::path(__FILE__).parent_path().parent_path().parent_path().parent_path();
#endif
}

// examples/gpt/configs/tiny.textproto, the model and batch pretrain.sh trains, on a few steps
// of generated GPT-2 token ids. The peak is measured fresh into a temporary cache, by the
// method the Trainer uses, so the test does not depend on what this machine cached before.
TEST(PeakMfu, TinyConfigStaysBelowThePeak) {
  const fs::path dir =
      fs::temp_directory_path() /
      ("braid_peak_mfu_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::create_directories(dir);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 20000; ++i) tokens.push_back(static_cast<int32_t>((i * 7919) % 50257));
  data::write_token_shard(dir / "train_000.bin", std::span<const int32_t>(tokens));
  ScopedEnv cache("BRAID_PEAK_CACHE", (dir / "cpu_peak_flops.txt").c_str()),
      again("BRAID_REMEASURE_PEAK", nullptr);

  TrainConfig cfg =
      load_config((repository_root() / "examples/gpt/configs/tiny.textproto").string());
  set_field(cfg, "data.train_pattern", (dir / "train_*.bin").string());
  set_field(cfg, "data.val_pattern", "");
  set_field(cfg, "checkpoint.dir", "");
  set_field(cfg, "checkpoint.every_steps", "0");
  set_field(cfg, "resume", "");
  set_field(cfg, "optimizer.warmup_steps", "0");
  set_field(cfg, "training.steps", "3");
  ASSERT_EQ(cfg.model().n_layer(), 4);
  ASSERT_EQ(cfg.model().n_embd(), 256);
  ASSERT_EQ(cfg.training().batch_size(), 4);
  {
    Trainer trainer(cfg);
    for (int step = 0; step < 3; ++step) {
      const StepMetrics m = trainer.train_step();
      EXPECT_GT(m.mfu, 0.0) << "step " << step + 1;
      EXPECT_LT(m.mfu, 1.0) << "step " << step + 1 << ": " << m.tokens_per_s << " tok/s";
    }
  }
  fs::remove_all(dir);
}

// A declared peak replaces the measurement: MFU scales with it, and nothing is measured (the
// run is fast and leaves no cache behind).
TEST(PeakMfu, ConfiguredPeakIsTheDenominator) {
  const fs::path dir =
      fs::temp_directory_path() /
      ("braid_peak_config_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::create_directories(dir);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 4000; ++i) tokens.push_back(static_cast<int32_t>('a' + i % 13));
  data::write_token_shard(dir / "train_000.bin", std::span<const int32_t>(tokens));
  ScopedEnv cache("BRAID_PEAK_CACHE", (dir / "never_written.txt").c_str());
  auto mfu_with_peak = [&](const std::string& peak) {
    Trainer trainer(parse_config(fmt::format(R"(
model {{ vocab_size: 257 n_layer: 1 n_head: 2 n_embd: 32 block_size: 16 }}
data {{ train_pattern: "{}/train_*.bin" tokenizer: "byte" }}
training {{ steps: 2 batch_size: 4 seq_len: 16 peak_flops: {} }}
)",
                                             dir.string(), peak),
                                 "test"));
    trainer.train_step();
    return trainer.train_step().mfu;
  };
  const double tiny_share = mfu_with_peak("1e18");
  EXPECT_GT(tiny_share, 0.0);
  EXPECT_LT(tiny_share, 1e-6);
  // A peak far below what the run does: MFU above 1 (the Trainer warns once).
  EXPECT_GT(mfu_with_peak("1e3"), 1.0);
  EXPECT_FALSE(fs::exists(dir / "never_written.txt"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace braid::train
