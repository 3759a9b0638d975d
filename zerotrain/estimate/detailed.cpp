#include "zerotrain/estimate/detailed.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "zerotrain/core/error.h"
#include "zerotrain/partition/layout.h"
#include "zerotrain/stages/plan.h"
#include "zerotrain/stages/unit_plan.h"
#include "zerotrain/stages/unit_schedule.h"

namespace zerotrain::estimate {
namespace {

constexpr int64_t kFp32 = 4;
constexpr int64_t kAdamBytes = 8;   // exp_avg and exp_avg_sq, fp32

int64_t bytes_of(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

// The engine's defaults (engine/mixed_precision.cpp): gradients accumulate in the training
// dtype, except bf16 at stage 0 (fp32); they travel in the training dtype.
int64_t accum_bytes(const Setup& s) {
  if (s.precision == Precision::kBf16 && !stages::traits_of(s.stage).shards_optimizer) return kFp32;
  return bytes_of(s.precision);
}

// The staging bytes alive at once while buckets are reduced (engine/grad_sync.cpp): each
// bucket's buffer lives from when it starts filling until its reduction is finished; with
// overlap_comm two reductions stay in flight while the next bucket fills.
int64_t staging_peak(const partition::GroupLayout& layout, int64_t element_bytes, bool overlap) {
  const size_t window = overlap ? 3 : 1;
  const auto& buckets = layout.buckets();
  int64_t peak = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    int64_t alive = 0;
    for (size_t k = b + 1 >= window ? b + 1 - window : 0; k <= b; ++k) alive += buckets[k].flat.numel * element_bytes;
    peak = std::max(peak, alive);
  }
  return peak;
}

// The group's layout as the engine builds it: buckets by size, or at stage 3 one per unit.
struct RankLayout {
  partition::GroupLayout layout;
  int64_t resident_numel = 0;
  int64_t gathered_numel = 0;   // stage 3: unit parameters alive at once
};

RankLayout layout_of(const ModelShape& model, const Setup& s, const stages::StageTraits& stage, int rank) {
  if (!stage.shards_parameters) {
    return {partition::GroupLayout(model.param_numels, std::max<int64_t>(1, s.reduce_bucket_size), s.world_size, rank)};
  }
  // A model known by its counts only (--params) is taken as DeepSpeed's estimator takes it:
  // all sharded, its largest layer gathered at a time.
  const bool counts_only = model.param_units.empty();
  std::vector<int> units = model.param_units;
  units.resize(model.param_numels.size(), counts_only ? 1 : 0);
  stages::apply_persistence(model.param_numels, units, {s.param_persistence_threshold, s.model_persistence_threshold});
  stages::UnitArrangement a = stages::arrange_units(model.param_numels, units, s.world_size, rank);
  RankLayout r{a.layout};
  std::vector<int64_t> unit_numels{0};   // by unit, in unit order (buckets run the other way)
  for (size_t b = a.layout.buckets().size(); b-- > 0;) {
    const int64_t n = a.layout.buckets()[b].flat.numel;
    if (a.unit_of_bucket[b] == 0) {
      r.resident_numel += n;
    } else {
      unit_numels.push_back(n);
    }
  }
  if (counts_only) {
    r.gathered_numel = model.largest_layer_params;
    return r;
  }
  // The stage's own schedule over a micro-step that enters the units in order and leaves
  // them in reverse (sharing between units is not modelled).
  std::vector<std::vector<int>> events;
  const int unit_count = static_cast<int>(unit_numels.size()) - 1;
  for (int u = 1; u <= unit_count; ++u) events.push_back({u});
  for (int u = unit_count; u >= 1; --u) events.push_back({u});
  const stages::UnitSchedule schedule(std::move(events), std::move(unit_numels),
                                      {s.prefetch_bucket_size, s.max_live_parameters, s.max_reuse_distance});
  r.gathered_numel = stages::simulate_gathered_peak(schedule, static_cast<std::size_t>(unit_count));
  return r;
}

Breakdown rank_states(const ModelShape& model, const Setup& s, int rank) {
  const stages::StageTraits stage = stages::traits_of(s.stage);
  const RankLayout rl = layout_of(model, s, stage, rank);
  const partition::GroupLayout& layout = rl.layout;
  const int64_t p = bytes_of(s.precision), a = accum_bytes(s), c = bytes_of(s.precision);
  const bool half = s.precision != Precision::kFp32;
  // The engine's own plan of its buffers (stages/plan.h), counted in bytes.
  const stages::GroupPlan plan = stages::plan_group(stage, layout, {half, a == kFp32, a == c}, rl.resident_numel);
  Breakdown b;
  b.params = plan.params_numel * p;
  b.gathered = rl.gathered_numel * p;   // a unit is gathered whole while it computes, with those prefetched or kept
  b.grads = (plan.grad_full_numel + plan.grad_shard_numel) * a;
  b.master = plan.master_numel * kFp32;
  b.optimizer = plan.optimizer_numel * kAdamBytes;
  // Buckets: staged in the communication dtype by a stage that keeps no full gradients, or
  // when they accumulate in another dtype than they travel in.
  const int64_t staging = plan.stages_every_bucket || a != c ? staging_peak(layout, c, s.overlap_comm) : 0;
  // The step converts 16-bit gradients to fp32 once (engine.cpp unscaled_fp32_gradients).
  const int64_t step_copy = plan.step_copy_numel * kFp32;
  b.buffers = std::max(staging, step_copy);
  if (s.offload_optimizer) {   // master, moments and an fp32 gradient shard on the host, as DeepSpeed keeps them
    const int64_t shard = layout.shard_numel();
    b.grads += shard * kFp32;
    b.host += b.master + b.optimizer + shard * kFp32;
  }
  if (s.offload_param && stage.shards_parameters) b.host += layout.shard_numel() * p;
  b.implemented = stages::is_supported(stage) && !s.offload_optimizer && !s.offload_param;
  return b;
}

int64_t tokens(const ModelShape& model, const Setup& s) {
  const int64_t t = s.seq_len > 0 ? s.seq_len : model.gpt->block_size;
  return s.micro_batch * t;
}

}  // namespace

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
    case Precision::kFp32: break;
  }
  return "fp32";
}

