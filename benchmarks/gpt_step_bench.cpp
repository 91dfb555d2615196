// Times braid GPT training steps on the CPU or a CUDA device, whole and by phase, the braid side
// of benchmarks/cpu_vs_torch.sh and of the device checks' PyTorch comparison; takes the same
// flags and writes the same JSON as benchmarks/reference/torch_gpt.py.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "braid/core/error.h"
#include "braid/core/generator.h"
#include "braid/core/stream.h"
#include "braid/nn/gpt.h"
#include "braid/ops/kernel_registry.h"
#include "braid/ops/kernel_signatures.h"
#include "braid/optim/clip.h"
#include "braid/optim/optimizer.h"
#include "braid/train/device_placement.h"
#include "support/bench_support.h"

namespace {

const std::vector<braid::bench::FlagSpec> kFlags = {
    {"layers", "N", "12", "transformer blocks"},
    {"heads", "H", "12", "attention heads"},
    {"width", "C", "768", "model width"},
    {"vocab", "V", "50257", "vocabulary size"},
    {"batch", "B", "4", "sequences per step"},
    {"seq", "T", "64", "tokens per sequence"},
    {"steps", "N", "10", "timed steps"},
    {"warmup", "N", "2", "untimed steps first"},
    {"threads", "N", "2", "OpenMP threads"},
    {"device", "D", "cpu", "cpu, or cuda (the step as the Trainer runs it there)"},
    {"json", "FILE", "", "also write the results as JSON"},
    {"seed", "S", "0", "weight initialisation seed"}};
const braid::Usage kUsage = braid::bench::bench_usage(
    "gpt_step_bench",
    "Times GPT training steps on the CPU or a CUDA device, whole and by phase (braid's side "
    "of benchmarks/cpu_vs_torch.sh and of the device checks).",
    "gpt_step_bench --layers 4 --width 256 --heads 4 --threads 2 --json step.json", kFlags);

}  // namespace

