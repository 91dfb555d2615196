// The memory plan: per-rank parameter shapes, DataParallel's buckets and ZeRO-1 shards, the
// tensors the forward saves and the backward's peak, as braid's ops allocate them (f32 on host
// and device alike; docs/memory.md explains every term).
#include "braid/train/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "braid/core/allocator.h"
#include "braid/core/byte_count.h"
#include "braid/core/error.h"
#include "braid/dist/process_group.h"
#include "braid/parallel/pipeline/partition.h"
#include "braid/parallel/pipeline/schedule.h"
#include "braid/parallel/pipeline/validate.h"
#include "ops/cpu/onednn_matmul.h"
#include "ops/cpu/split_gemm.h"

namespace braid::train {
namespace {

constexpr int64_t kF32 = 4;  // every parameter, gradient, moment and activation is f32
constexpr int64_t kI32 = 4;  // token ids and targets

// One parameter of a rank's model part: its element count on this rank.
struct ParamSize {
  std::string name;
  int64_t numel = 0;
};

// The parameters of a stage's part in nn::Gpt's registration order (Module::named_parameters),
// each as this tp rank holds it: column-parallel qkv and fc and row-parallel projections split
// over tp, the vocabulary rows split over tp, LayerNorms and row-parallel biases whole.
std::vector<ParamSize> part_parameters(const TrainConfig& config, int64_t padded_vocab, int tp,
                                       const std::vector<std::pair<int64_t, int64_t>>& chunks,
                                       bool embeddings, bool head) {
  const auto& m = config.model();
  const int64_t c = m.n_embd();
  std::vector<ParamSize> out;
  if (embeddings || (head && m.tie_embeddings()))
    out.push_back({"wte.weight", padded_vocab / tp * c});
  if (embeddings) out.push_back({"wpe.weight", int64_t{m.block_size()} * c});
  for (const auto& [first, end] : chunks)
    for (int64_t i = first; i < end; ++i) {
      const std::string b = "blocks." + std::to_string(i) + ".";
      out.push_back({b + "ln1.weight", c});
      out.push_back({b + "ln1.bias", c});
      out.push_back({b + "attn.qkv.weight", 3 * c / tp * c});
      out.push_back({b + "attn.qkv.bias", 3 * c / tp});
      out.push_back({b + "attn.proj.weight", c * (c / tp)});
      out.push_back({b + "attn.proj.bias", c});
      out.push_back({b + "ln2.weight", c});
      out.push_back({b + "ln2.bias", c});
      out.push_back({b + "mlp.fc.weight", 4 * c / tp * c});
      out.push_back({b + "mlp.fc.bias", 4 * c / tp});
      out.push_back({b + "mlp.proj.weight", c * (4 * c / tp)});
      out.push_back({b + "mlp.proj.bias", c});
    }
  if (head) {
    out.push_back({"ln_f.weight", c});
    out.push_back({"ln_f.bias", c});
    if (!m.tie_embeddings()) out.push_back({"lm_head.weight", padded_vocab / tp * c});
  }
  return out;
}

// Elements of this dp rank's ZeRO-1 shard: DataParallel::setup's buckets (parameters in reverse
// registration order, a new bucket once one holds bucket_mb MiB) and its chunk of each.
int64_t zero1_shard(const std::vector<ParamSize>& params, double bucket_mb, int dp, int dp_rank) {
  const int64_t bucket_elems =
      std::max<int64_t>(1, static_cast<int64_t>(bucket_mb * (1 << 20) / sizeof(float)));
  std::vector<int64_t> buckets;
  for (size_t k = params.size(); k-- > 0;) {
    if (buckets.empty() || buckets.back() >= bucket_elems) buckets.push_back(0);
    buckets.back() += params[k].numel;
  }
  int64_t shard = 0;
  for (int64_t length : buckets) shard += dist::chunk_size(length, dp, dp_rank);
  return shard;
}

// The partial products a CPU GEMM of C[m, n] = op(A)[m, k] op(B)[k, n] writes when split_gemm.h
// cuts its reduction over the threads (a k of a vocabulary's length and a small C), elements;
// 0 for products it cuts otherwise, keeps whole, or hands to oneDNN's matmul primitive.
double reduction_scratch(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b) {
#if BRAID_CPU_GEMM_ONEDNN
  if (ops::cpu::matmul_primitive_suits(trans_a, trans_b, m, k, 1.0f, 0.0f)) return 0;
#else
  (void)trans_a;
  (void)trans_b;
#endif
  const ops::cpu::GemmSplit split = ops::cpu::plan_gemm_split(m, n, k);
  if (split.axis != ops::cpu::GemmSplit::Axis::reduction) return 0;
  return static_cast<double>(split.count()) * static_cast<double>(m) * static_cast<double>(n);
}

// The largest reduction scratch of a linear layer [in -> out] over `rows` rows: its forward
// X W^T, its input gradient dY W and its weight gradient dY^T X.
double linear_scratch(int64_t rows, int64_t in, int64_t out) {
  return std::max({reduction_scratch(rows, out, in, false, true),
                   reduction_scratch(rows, in, out, false, false),
                   reduction_scratch(out, in, rows, true, false)});
}

// Everything the activation peak depends on, in elements.
struct ActivationShape {
  double n = 0;             // tokens of one micro-batch (rows x seq_len)
  double c = 0;             // width
  double h = 0;             // heads
  double vp = 0;            // this rank's vocabulary columns (padded vocab / tp)
  double tp = 1;            // tensor-parallel ways
  bool sp = false;          // sequence parallel (tp > 1 only)
  bool fused_loss = false;  // the CPU's fused cross-entropy writes its gradient over the logits
  // On a device the embeddings' backward scatters into zeroed [rows, C] tables (the ids are not
  // read back to the host) that are then added into .grad; on the CPU it adds straight in.
  double table_gradients = 0;
  // CPU GEMMs' reduction scratch (reduction_scratch): the head's and the widest of a block's.
  double head_scratch = 0;
  double block_scratch = 0;
};

// A block's saved tensors besides its input, and its output (the next block's input), in
// elements. Without sequence parallelism: ln1's and ln2's outputs (saved by qkv and fc, which
// take them as they are), ln1/ln2's mean and rstd (2N each), qkv's output (3NC/tp, saved by
// attention), attention's heads (NC/tp) and log-sum-exp (HN/tp), the residual h (saved by ln2),
// fc's output (4NC/tp, saved by GELU) and GELU's output (4NC/tp, saved by the projection).
// With it: the LayerNorm outputs are not saved but their all-gathered sequences are (NC each),
// and the residuals, LayerNorm statistics and output hold N/tp rows.
struct BlockActivations {
  double own = 0;
  double out = 0;
};

BlockActivations block_activations(const ActivationShape& s) {
  const double nc = s.n * s.c, t = s.tp;
  if (s.sp) return {2 * nc + (3 + 1 + 1 + 4 + 4) * nc / t + 4 * s.n / t + s.h * s.n / t, nc / t};
  return {nc + 2 * s.n + 3 * nc / t + nc / t + s.h * s.n / t + nc + 2 * s.n + nc + 8 * nc / t, nc};
}

// One block's parameters on this tp rank, in elements.
double block_parameters(double c, double t) {
  return 4 * c + 3 * c * c / t + 3 * c / t + c * c / t + c + 4 * c * c / t + 4 * c / t +
         4 * c * c / t + c;
}

// What a stage holds between its forward and its backward, and the backward's peak above it.
struct StageActivations {
  double saved = 0;       // every in-flight micro-batch's saved tensors, head included
  double head_saved = 0;  // of those, the head's (freed once the head's backward ran)
  double peak = 0;        // the step's peak, elements
};

// Peak activation elements of one stage: the largest of
//   the head's moment: everything saved + the loss's scratch or the logits' gradient (fused on
//     the CPU without tp: written over the logits, leaving the head's input gradient, NC, and
//     its GEMM's reduction scratch);
//   the last block's backward: everything saved but the head's + the incoming gradient + the
//     backward's widest transient (the MLP projection's input gradient, 4NC/tp, plus the
//     sequence gather of the incoming gradient under sequence parallelism);
//   under recompute, that block's replay: its saved tensors and output again, and its
//     parameters' gradients captured inside the replay (each fresh, then cloned by the capture);
//   on a device, the embeddings' backward through zeroed tables.
StageActivations stage_activations(const ActivationShape& s, bool recompute,
                                   const std::vector<int64_t>& chunk_blocks, bool embeddings,
                                   bool head, int in_flight, int head_in_flight) {
  const BlockActivations block = block_activations(s);
  const double nc = s.n * s.c, t = s.tp;
  const double per_block = recompute ? block.out : block.own + block.out;
  const int64_t widest_chunk = *std::max_element(chunk_blocks.begin(), chunk_blocks.end());
  // A chunk holds its input (the embedding's output or the received activation) and its blocks.
  double chunk = block.out + static_cast<double>(widest_chunk) * per_block;
  // The vocabulary-parallel embedding saves its mask and this rank's ids.
  if (embeddings && t > 1) chunk += 2 * s.n;
  const double logits = s.n * s.vp;
  // ln_f's statistics, the head's input (ln_f's output, or its gathered sequence), the logits.
  const double head_saved = (s.sp ? 2 * s.n / t : 2 * s.n) + nc + logits;
  StageActivations out;
  out.head_saved = head ? head_in_flight * head_saved : 0;
  out.saved = in_flight * chunk + out.head_saved;
  const double rest = out.saved - out.head_saved;
  double peak = 0;
  if (head) {
    // The loss's scratch: losses (and lse) on the forward, the vocabulary-parallel loss's ids,
    // row maxima, sums, lse and losses (6N); then the gradient of the logits.
    const double scratch =
        std::max(t > 1 ? 6 * s.n : (s.fused_loss ? s.n : 2 * s.n), s.head_scratch);
    // The head's input gradient and its GEMM's scratch come once the loss's saved logits are
    // freed (non-fused) or hold their gradient (fused).
    const double input_gradient = nc + s.head_scratch;
    const double gradient = s.fused_loss ? input_gradient : std::max(logits, input_gradient);
    peak = out.saved + std::max(scratch, gradient);
  }
  const double incoming = block.out;
  const double widest = 4 * nc / t + (s.sp ? nc : 0) + s.block_scratch;
  if (!recompute) {
    peak = std::max(peak, rest + incoming + widest);
  } else {
    const double c = s.c;
    const double replay = block.own + block.out;
    // The parameters' accumulators date from the forward, so the engine runs them after every
    // replayed node: each weight gradient stays until the replay's end, when the capture clones
    // them one by one. Peaks: the MLP projection's backward (its weight gradient made), and the
    // end (every gradient, the largest one's clone, the gradient of the block's input).
    const double during = replay + widest + 4 * c * c / t + c;
    const double at_end = block_parameters(c, t) + 4 * c * c / t + nc / (s.sp ? t : 1);
    peak = std::max(peak, rest + incoming + std::max(during, at_end));
  }
  // The embeddings' backward comes last, when every activation but the batch is freed.
  if (embeddings) peak = std::max(peak, s.table_gradients + nc / (s.sp ? t : 1));
  out.peak = peak;
  return out;
}

std::string resolved_strategy(const TrainConfig& config) {
  const std::string& s = config.parallel().strategy();
  return s == "auto" ? (config.parallel().dp() > 1 ? "ddp" : "none") : s;
}

double bucket_mb_of(const TrainConfig& config) {
  const auto& options = config.parallel().strategy_options();
  auto it = options.find("bucket_mb");
  if (it == options.end()) return 4.0;  // DataParallelOptions' default
  try {
    size_t end = 0;
    const double v = std::stod(it->second, &end);
    if (end == it->second.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  BRAID_FAIL("parallel.strategy_options bucket_mb='{}' is not a number > 0", it->second);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string variant_name(const ActivationVariant& v, bool with_sp) {
  std::string s = v.recompute ? "recompute on" : "recompute off";
  if (with_sp) s += v.sequence_parallel ? ", sequence parallel on" : ", sequence parallel off";
  return s;
}

}  // namespace

bool RankMemory::same_numbers(const RankMemory& o) const {
  if (variants.size() != o.variants.size()) return false;
  for (size_t i = 0; i < variants.size(); ++i)
    if (variants[i].bytes != o.variants[i].bytes) return false;
  return pp_stage == o.pp_stage && parameter_count == o.parameter_count &&
         parameters == o.parameters && gradients == o.gradients &&
         optimizer_state == o.optimizer_state && activations == o.activations &&
         comm_buffers == o.comm_buffers && update_copies == o.update_copies && total == o.total;
}

const RankMemory& MemoryPlan::for_rank(int world_rank) const {
  for (const RankMemory& g : groups)
    if (std::find(g.ranks.begin(), g.ranks.end(), world_rank) != g.ranks.end()) return g;
  BRAID_FAIL("rank {} is not in this plan of {} ranks (tp * pp * dp)", world_rank, tp * pp * dp);
}

int64_t MemoryPlan::max_total() const {
  int64_t most = 0;
  for (const RankMemory& g : groups) most = std::max(most, g.total);
  return most;
}

MemoryPlan plan_memory(const TrainConfig& config) {
  // Validated as a CPU run: a plan for a device is made where none may be visible (a login
  // node); the device only needs to be one braid trains on.
  const std::string& device = config.training().device();
  BRAID_CHECK(device == "cpu" || device == "cuda",
              "training.device \"{}\" is not one braid trains on (expected cpu or cuda)", device);
  TrainConfig on_cpu = config;
  on_cpu.proto.mutable_training()->set_device("cpu");
  validate(on_cpu);
  const auto& m = config.model();
  const auto& par = config.parallel();
  const auto& tr = config.training();
  MemoryPlan plan;
  plan.device = tr.device();
  plan.optimizer = config.optimizer().name();
  plan.tp = par.tp();
  plan.pp = par.pp();
  plan.dp = par.dp();
  plan.virtual_stages = par.virtual_stages();
  plan.micro_batches =
      par.pp() > 1 ? (par.micro_batches() > 0 ? par.micro_batches() : par.pp()) : 1;
  plan.batch_size = tr.batch_size();
  plan.seq_len = tr.seq_len();
  plan.grad_accum_steps = tr.grad_accum_steps();
  plan.vocab_size = m.vocab_size();
  const int64_t multiple = std::lcm(std::max<int64_t>(m.padded_vocab_multiple(), 1), plan.tp);
  plan.padded_vocab = (plan.vocab_size + multiple - 1) / multiple * multiple;
  plan.recompute = m.recompute();
  plan.sequence_parallel = par.sequence_parallel() && plan.tp > 1;
  const std::string inner = resolved_strategy(config);
  const bool zero1 = inner == "zero1";
  const double bucket_mb = inner == "none" ? 4.0 : bucket_mb_of(config);

  namespace pl = parallel::pipeline;
  const pl::ScheduleShape shape{plan.pp, plan.micro_batches, plan.virtual_stages};
  std::vector<int> in_flight(plan.pp, 1);
  if (plan.pp > 1) {
    plan.schedule = par.schedule() == "auto"
                        ? (plan.virtual_stages > 1 ? "interleaved_1f1b" : "1f1b")
                        : par.schedule();
    plan.strategy = inner + "+pipeline(" + plan.schedule + ")";
    in_flight = pl::validate(pl::make_schedule(plan.schedule, shape)).peak_activations;
  } else {
    plan.strategy = inner;
  }
  const auto ranges =
      pl::split_layers(m.n_layer(), shape.virtual_stages(),
                       std::vector<int64_t>(par.stage_layers().begin(), par.stage_layers().end()));
  const int64_t rows = plan.pp > 1 ? plan.batch_size / plan.micro_batches : plan.batch_size;

  std::vector<RankMemory> per_rank;
  const int world = plan.tp * plan.pp * plan.dp;
  for (int rank = 0; rank < world; ++rank) {
    // The grid's default axis order: tp varies fastest, then dp, then pp.
    const int dp_rank = (rank / plan.tp) % plan.dp;
    const int stage = rank / (plan.tp * plan.dp);
    const auto chunks = plan.pp > 1 ? pl::stage_chunks(ranges, shape, stage) : ranges;
    const bool embeddings = stage == shape.stage_of(0);
    const bool head = stage == shape.stage_of(shape.virtual_stages() - 1);
    const std::vector<ParamSize> params =
        part_parameters(config, plan.padded_vocab, plan.tp, chunks, embeddings, head);
    RankMemory r;
    r.ranks = {rank};
    r.pp_stage = stage;
    for (const ParamSize& p : params) r.parameter_count += p.numel;
    r.parameters = r.parameter_count * kF32;
    r.gradients = r.parameter_count * kF32;
    const int64_t shard = zero1 ? zero1_shard(params, bucket_mb, plan.dp, dp_rank) : 0;
    if (plan.optimizer == "adamw") {
      r.optimizer_state = 2 * (zero1 ? shard : r.parameter_count) * kF32;
      // On a device AdamW keeps its bias corrections as a table of two doubles per step, 1024
      // steps at first, doubled as the run grows (AdamW::bias_table).
      if (plan.device != "cpu") {
        int64_t steps = 1024;
        while (steps < tr.steps()) steps *= 2;
        r.optimizer_state += 2 * steps * static_cast<int64_t>(sizeof(double));
      }
    } else if (config.optimizer().momentum() != 0)
      r.optimizer_state = r.parameter_count * kF32;
    // ZeRO-1 reduce-scatters the gradients into a shard of their own; its update all-gathers
    // from a copy of this rank's chunks, made after the backward freed the activations.
    if (zero1) {
      r.comm_buffers = shard * kF32;
      r.update_copies = shard * kF32;
    }
    // The pipeline's posted receives: one micro-batch of the residual stream each, activations
    // on every stage but the first, gradients on every stage but the last (both with
    // interleaving, whose chunks sit on every stage).
    const double activation_shape = static_cast<double>(rows) * plan.seq_len * m.n_embd() /
                                    (plan.sequence_parallel ? plan.tp : 1);
    if (plan.pp > 1) {
      const int receives =
          plan.virtual_stages > 1 ? 2 : (stage > 0 ? 1 : 0) + (stage < plan.pp - 1 ? 1 : 0);
      r.comm_buffers += static_cast<int64_t>(receives * activation_shape) * kF32;
    }

    std::vector<int64_t> chunk_blocks;
    for (const auto& [first, end] : chunks) chunk_blocks.push_back(end - first);
    // A last stage under 1F1B runs each micro-batch's backward right after its forward; under
    // GPipe (and interleaving, conservatively) it may hold every in-flight head.
    const int head_in_flight = plan.pp > 1 && plan.schedule != "1f1b" ? in_flight[stage] : 1;
    // The step's batch (ids and targets) for the whole step, the position ids the embedding
    // saves (this rank's piece of the sequence), and two scalars: the micro-batch scale and
    // the backward's seed gradient.
    const int64_t batch = 2 * int64_t{plan.batch_size} * plan.seq_len * kI32 + 2 * kF32;
    for (int rc = 0; rc < 2; ++rc)
      for (int sp = 0; sp < (plan.tp > 1 ? 2 : 1); ++sp) {
        ActivationShape s;
        s.n = static_cast<double>(rows) * plan.seq_len;
        s.c = static_cast<double>(m.n_embd());
        s.h = static_cast<double>(m.n_head());
        s.vp = static_cast<double>(plan.padded_vocab / plan.tp);
        s.tp = plan.tp;
        s.sp = sp == 1;
        s.fused_loss = plan.device == "cpu" && plan.tp == 1;
        if (plan.device != "cpu") {
          s.table_gradients = (s.vp + static_cast<double>(m.block_size())) * s.c;
        } else {
          // The head's and the blocks' linear layers see the whole sequence (gathered under
          // sequence parallelism).
          const int64_t tokens = rows * plan.seq_len, c = m.n_embd(), t = plan.tp;
          s.head_scratch = linear_scratch(tokens, c, plan.padded_vocab / t);
          s.block_scratch = std::max(
              {linear_scratch(tokens, c, 3 * c / t), linear_scratch(tokens, c / t, c),
               linear_scratch(tokens, c, 4 * c / t), linear_scratch(tokens, 4 * c / t, c)});
        }
        const StageActivations a = stage_activations(s, rc == 1, chunk_blocks, embeddings, head,
                                                     in_flight[stage], head_in_flight);
        ActivationVariant v;
        v.recompute = rc == 1;
        v.sequence_parallel = sp == 1;
        const int64_t positions = embeddings ? plan.seq_len / (sp == 1 ? plan.tp : 1) : 0;
        v.bytes = static_cast<int64_t>(std::ceil(a.peak)) * kF32 + batch + positions * kI32;
        v.configured =
            v.recompute == plan.recompute && v.sequence_parallel == plan.sequence_parallel;
        if (v.configured) r.activations = v.bytes;
        r.variants.push_back(v);
      }
    r.total = r.parameters + r.gradients + r.optimizer_state + r.comm_buffers +
              std::max(r.activations, r.update_copies);
    per_rank.push_back(std::move(r));
  }
  for (RankMemory& r : per_rank) {
    auto same = std::find_if(plan.groups.begin(), plan.groups.end(),
                             [&](const RankMemory& g) { return g.same_numbers(r); });
    if (same != plan.groups.end())
      same->ranks.push_back(r.ranks.front());
    else
      plan.groups.push_back(std::move(r));
  }
  return plan;
}

std::string memory_plan_table(const MemoryPlan& plan) {
  std::ostringstream out;
  out << fmt::format("memory plan on {}: tp={} pp={} dp={} ({} ranks), strategy {}, optimizer {}\n",
                     plan.device, plan.tp, plan.pp, plan.dp, plan.tp * plan.pp * plan.dp,
                     plan.strategy, plan.optimizer);
  out << fmt::format(
      "batch {} x {} tokens per micro-step, {} accumulated, {} micro-batch(es), {} virtual "
      "stage(s), vocabulary {} padded to {}, recompute {}, sequence parallel {}\n",
      plan.batch_size, plan.seq_len, plan.grad_accum_steps, plan.micro_batches, plan.virtual_stages,
      plan.vocab_size, plan.padded_vocab, plan.recompute ? "on" : "off",
      plan.tp > 1 ? (plan.sequence_parallel ? "on" : "off") : "n/a (tp=1)");
  out << fmt::format("{:<12} {:>5} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "ranks",
                     "stage", "parameters", "param bytes", "gradients", "optimizer", "activations",
                     "comm", "total");
  for (const RankMemory& g : plan.groups)
    out << fmt::format("{:<12} {:>5} {:>11.2f}M {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n",
                       rank_list(g.ranks), g.pp_stage, static_cast<double>(g.parameter_count) / 1e6,
                       format_bytes(g.parameters), format_bytes(g.gradients),
                       format_bytes(g.optimizer_state), format_bytes(g.activations),
                       format_bytes(g.comm_buffers), format_bytes(g.total));
  out << "activations by variant (* = the config's):\n";
  for (const RankMemory& g : plan.groups) {
    out << fmt::format("  ranks {}:", rank_list(g.ranks));
    for (const ActivationVariant& v : g.variants)
      out << fmt::format("  {}{} {}", v.configured ? "*" : "", variant_name(v, plan.tp > 1),
                         format_bytes(v.bytes));
    out << "\n";
    if (g.update_copies > g.activations)
      out << fmt::format(
          "  ranks {}: the ZeRO-1 update's gather copies ({}) outweigh the "
          "activations and set the total\n",
          rank_list(g.ranks), format_bytes(g.update_copies));
  }
  out << fmt::format("largest rank total: {}\n", format_bytes(plan.max_total()));
  return out.str();
}

std::string memory_plan_json(const MemoryPlan& plan) {
  nlohmann::json j;
  j["device"] = plan.device;
  j["strategy"] = plan.strategy;
  j["optimizer"] = plan.optimizer;
  j["schedule"] = plan.schedule;
  j["tp"] = plan.tp;
  j["pp"] = plan.pp;
  j["dp"] = plan.dp;
  j["virtual_stages"] = plan.virtual_stages;
  j["micro_batches"] = plan.micro_batches;
  j["batch_size"] = plan.batch_size;
  j["seq_len"] = plan.seq_len;
  j["grad_accum_steps"] = plan.grad_accum_steps;
  j["vocab_size"] = plan.vocab_size;
  j["padded_vocab"] = plan.padded_vocab;
  j["recompute"] = plan.recompute;
  j["sequence_parallel"] = plan.sequence_parallel;
  j["max_total_bytes"] = plan.max_total();
  nlohmann::json groups = nlohmann::json::array();
  for (const RankMemory& g : plan.groups) {
    nlohmann::json e;
    e["ranks"] = g.ranks;
    e["pp_stage"] = g.pp_stage;
    e["parameter_count"] = g.parameter_count;
    e["parameters_bytes"] = g.parameters;
    e["gradients_bytes"] = g.gradients;
    e["optimizer_state_bytes"] = g.optimizer_state;
    e["activations_bytes"] = g.activations;
    e["comm_buffers_bytes"] = g.comm_buffers;
    e["update_copies_bytes"] = g.update_copies;
    e["total_bytes"] = g.total;
    nlohmann::json variants = nlohmann::json::array();
    for (const ActivationVariant& v : g.variants)
      variants.push_back({{"recompute", v.recompute},
                          {"sequence_parallel", v.sequence_parallel},
                          {"bytes", v.bytes},
                          {"configured", v.configured}});
    e["activation_variants"] = variants;
    groups.push_back(e);
  }
  j["ranks"] = groups;
  return j.dump(2) + "\n";
}

int64_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;  // the kernel reports kB
  }
  return -1;
}

std::string memory_check_problem(const MemoryPlan& plan, const RankMemory& rank, int64_t held_bytes,
                                 int64_t free_bytes, int sharing_ranks, const std::string& where) {
  const int64_t still = std::max<int64_t>(rank.total - held_bytes, 0);
  const int64_t need = still * std::max(sharing_ranks, 1);
  if (need <= free_bytes) return "";
  std::vector<std::string> help;
  help.push_back(fmt::format("a smaller training.batch_size (now {})", plan.batch_size));
  if (!plan.recompute) {
    for (const ActivationVariant& v : rank.variants)
      if (v.recompute && v.sequence_parallel == plan.sequence_parallel &&
          v.bytes < rank.activations)
        help.push_back(fmt::format("model.recompute: true (activations {} instead of {})",
                                   format_bytes(v.bytes), format_bytes(rank.activations)));
  }
  if (plan.tp > 1 && !plan.sequence_parallel) help.push_back("parallel.sequence_parallel: true");
  if (plan.dp > 1 && plan.strategy.rfind("zero1", 0) != 0 && plan.optimizer == "adamw")
    help.push_back("parallel.strategy: \"zero1\" (shards the AdamW moments over dp)");
  help.push_back(
      fmt::format("a larger parallel.tp or parallel.pp (now tp={} pp={})", plan.tp, plan.pp));
  std::string helps;
  for (const std::string& h : help) helps += (helps.empty() ? "" : ", ") + h;
  return fmt::format(
      "the memory plan needs {} on rank(s) {} of this run (parameters {}, gradients {}, optimizer "
      "{}, activations {}, communication {}; braid-plan memory prints it), {} more than the {} "
      "already held{}, but {} has only {} free. What would help: {}. Set {}=1 to start anyway",
      format_bytes(rank.total), rank_list(rank.ranks), format_bytes(rank.parameters),
      format_bytes(rank.gradients), format_bytes(rank.optimizer_state),
      format_bytes(rank.activations), format_bytes(rank.comm_buffers), format_bytes(still),
      format_bytes(held_bytes),
      sharing_ranks > 1 ? fmt::format(", for each of the {} ranks sharing it", sharing_ranks) : "",
      where, format_bytes(free_bytes), helps, kSkipMemoryCheckEnv);
}

std::string start_of_run_memory_problem(const TrainConfig& config, int world_rank, Device device,
                                        const std::function<const char*(const char*)>& env) {
  const char* skip = env(kSkipMemoryCheckEnv);
  if (skip != nullptr && std::string(skip) == "1") return "";
  const MemoryPlan plan = plan_memory(config);
  const RankMemory& rank = plan.for_rank(world_rank);
  if (device.is_cpu()) {
    const int64_t available = host_available_bytes();
    if (available < 0) return "";  // no /proc/meminfo: nothing to compare with
    int sharing = 1;
    for (const char* name :
         {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
      const char* value = env(name);
      if (value == nullptr) continue;
      // SLURM writes "2(x3)" for three nodes of two tasks: the leading count is this node's.
      sharing = std::max(1, std::atoi(value));
      break;
    }
    return memory_check_problem(plan, rank, host_memory_stats().current_bytes, available, sharing,
                                "host memory (MemAvailable)");
  }
  const DeviceMemoryInfo info = device_memory_info(device);
  if (info.free_bytes < 0) return "";
  const DeviceMemoryStats braid = device_memory_stats(device);
  // Blocks braid's caching allocator holds unused are free to braid, not to cudaMemGetInfo.
  const int64_t free = info.free_bytes + (braid.reserved_bytes - braid.allocated_bytes);
  return memory_check_problem(plan, rank, braid.allocated_bytes, free, 1, device.str());
}

}  // namespace braid::train