int64_t ModelShape::total_params() const { return std::accumulate(param_numels.begin(), param_numels.end(), int64_t{0}); }

int64_t activation_bytes(const ModelShape& model, const Setup& s) {
  const int64_t e = bytes_of(s.precision);
  if (model.gpt) {
    // What autograd keeps per token of each block (models.cpp's Block): the inputs of ln1,
    // qkv, proj, ln2, fc, the gelu and out (1 + 1 + 1 + 1 + 1 + 4 + 4 widths), the qkv output
    // that q, k and v view (3), the softmax output (n_head x seq), and the two layer norms'
    // fp32 mean and rstd.
    const GptDims& g = *model.gpt;
    const int64_t n = tokens(model, s), t = s.seq_len > 0 ? s.seq_len : g.block_size;
    const int64_t block = n * (16 * g.n_embd * e + g.n_head * t * e + 4 * kFp32);
    // ln_f's and head's inputs, and the fp32 log-softmax cross-entropy keeps.
    const int64_t top = n * (2 * g.n_embd * e + kFp32 * 2 + g.vocab_size * kFp32);
    // Checkpointed (zerotrain/activation, one segment per block): the forward keeps each
    // block's input, and backward recomputes one block at a time, so the high-water mark is
    // the inputs plus one block. tests/unit/activation_checkpoint_test.cpp measures both rows.
    const int64_t kept = s.activation_checkpointing ? g.n_layer * n * g.n_embd * e + block : g.n_layer * block;
    return kept + top;
  }
  if (model.mlp) {
    const MlpDims& m = *model.mlp;
    return s.micro_batch * ((m.n_in + m.n_layer * m.n_hidden) * e + 2 * m.n_out * kFp32);
  }
  return 0;
}