int main(int argc, char** argv) {
  using namespace braid;
  if (const std::optional<int> status = answer_help_or_usage_error(kUsage, argc, argv))
    return *status;
  try {
    auto flags = bench::parse_flags(kUsage, kFlags, argc, argv);
    auto num = [&](const char* k) { return parse_integer(std::string("--") + k, flags[k]); };
    omp_set_num_threads(static_cast<int>(num("threads")));
    nn::GptConfig cfg;
    cfg.n_layer = num("layers");
    cfg.n_head = num("heads");
    cfg.n_embd = num("width");
    cfg.vocab_size = num("vocab");
    cfg.block_size = num("seq");
    const int64_t B = num("batch"), T = num("seq"), steps = num("steps"), warmup = num("warmup");
    const std::string device_name = flags["device"];
    const std::string problem = train::device_problem(device_name);
    BRAID_CHECK(problem.empty(), "--device {} {}", device_name, problem);
    const Device device = train::training_device(device_name, [](const char*) { return nullptr; });
    const bool on_device = !device.is_cpu();
    nn::Gpt model(cfg);
    model.init_weights(static_cast<uint64_t>(num("seed")));
    if (on_device) model.to(device);  // before the optimizer makes its state
    optim::AdamW opt(optim::decay_groups(model.named_parameters(), 0.1f), {0.9f, 0.95f, 1e-8f});
    const std::vector<Tensor> params = model.parameters();
    // As the Trainer's single-process strategy does on the CPU: each gradient's squares are
    // taken by its grad-ready hook, so the grad_norm phase only adds them up.
    optim::ReadyGradSquares ready(params);
    // On a device, as the Trainer's device step: the norm, clip scale and skip flag stay there
    // and AdamW reads them (Optimizer::set_device_step).
    Tensor record, state;
    if (on_device) {
      record = Tensor::zeros({ops::kStepRecord}, DType::f32, device);
      state = Tensor::zeros({ops::kStepState}, DType::f32, device);
      opt.set_device_step(record, state);
    }
    // Device work is asynchronous: each phase mark waits for it, so phases are device time.
    const Stream compute = Stream::compute(device);

    // Random batches made up front: the benchmark measures training steps, not loading.
    std::vector<std::pair<Tensor, Tensor>> batches;
    for (int64_t b = 0; b < 4; ++b) {
      std::vector<int32_t> tokens(B * (T + 1));
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = static_cast<int32_t>(uniform_at(7, b, i) * static_cast<float>(cfg.vocab_size)) %
                    static_cast<int32_t>(cfg.vocab_size);
      std::vector<int32_t> x, y;
      for (int64_t r = 0; r < B; ++r) {
        x.insert(x.end(), tokens.begin() + r * (T + 1), tokens.begin() + r * (T + 1) + T);
        y.insert(y.end(), tokens.begin() + r * (T + 1) + 1, tokens.begin() + (r + 1) * (T + 1));
      }
      batches.emplace_back(Tensor::from_vector(x, {B, T}, device),
                           Tensor::from_vector(y, {B, T}, device));
    }

    // Each step's phases, timed back to back, so a profile of the step needs no profiler.
    const std::vector<std::string> phases = {"zero_grad", "forward", "backward", "grad_norm",
                                             "adamw"};
    std::vector<std::vector<double>> phase_ms(phases.size());
    std::vector<double> times_ms;
    std::vector<float> losses;
    for (int64_t step = 0; step < warmup + steps; ++step) {
      const auto& [x, y] = batches[step % batches.size()];
      std::vector<std::chrono::steady_clock::time_point> marks = {std::chrono::steady_clock::now()};
      auto mark = [&] {
        compute.synchronize();
        marks.push_back(std::chrono::steady_clock::now());
      };
      model.zero_grad();
      mark();
      Tensor loss = model.loss(x, y);
      mark();
      ready.begin_backward(true);
      loss.backward();
      mark();
      if (on_device) {
        std::vector<Tensor> grads;
        for (const Tensor& p : params)
          if (p.grad().defined()) grads.push_back(p.grad());
        const optim::ClipResult clip = optim::clip_on_device(grads, 1.0f);
        ops::kernel<ops::StepVerdictKernel>(device)(loss.detach(), clip.device, step, record,
                                                    state);
        mark();
        opt.step(3e-4f, 1.0f);
      } else {
        const optim::ClipResult clip = optim::clip_coefficient(params, 1.0f, &ready);
        mark();
        opt.step(3e-4f, clip.scale);
      }
      mark();
      losses.push_back(loss.item());
      if (step < warmup) continue;
      auto ms = [&](size_t from, size_t to) {
        return std::chrono::duration<double, std::milli>(marks[to] - marks[from]).count();
      };
      times_ms.push_back(ms(0, phases.size()));
      for (size_t i = 0; i < phases.size(); ++i) phase_ms[i].push_back(ms(i, i + 1));
    }
    auto median_of = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    };
    const double median = median_of(times_ms);
    const double tokens_per_s = static_cast<double>(B * T) / (median / 1e3);
    std::printf(
        "braid %s L=%lld H=%lld C=%lld V=%lld B=%lld T=%lld threads=%lld: params %lld, median "
        "%.1f ms/step, %.1f tokens/s (loss %.3f -> %.3f)\n",
        device.str().c_str(), (long long)cfg.n_layer, (long long)cfg.n_head, (long long)cfg.n_embd,
        (long long)cfg.vocab_size, (long long)B, (long long)T, num("threads"),
        (long long)model.num_parameters(), median, tokens_per_s, losses.front(), losses.back());
    std::printf("  median ms per phase:");
    for (size_t i = 0; i < phases.size(); ++i)
      std::printf(" %s %.1f", phases[i].c_str(), median_of(phase_ms[i]));
    std::printf("\n");
    if (!flags["json"].empty()) {
      nlohmann::json j;
      j["impl"] = "braid";
      j["config"] = {{"layers", cfg.n_layer},
                     {"heads", cfg.n_head},
                     {"width", cfg.n_embd},
                     {"vocab", cfg.vocab_size},
                     {"padded_vocab", cfg.padded_vocab()},
                     {"batch", B},
                     {"seq", T},
                     {"steps", steps},
                     {"warmup", warmup},
                     {"threads", num("threads")},
                     {"device", device_name}};
      j["ms_per_step"] = times_ms;
      j["median_ms"] = median;
      for (size_t i = 0; i < phases.size(); ++i)
        j["phase_median_ms"][phases[i]] = median_of(phase_ms[i]);
      j["tokens_per_s"] = tokens_per_s;
      j["params"] = model.num_parameters();
      j["losses"] = losses;
      j.update(bench::run_facts_json(argc, argv));
      std::ofstream(flags["json"]) << j.dump(1) << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_step_bench: error: %s\n", e.what());
    return 1;
  }
}