Breakdown estimate(const ModelShape& model, const Setup& s) {
  ZT_CHECK(s.world_size >= 1, UsageError, "--world_size must be at least 1");
  ZT_CHECK(s.micro_batch >= 1, UsageError, "--micro_batch must be at least 1");
  ZT_CHECK(s.reduce_bucket_size >= 1, UsageError, "--reduce_bucket_size must be at least 1 element");
  ZT_CHECK(s.seq_len >= 0, UsageError, "--seq_len must be positive");
  ZT_CHECK(!model.gpt || s.seq_len <= model.gpt->block_size, UsageError, "--seq_len ", s.seq_len,
           " is longer than the model's block_size ", model.gpt ? model.gpt->block_size : 0,
           " (its position embedding has no more rows); raise block_size in --model_config");
  ZT_CHECK(model.gpt || s.seq_len == 0, UsageError, "--seq_len applies to gpt only");
  const stages::StageTraits stage = stages::traits_of(s.stage);
  ZT_CHECK(!s.offload_param || stage.shards_parameters, UsageError, "parameter offload needs ZeRO stage 3");
  ZT_CHECK(!s.offload_optimizer || stage.shards_optimizer, UsageError, "optimizer offload needs ZeRO stage 1, 2 or 3");
  // The rank holding the most (chunks of uneven buckets differ by an element or so).
  Breakdown worst;
  for (int r = 0; r < s.world_size; ++r) {
    Breakdown b = rank_states(model, s, r);
    if (b.model_states() > worst.model_states()) worst = b;
    if (s.world_size > 64) break;   // the ranks differ by a few elements: rank 0 stands for all
  }
  worst.activations = activation_bytes(model, s);
  // During backward: the loss's fp32 gradient and its log-softmax gradient (GPT), the
  // largest parameter gradient before the engine moves it into its buffers, and the
  // gradients of activations that backward holds while it frees the activations themselves,
  // with the freed blocks the allocator keeps: 0.6 x the activations, fitted on the runs of
  // docs/estimator.md (the only fitted number here).
  const int64_t largest = model.param_numels.empty()
                              ? 0
                              : *std::max_element(model.param_numels.begin(), model.param_numels.end());
  worst.backward_transient = largest * bytes_of(s.precision) + worst.activations * 6 / 10;
  if (model.gpt) worst.backward_transient += tokens(model, s) * model.gpt->vocab_size * 2 * kFp32;
  worst.runtime = s.runtime_bytes;
  return worst;
}

namespace {

std::string mib(int64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / (1 << 20)); }

std::string options_of(const Setup& s) {
  std::string o = fmt::format("stage {}", s.stage);
  if (s.offload_optimizer) o += ", offload_optimizer=cpu";
  if (s.offload_param) o += ", offload_param=cpu";
  return o;
}

// The guide's order, fastest first: stage 0 (DDP) > 1 > 2 > 2 + optimizer offload > 3 >
// 3 + parameter offload > 3 + parameter and optimizer offload.
std::vector<Setup> fastest_first(const Setup& base) {
  std::vector<Setup> order;
  auto add = [&](int stage, bool offload_optimizer, bool offload_param) {
    Setup s = base;
    s.stage = stage;
    s.offload_optimizer = offload_optimizer;
    s.offload_param = offload_param;
    order.push_back(s);
  };
  add(0, false, false);
  add(1, false, false);
  add(2, false, false);
  add(2, true, false);
  add(3, false, false);
  add(3, false, true);
  add(3, true, true);
  return order;
}

}  // namespace

std::string detailed_report(const ModelShape& model, const Setup& base) {
  std::string out = fmt::format(
      "zerotrain's estimate for {} ({} parameters, largest layer {}), {} rank(s), micro-batch {}, sequence {}, "
      "reduce_bucket_size {}, overlap_comm {}. MiB per rank; \"host\" is the part offload moves to host memory, "
      "\"off host\" the rest of the peak.\n",
      model.name, model.total_params(), model.largest_layer_params, base.world_size, base.micro_batch,
      model.gpt ? (base.seq_len > 0 ? base.seq_len : model.gpt->block_size) : 0, base.reduce_bucket_size,
      base.overlap_comm ? "true" : "false");
  for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    Setup with = base;
    with.precision = precision;
    Setup checkpointed = with;
    checkpointed.activation_checkpointing = true;
    out += fmt::format("\n{}: activations {} MiB ({} MiB with activation checkpointing), runtime {} MiB\n",
                       to_string(precision), mib(activation_bytes(model, with)),
                       mib(activation_bytes(model, checkpointed)), mib(base.runtime_bytes));
    out += "| setup | params | grads | master | optimizer | buffers | model states | host | peak | off host | "
           "peak (ckpt) |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (Setup s : fastest_first(with)) {
      const Breakdown b = estimate(model, s);
      s.activation_checkpointing = true;
      const Breakdown ck = estimate(model, s);
      out += fmt::format("| {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", options_of(s),
                         b.implemented ? "" : " (not yet)", mib(b.params), mib(b.grads), mib(b.master),
                         mib(b.optimizer), mib(b.buffers), mib(b.model_states()), mib(b.host), mib(b.peak()),
                         mib(b.peak() - b.host), mib(ck.peak()));
    }
  }
  return out;
}

Advice advise(const ModelShape& model, const Setup& base, int64_t memory_per_rank, std::optional<int64_t> host_memory,
              int ranks_per_node) {
  ZT_CHECK(memory_per_rank > 0, UsageError, "--memory_per_rank must be positive");
  Advice advice;
  std::string why;
  for (const Setup& s : fastest_first(base)) {
    const Breakdown b = estimate(model, s);
    const int64_t on_rank = b.peak() - b.host;
    const int64_t on_host = b.host * ranks_per_node;
    const bool rank_ok = on_rank <= memory_per_rank;
    const bool host_ok = b.host == 0 || !host_memory || on_host <= *host_memory;
    why += fmt::format("  {}: {} MiB per rank{}{}\n", options_of(s), mib(on_rank),
                       b.host > 0 ? fmt::format(" + {} MiB of host memory for {} rank(s)", mib(on_host), ranks_per_node)
                                  : std::string(),
                       rank_ok && host_ok ? " - fits" : rank_ok ? " - the host memory does not fit" : " - does not fit");
    if (rank_ok && host_ok) {
      advice = {s, b, true, why, ""};
      break;
    }
  }
  if (!advice.fits) {
    advice.why = why;
    return advice;
  }
  const Setup& s = advice.setup;
  std::string zero = fmt::format("\"stage\": {}", s.stage);
  if (stages::traits_of(s.stage).shards_optimizer) zero += fmt::format(", \"reduce_bucket_size\": {}, \"overlap_comm\": {}", s.reduce_bucket_size,
                                        s.overlap_comm ? "true" : "false");
  if (s.offload_optimizer) zero += ", \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}";
  if (s.offload_param) zero += ", \"offload_param\": {\"device\": \"cpu\", \"pin_memory\": true}";
  std::string json = fmt::format("{{\n  \"zero_optimization\": {{{}}}", zero);
  if (s.precision == Precision::kBf16) json += ",\n  \"bf16\": {\"enabled\": true}";
  if (s.precision == Precision::kFp16) json += ",\n  \"fp16\": {\"enabled\": true, \"initial_scale_power\": 16}";
  advice.config_json = json + "\n}";
  return advice;
}

}  // namespace zerotrain::estimate
